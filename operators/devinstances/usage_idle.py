"""Idle by usage (issue 37): an instance whose processes used (almost) no CPU for hours, whatever JupyterLab says.

Off unless ``[skiff] devinstance_usage_idle_hours`` is set. The source is the metrics API (metrics-server's
PodMetrics: the CPU rate over its last window, ~15 s), read at each culler pass in one list across namespaces, so
the rule is "under ``devinstance_usage_idle_cpu`` cores at every pass for that long": a pass that finds the
instance busy writes the time on its StatefulSet (``skiff.io/busy-at``), and the quiet time counts from the
later of that and its pod's start (a stop and start is a fresh start). A background job between two passes
that is done before the next one is not seen (the window is the metrics API's); JupyterLab's signal still is.

Never stops what it cannot see: no reading (no metrics API, the pod not yet read) keeps it, and so does a GPU
(the metrics API reads no GPU; a GPU computing with one idle CPU core is still working). ``decide`` is pure; the
culler reads, patches and stops.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from operators.core.quantity import parse_quantity
from operators.devinstances.idle import Verdict

ANN_BUSY_AT = "skiff.io/busy-at"
HOST_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def pod_cpu(item: Mapping | None) -> float | None:
    """Cores the pod's containers used over the metrics API's window; None: no reading."""
    if item is None:
        return None
    return float(sum(parse_quantity(str((c.get("usage") or {}).get("cpu", "0"))) for c in item.get("containers") or []))


def holds_device(pod: Mapping) -> bool:
    """Whether any container requests an extended resource (a GPU, whatever its vendor's name)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        for key in ((c.get("resources") or {}).get("limits") or {}):
            if key not in HOST_RESOURCES and not key.startswith("hugepages-"):
                return True
    return False


def _time(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def quiet_since(pod: Mapping, busy_at: str | None) -> datetime | None:
    """The later of the pod's start and the last pass that found it busy."""
    times = [t for t in (_time((pod.get("status") or {}).get("startTime")), _time(busy_at)) if t is not None]
    return max(times) if times else None


def decide(cpu: float | None, device: bool, since: datetime | None, now: datetime, idle_seconds: float,
           cpu_threshold: float) -> Verdict:
    if cpu is None or since is None:
        return Verdict(False, "no usage reading (metrics API): left running")
    if device:
        return Verdict(False, "holds a GPU, whose use the metrics API does not read: left running")
    if cpu >= cpu_threshold:
        return Verdict(False, f"busy: {cpu:.3f} cores now")
    quiet = (now - since).total_seconds()
    if quiet > idle_seconds:
        return Verdict(True, f"idle by usage: under {cpu_threshold:g} cores at every pass for {quiet / 3600:.1f} h "
                             f"(limit {idle_seconds / 3600:g} h)")
    return Verdict(False, f"under {cpu_threshold:g} cores for {quiet / 60:.0f} min")
