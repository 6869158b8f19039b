"""Resource quantities and a pod's resource totals: the one quantity parser (`qty`), quantity text for
messages and status (`format_qty`), and what a pod requests (`pod_requests`, `pod_amounts`).

Used by validation, the scheduler, QoS, LimitRanger and ResourceQuota alike. Upstream:
k8s.io/apimachinery/pkg/api/resource/quantity.go (parsing, canonical form) and
k8s.io/component-helpers/resource/helpers.go (`PodRequests`: containers summed, init containers by max,
plus the pod overhead).
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

from kubernetes.utils import parse_quantity

ZERO = Decimal(0)
BINARY = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]
DECIMAL = [("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)]


# What k8s.io/apimachinery/pkg/api/resource/quantity.go `ParseQuantity` accepts: a sign, digits with at most one
# `.` (`parseQuantityString`), then a suffix its `quantitySuffixer.interpret` knows: binary (Ki..Ei), decimal
# (n, u, m, k, M..E) or an exponent (e/E and an integer). The Python client's parse_quantity is laxer (Decimal's
# `NaN`, `Infinity`, `1_000`, spaces; `K` for `k`): those are refused here as by the API server.
_QUANTITY = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?\Z")


@lru_cache(maxsize=4096)
def _qty(text: str) -> Decimal:
    if not _QUANTITY.match(text):
        raise ValueError(f"quantities must match the regular expression: {text!r}")
    return parse_quantity(text)


def qty(value) -> Decimal:
    """A resource quantity ("500m", "2Gi", "1e3", 4) as a Decimal; ValueError when it does not parse."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"quantities must match the regular expression: {value!r}")
    try:
        return _qty(str(value))
    except (ValueError, InvalidOperation) as e:
        raise ValueError(str(e)) from None


def format_qty(resource: str, amount: Decimal) -> str:
    """Canonical-looking quantity text for messages and status (`2`, `1500m`, `2Gi`)."""
    if amount != amount.to_integral_value():
        milli = amount * 1000
        return f"{int(milli)}m" if milli == milli.to_integral_value() else str(amount)
    n = int(amount)
    if n and resource.rsplit(".", 1)[-1] in ("memory", "storage", "ephemeral-storage"):
        for suffix, factor in BINARY + DECIMAL:
            if n % factor == 0:
                return f"{n // factor}{suffix}"
    return str(n)


def containers_of(pod: dict, key: str) -> list[dict]:
    return (pod.get("spec") or {}).get(key) or []


def container_amounts(container: dict, kind: str) -> dict[str, Decimal]:
    """A container's `requests` (falling back to its limits, as API defaulting does) or `limits`."""
    res = container.get("resources") or {}
    out = {k: qty(v) for k, v in (res.get("limits") or {}).items()} if kind == "requests" else {}
    out.update({k: qty(v) for k, v in (res.get(kind) or {}).items()})
    return out


def pod_amounts(pod: dict, kind: str) -> dict[str, Decimal]:
    """Effective pod requests/limits: sum over containers, at least the largest init container."""
    total: dict[str, Decimal] = {}
    for c in containers_of(pod, "containers"):
        for r, a in container_amounts(c, kind).items():
            total[r] = total.get(r, ZERO) + a
    for c in containers_of(pod, "initContainers"):
        for r, a in container_amounts(c, kind).items():
            total[r] = max(total.get(r, ZERO), a)
    for r, a in ((pod.get("spec") or {}).get("overhead") or {}).items():
        total[r] = total.get(r, ZERO) + qty(a)
    return total


def pod_requests(pod: dict) -> dict[str, Decimal]:
    return pod_amounts(pod, "requests")


def add(total: dict[str, Decimal], more: dict[str, Decimal]) -> None:
    for k, v in more.items():
        total[k] = total.get(k, ZERO) + v
