"""The training step's event metrics: which metric and labels its outcome makes, and the timings its Job shows.

Pure (``operators.metrics.emit`` sends what these return), so each rule is tested on plain dicts. A failed step's
``reason`` label comes from the one-line reason ``operators.training.failure`` words: the prefixes it matches are
that module's own names for its wording, never a copy of the text.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import datetime

from operators.metrics import catalogue as c
from operators.metrics.emit import send
from operators.training import failure

# the follow result's "kind" (operators.training.follow) -> label
_BY_KIND = {"quota": "QuotaWaitTimeout", "queue": "QuotaWaitTimeout", "unschedulable": "Unschedulable",
            "discovery": "NoPod", "deleted": "JobDeleted"}
# a waiting reason the operator gives up on (failure.FATAL_WAITING) -> label; every one has a label
WAITING_LABEL = {"ErrImagePull": "ImagePull", "ImagePullBackOff": "ImagePull", "InvalidImageName": "ImagePull",
                 "ErrImageNeverPull": "ImagePull", "CreateContainerConfigError": "ContainerConfig",
                 "CreateContainerError": "ContainerConfig"}
# (the wording's first word, label): the first match wins; a reason that matches none is "Other"
_BY_PREFIX = (("OOMKilled", "OOMKilled"),
              *((reason, reason) for reason in failure.POD_REASONS),          # DeadlineExceeded, Evicted, Preempted
              (failure.EXIT_CODE, "ExitCode"),
              *((reason, WAITING_LABEL[reason]) for reason in failure.FATAL_WAITING),
              (failure.UNSCHEDULABLE, "Unschedulable"),
              (failure.QUOTA_REFUSED, "QuotaWaitTimeout"))


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


# ---- one-line calls for the operator -----------------------------------------------------------------------
def training_started(namespace: str) -> None:
    send([(c.TRAINING_STARTED, {"team": namespace}, 1)])


def training_reattached(namespace: str) -> None:
    send([(c.TRAINING_REATTACHED, {"team": namespace}, 1)])


def training_finished(result: Mapping) -> None:
    send(training_outcome(result, time.time()))
