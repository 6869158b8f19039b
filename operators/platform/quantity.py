"""Kubernetes resource quantities ("500m", "16Gi", "2", 1.5) as exact Decimals, and back to text.

Skiff's product code needs this for the platform file (quota sums, storage fit, admission); kubesim keeps its
own parser because the simulator must not import the product it tests.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$")
_SUFFIX = {
    "": Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}
GI = _SUFFIX["Gi"]
# kube-apiserver refuses quantities it cannot hold in an int64 ("9999Ei", "1e309"): refuse them here too
MAX_QUANTITY = Decimal(2) ** 63 - 1


def parse_quantity(value: object) -> Decimal:
    """``"16Gi"`` -> Decimal(17179869184); raises ``ValueError`` for anything that is not a quantity."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, int | float):
        value = repr(value) if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a quantity")
    match = _QUANTITY.fullmatch(value.strip())
    if not match:
        raise ValueError(f"{value!r} is not a quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            amount = Decimal(number) * (Decimal(10) ** int(suffix[1:]))
        else:
            amount = Decimal(number) * _SUFFIX[suffix]
    except (InvalidOperation, OverflowError) as exc:
        raise ValueError(f"{value!r} is not a quantity") from exc
    if abs(amount) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is too large for Kubernetes (at most 2^63-1)")
    return amount


def is_quantity(value: object) -> bool:
    try:
        return parse_quantity(value) >= 0
    except ValueError:
        return False


def quantity_text(value: object) -> str:
    """A quantity as the string a manifest carries: numbers become "2" / "0.5", strings stay as written."""
    if isinstance(value, str):
        return value.strip()
    parse_quantity(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def human(amount: Decimal, binary: bool) -> str:
    """Decimal -> short text for messages: 2 / 0.5 / 16Gi."""
    if binary and amount >= GI:
        gib = amount / GI
        return f"{gib.normalize():f}Gi" if gib == gib.to_integral_value() else f"{gib:.1f}Gi"
    text = f"{amount.normalize():f}"
    return text
