"""What a running pod uses now beside what it holds, for the page's instance and training rows (pure: no I/O).

The reading is the metrics API's PodMetrics (``metrics.k8s.io/v1beta1``, metrics-server's: the CPU rate over its
window, the last working set), read by ``sources.pod_metrics`` in one list across namespaces per page poll, so the
cost does not grow with the rows. What is held is the pod's own spec: CPU requested, memory limit (the kernel kills
at the limit, so that is what the working set is measured against), GPUs requested. GPU utilisation has no
source here (the metrics API has none; dcgm-exporter's series are on the dashboard), and the row says so rather
than showing a number. Without the metrics API, or before a pod's first reading, ``missing`` says which: the
page words it; a made-up figure is never shown.
"""

from __future__ import annotations

from collections.abc import Mapping

from operators.core.nodepools import GPU_RESOURCE
from operators.core.quantity import parse_quantity

NO_API, NO_READING = "no_api", "no_reading"


def _sum(containers: list, kind: str, key: str, missing: object = None) -> float | None:
    """``missing``: a container without it counts as that; None: then the pod as a whole has none (no limit)."""
    values = [((c.get("resources") or {}).get(kind) or {}).get(key, missing) for c in containers]
    if not values or any(v is None for v in values):
        return None
    return float(sum(parse_quantity(str(v)) for v in values))


def pod_usage(pod: Mapping, item: Mapping | None, problem: str | None, gpu_resource: str = GPU_RESOURCE) -> dict:
    """``{cpu, memory, at, window, missing}`` used (cores, bytes; None when not known) and ``{cpu_request,
    memory_limit, gpu}`` held, for one running pod. ``item``: its PodMetrics (None: no reading); ``problem``:
    NO_API when the cluster serves no metrics API."""
    containers = (pod.get("spec") or {}).get("containers") or []
    held = {"cpu_request": _sum(containers, "requests", "cpu"), "memory_limit": _sum(containers, "limits", "memory"),
            "gpu": int(_sum(containers, "requests", gpu_resource, 0) or 0)}
    if problem is not None or item is None:
        return {"cpu": None, "memory": None, "at": None, "window": None,
                "missing": problem or NO_READING, **held}
    usage = [c.get("usage") or {} for c in item.get("containers") or []]
    return {"cpu": float(sum(parse_quantity(str(u.get("cpu", "0"))) for u in usage)),
            "memory": int(sum(parse_quantity(str(u.get("memory", "0"))) for u in usage)),
            "at": item.get("timestamp"), "window": item.get("window"), "missing": None, **held}
