"""What a running pod uses now beside what it holds, for the page's instance and training rows (pure: no I/O).

The reading is the metrics API's PodMetrics (``metrics.k8s.io/v1beta1``, metrics-server's: the CPU rate over its
window, the last working set), read by ``sources.pod_metrics`` in one list across namespaces per page poll, so the
cost does not grow with the rows. What is held is the pod's own spec: CPU requested, memory limit (the kernel kills
at the limit, so that is what the working set is measured against), GPUs requested. GPU utilisation has no
source here (the metrics API has none; dcgm-exporter's series are on the dashboard), and the row says so rather
than showing a number. Without the metrics API, or before a pod's first reading, ``missing`` says which: the
page words it; a made-up figure is never shown.

A training row also shows its step's peak (``step_peak``): what the step's follower recorded on its Job
(``operators.training.usage.PEAK_ANNOTATION``), while it runs and after it ended, as long as the Job exists,
against the Job's own pod template (memory limit, CPU request). The annotation is read with ``read_peak``:
bounded, numbers only; one a team member wrote by hand is "not readable", never a figure.
"""

from __future__ import annotations

from collections.abc import Mapping

from operators.core.nodepools import GPU_RESOURCE
from operators.core.quantity import parse_quantity

NO_API, NO_READING = "no_api", "no_reading"
NO_PEAK, BAD_PEAK = "none", "unreadable"   # step_peak: none recorded (a finished step); not Skiff's JSON


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


def _held(read) -> float | None:
    """What the Job's template holds; None if it does not parse (admitted by the API server, but not trusted)."""
    try:
        return read()
    except (ValueError, ArithmeticError):
        return None


def step_peak(job: Mapping | None, *, finished: bool, running: bool) -> dict | None:
    """A training row's peak from its Job: ``{memory, memory_limit, memory_percent, cpu, cpu_mean, cpu_request,
    cpu_percent, readings, pods, final, oom, missing}`` (bytes, cores; per pod: a gang's is its highest pod's);
    ``missing``: NO_READING (running, nothing recorded yet), NO_PEAK (finished, nothing recorded), BAD_PEAK
    (the annotation is not Skiff's). None: nothing to say (no Job, or a step not started)."""
    from operators.training.usage import PEAK_ANNOTATION, read_peak

    if job is None:
        return None
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(PEAK_ANNOTATION)
    empty = {"memory": None, "memory_limit": None, "memory_percent": None, "cpu": None, "cpu_mean": None,
             "cpu_request": None, "cpu_percent": None, "readings": 0, "pods": 0, "final": False, "oom": False}
    if value is None:
        return {**empty, "missing": NO_READING} if running else {**empty, "missing": NO_PEAK} if finished else None
    try:
        peak = read_peak(value)
    except ValueError:
        return {**empty, "missing": BAD_PEAK}
    containers = ((((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or [])
    limit = _held(lambda: _sum(containers, "limits", "memory")) or None   # 0: no share to show either
    request = _held(lambda: _sum(containers, "requests", "cpu") or _sum(containers, "limits", "cpu")) or None
    if peak.memory is None and not peak.oom:
        return {**empty, "missing": NO_READING if not finished else NO_PEAK}

    def share(used: float | None, held: float | None) -> float | None:
        return round(100 * used / held, 1) if used is not None and held else None

    return {"memory": peak.memory, "memory_limit": limit, "memory_percent": share(peak.memory, limit),
            "cpu": peak.cpu, "cpu_mean": peak.cpu_mean, "cpu_request": request, "cpu_percent": share(peak.cpu, request),
            "readings": peak.readings, "pods": peak.pods, "final": peak.final, "oom": peak.oom, "missing": None}
