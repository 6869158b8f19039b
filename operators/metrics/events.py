"""Pure parts of the event metrics: which metric and labels an outcome makes, and the timings in a Job.

No I/O and no Airflow here (``emit`` sends what these return), so each rule is tested on plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from operators.metrics import catalogue as c

# (result "kind" or reason text prefix, label): the first match wins; a reason that matches none is "Other"
_BY_KIND = {"quota": "QuotaWaitTimeout", "queue": "QuotaWaitTimeout", "unschedulable": "Unschedulable", "discovery": "NoPod",
            "deleted": "JobDeleted"}
_BY_PREFIX = (("OOMKilled", "OOMKilled"), ("DeadlineExceeded", "DeadlineExceeded"), ("Preempted", "Preempted"),
              ("Evicted", "Evicted"), ("exit code", "ExitCode"), ("ErrImage", "ImagePull"),
              ("ImagePull", "ImagePull"), ("InvalidImageName", "ImagePull"), ("CreateContainer", "ContainerConfig"),
              ("Unschedulable", "Unschedulable"), ("exceeded quota", "QuotaWaitTimeout"))


def failure_class(reason: str | None, kind: str | None) -> str:
    """The ``reason`` label of a failed training step (``catalogue.FAILURE_REASONS``), from the follow
    result's ``kind`` and its one-line reason (``operators.training.failure``'s wording)."""
    if kind in _BY_KIND:
        return _BY_KIND[kind]
    text = (reason or "").lstrip()
    for prefix, label in _BY_PREFIX:
        if text.startswith(prefix):
            return label
    if "preempt" in text.lower():  # Kueue's eviction for preemption: "Preempted to accommodate a workload"
        return "Preempted"
    return "Other"


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _started_at(pod: Mapping) -> float | None:
    """When the pod's first container started running (``state.running`` or ``terminated.startedAt``)."""
    times = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        for state in ((cs.get("state") or {}), (cs.get("lastState") or {})):
            for phase in ("running", "terminated"):
                if t := _epoch((state.get(phase) or {}).get("startedAt")):
                    times.append(t)
    return min(times, default=None)


def job_times(job: Mapping | None, pods: Iterable[Mapping]) -> dict:
    """``created_at`` (the Job), ``first_running_at`` (its first container), ``completed_at`` (Complete):
    unix times or None, for the queue-wait and Complete -> success timings (second resolution: the API's)."""
    job = job or {}
    status = job.get("status") or {}
    complete = next((x for x in status.get("conditions") or []
                     if x.get("type") == "Complete" and str(x.get("status")) == "True"), {})
    started = [t for t in map(_started_at, pods) if t is not None]
    return {"created_at": _epoch((job.get("metadata") or {}).get("creationTimestamp")),
            "first_running_at": min(started, default=None),
            "completed_at": _epoch(status.get("completionTime") or complete.get("lastTransitionTime"))}


def training_outcome(result: Mapping, now: float) -> list[tuple[c.Metric, dict, float]]:
    """(metric, tags, value) for a finished training step: its counter, and the timings its Job shows
    (value: 1 for counters, milliseconds for timings, as Airflow's facade takes them)."""
    team = {"team": result.get("namespace") or "unknown"}
    times = result.get("times") or {}
    out: list[tuple[c.Metric, dict, float]] = []
    if result.get("status") == "success":
        out.append((c.TRAINING_SUCCEEDED, team, 1))
        if times.get("completed_at") is not None:
            out.append((c.TRAINING_COMPLETE_TO_SUCCESS, team, max(0.0, now - times["completed_at"]) * 1000))
    else:
        out.append((c.TRAINING_FAILED, {**team, "reason": failure_class(result.get("reason"), result.get("kind"))}, 1))
    if times.get("created_at") is not None and times.get("first_running_at") is not None:
        out.append((c.TRAINING_QUEUE_WAIT, team, max(0.0, times["first_running_at"] - times["created_at"]) * 1000))
    return out


# Sedna action reasons (operators.sedna.plan) -> counter; "Removed" (leftovers of a deleted CR) counts nothing
_SEDNA = {"Created": c.SEDNA_CREATED, "Recreated": c.SEDNA_HEALED, "DriftReverted": c.SEDNA_HEALED,
          "OwnerRepaired": c.SEDNA_HEALED, "RolledOut": c.SEDNA_ROLLED_OUT}


def sedna_action(cr_kind: str, namespace: str, reason: str) -> list[tuple[c.Metric, dict, float]]:
    metric = _SEDNA.get(reason)
    return [(metric, {"team": namespace, "kind": cr_kind}, 1)] if metric else []


def sedna_pass(cr_kind: str, summary: Mapping) -> list[tuple[c.Metric, dict, float]]:
    """A reconcile pass's summary (``operators.sedna.reconcile``): pass result, failures, duration."""
    errors = len(summary.get("errors") or [])
    out = [(c.SEDNA_PASSES, {"kind": cr_kind, "result": "failed" if errors else "ok"}, 1),
           (c.SEDNA_PASS_DURATION, {"kind": cr_kind}, float(summary.get("seconds") or 0) * 1000)]
    return out + ([(c.SEDNA_FAILED, {"kind": cr_kind}, errors)] if errors else [])


def instance_action(action: str, namespace: str, changed: bool) -> list[tuple[c.Metric, dict, float]]:
    metric = c.INSTANCE_ACTIONS.get({"create": "created", "start": "started", "stop": "stopped",
                                     "delete": "deleted"}.get(action, ""))
    return [(metric, {"team": namespace}, 1)] if metric and changed else []


def instances_culled(summary: Mapping) -> list[tuple[c.Metric, dict, float]]:
    """The culler's summary: one count per stopped ``"<namespace>/<name>: why"`` line, by team."""
    teams: dict[str, int] = {}
    for line in summary.get("stopped") or []:
        ns = line.split("/", 1)[0]
        teams[ns] = teams.get(ns, 0) + 1
    return [(c.INSTANCES_CULLED, {"team": ns}, n) for ns, n in sorted(teams.items())]


def platform_sync(report: Mapping) -> list[tuple[c.Metric, dict, float]]:
    """platform_sync's report: objects written, objects refused, and the run's result."""
    applied, errors = len(report.get("applied") or []), len(report.get("errors") or [])
    out = [(c.SYNC_RUNS, {"result": "failed" if errors else "ok"}, 1)]
    out += [(c.SYNC_WRITES, {}, applied)] if applied else []
    return out + ([(c.SYNC_REFUSALS, {}, errors)] if errors else [])
