"""Kubernetes resource quantities ("500m", "16Gi", "2", 1.5) as exact Decimals and back to text, and what a
request may ask: cpu cores, memory in GiB, whole GPUs (pure).

The one quantity parser of Skiff's product code: the platform file (quota sums, storage fit), admission, the
requests of training steps and development instances, Sedna's drift compare and the page's figures all use it.
It follows ``k8s.io/apimachinery/pkg/api/resource/quantity.go`` (suffixes, int64 bound). kubesim keeps its own
parser because the simulator must not import the product it tests.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from operators.core.checks import invalid

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
        if len(suffix) > 1 and suffix[0] in "eE":     # an exponent; "E" alone is exa (10^18)
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


# ---- what a request may ask ------------------------------------------------------------------------------
_CPU = re.compile(r"(\d+(\.\d+)?|\.\d+)m?")
_NUMBER = re.compile(r"(\d+(\.\d+)?|\.\d+)")
MILLI = Decimal("0.001")
MIN_MEMORY_GI = Decimal(1) / 1024  # 1 MiB: less is no container and rounds to zero in the quota


def _amount(field: str, value: Any, plain: re.Pattern[str], unit: str) -> Decimal:
    """A finite, positive, int64-sized amount from a number or a string matching ``plain`` (whole string)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise invalid(field, value, f"must be a positive {unit}")
    if isinstance(value, float) and not math.isfinite(value):
        raise invalid(field, value, "must be a finite number")
    if isinstance(value, str) and not plain.fullmatch(value.strip()):
        raise invalid(field, value, f"must be a positive {unit}")
    try:
        amount = parse_quantity(value)
    except ValueError as exc:
        raise invalid(field, value, str(exc).split(": ", 1)[-1]) from None
    if amount <= 0:
        raise invalid(field, value, f"must be a positive {unit}")
    return amount


def _decimal_text(amount: Decimal) -> str:
    text = f"{amount.normalize():f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def cpu_quantity(value: Any) -> str:
    """``2`` / ``0.5`` / ``"500m"`` -> a Kubernetes cpu quantity string; at least 1m, whole millicores (a
    finer value rounds to zero in the quota, so it could escape it)."""
    cores = _amount("cpu", value, _CPU, "number of cores or a quantity like '500m'")
    if cores < MILLI or cores % MILLI:
        raise invalid("cpu", value, "must be a whole number of millicores (at least 1m): finer rounds to zero")
    if isinstance(value, str):
        return value.strip()
    return _decimal_text(cores)


def memory_gi(value: Any) -> str:
    """Memory in GiB (``4``, ``0.5``, ``"16"``) -> the number as text (the template appends ``Gi``); >= 1 MiB."""
    gib = _amount("memory", value, _NUMBER, "number of GiB (e.g. 4 or '0.5')")
    if gib < MIN_MEMORY_GI:
        raise invalid("memory", value, "must be at least 1 MiB (0.0009765625 GiB): less rounds to zero")
    if gib * 2**30 > 2**63 - 1:
        raise invalid("memory", value, "is too large for Kubernetes (at most 2^63-1 bytes)")
    return value.strip() if isinstance(value, str) else _decimal_text(gib)


def gpu_count(value: Any) -> int:
    if isinstance(value, bool):
        raise invalid("gpu", value, "must be a whole number of GPUs >= 0")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int):
        raise invalid("gpu", value, "must be a whole number of GPUs >= 0 (GPUs cannot be shared fractionally)")
    if value < 0:
        raise invalid("gpu", value, "must be >= 0")
    if value > MAX_QUANTITY:
        raise invalid("gpu", value, "is too large for Kubernetes (at most 2^63-1)")
    return value
