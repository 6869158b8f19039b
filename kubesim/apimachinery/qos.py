"""A pod's QoS class, by the rule of Kubernetes' `GetPodQOS` (pkg/apis/core/helper/qos), which the apiserver
records in a new pod's status and the kubelet keeps there.

Over all containers and init containers, sum the positive cpu/memory requests and limits. No request and
no limit → BestEffort. Guaranteed when every container has both a cpu and a memory limit and the summed
requests equal the summed limits (quantities compared by value: cpu `1` == `1000m`). Else Burstable.
A request a container leaves out while stating the limit counts as the limit (the API's defaulting of
requests from limits, which the real server applies before computing the class).
"""
from __future__ import annotations

from decimal import Decimal

from kubesim.apimachinery.resources import qty

_COMPUTE = ("cpu", "memory")


def _amount(value) -> Decimal | None:
    try:
        q = qty(value)
    except ValueError:
        return None
    return q if q > 0 else None


def qos_class(spec: dict) -> str:
    """BestEffort, Burstable or Guaranteed for a pod spec."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for c in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        res = (c.get("resources") or {}) if isinstance(c, dict) else {}
        lim_in = res.get("limits") or {}
        req_in = {**lim_in, **(res.get("requests") or {})}       # requests default to limits
        for name in _COMPUTE:
            req = _amount(req_in.get(name)) if name in req_in else None
            if req is not None:
                requests[name] = requests.get(name, Decimal(0)) + req
        found = set()
        for name in _COMPUTE:
            lim = _amount(lim_in.get(name)) if name in lim_in else None
            if lim is not None:
                found.add(name)
                limits[name] = limits.get(name, Decimal(0)) + lim
        if found != set(_COMPUTE):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and len(requests) == len(limits) and all(limits.get(k) == v for k, v in requests.items()):
        return "Guaranteed"
    return "Burstable"
