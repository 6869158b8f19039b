"""Why did (or will) a training Job fail?  Pure functions over Job / Pod / Event dicts as the API returns them.

``job_state(job)``       -> "succeeded" | "failed" | "active"
``blocking_problem(...)``-> a problem that keeps an *active* Job from ever progressing on its own
                            (image pull, container config, unschedulable pod, quota refusal), or None
``failure_reason(...)``  -> one line naming the cause of a failed Job, for the task error and the alert: a pod's
                            (OOMKilled, exit code) before the Job's own condition; when its pods are gone, says so
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# The first words of the one-line reasons below (operators.training.metrics classifies by them, so a change of
# wording here is a change of the name there, never a string left behind in another module):
EXIT_CODE = "exit code"                 # a container that exited non-zero
UNSCHEDULABLE = "Unschedulable"         # a pod no node takes (the scheduler's reason)
QUOTA_REFUSED = "exceeded quota"        # a pod the ResourceQuota admission refused (its words)
POD_REASONS = ("DeadlineExceeded", "Evicted", "Preempted")   # a pod the kubelet or the scheduler ended

# A container stuck waiting for one of these never starts without a human changing something.
FATAL_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                 "CreateContainerError", "ErrImageNeverPull")


@dataclass(frozen=True)
class Problem:
    kind: str  # "fatal" | "unschedulable" | "quota"
    message: str


def _conditions(obj: dict) -> list[dict]:
    return (obj.get("status") or {}).get("conditions") or []


def _true(cond: dict) -> bool:
    return str(cond.get("status")) == "True"


def job_state(job: dict) -> str:
    status = job.get("status") or {}
    for cond in _conditions(job):
        if _true(cond) and cond.get("type") == "Failed":
            return "failed"
        if _true(cond) and cond.get("type") == "Complete":
            return "succeeded"
    if (status.get("failed") or 0) > 0 and (job.get("spec") or {}).get("backoffLimit", 6) == 0:
        # backoffLimit 0: the first failed pod fails the Job even before the controller writes the condition
        return "failed"
    return "active"


def _container_statuses(pod: dict) -> list[dict]:
    status = pod.get("status") or {}
    return (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])


def _memory_limit(pod: dict) -> str | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit:
            return str(limit)
    return None


def _event_text(event: dict) -> str:
    return str(event.get("message") or event.get("note") or "")


def pod_name(pod: dict) -> str:
    return (pod.get("metadata") or {}).get("name", "?")


def terminated_reason(pod: dict) -> str | None:
    """The cause of a container that ended badly, e.g. ``OOMKilled ...`` or ``exit code 3``; a pod the kubelet
    ended itself (Evicted, DeadlineExceeded, Preempted) names that first: its containers' exit code 137 is
    only the kill."""
    pod_status = pod.get("status") or {}
    if pod_status.get("reason") in POD_REASONS:
        return f"{pod_status['reason']}: pod {pod_name(pod)}: {pod_status.get('message', '')}".strip().rstrip(":")
    for cs in _container_statuses(pod):
        for state in (cs.get("state") or {}, cs.get("lastState") or {}):
            term = state.get("terminated")
            if not term:
                continue
            code = term.get("exitCode")
            reason = term.get("reason") or ""
            if reason == "OOMKilled":
                limit = _memory_limit(pod)
                return (f"OOMKilled: container {cs.get('name')} in pod {pod_name(pod)} exceeded its memory limit"
                        + (f" of {limit}" if limit else "") + f" (exit code {code})")
            if code not in (None, 0):
                detail = f" ({reason})" if reason and reason not in ("Error", "Completed") else ""
                msg = f": {term['message']}" if term.get("message") else ""
                return f"{EXIT_CODE} {code}{detail}: container {cs.get('name')} in pod {pod_name(pod)}{msg}"
    return None


def waiting_problem(pod: dict) -> str | None:
    for cs in _container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in FATAL_WAITING:
            msg = waiting.get("message") or ""
            image = cs.get("image")
            where = f"container {cs.get('name')} in pod {pod_name(pod)}" + (f" (image {image})" if image else "")
            return f"{waiting['reason']}: {where}" + (f": {msg}" if msg else "")
    return None


def unschedulable_problem(pod: dict, events: Iterable[dict] = ()) -> str | None:
    for cond in _conditions(pod):
        if cond.get("type") == "PodScheduled" and not _true(cond) and cond.get("reason") == "Unschedulable":
            msg = cond.get("message") or ""
            if not msg:
                msg = next((_event_text(e) for e in events if e.get("reason") == "FailedScheduling"
                            and (e.get("involvedObject") or {}).get("name") == pod_name(pod)), "")
            return f"{UNSCHEDULABLE}: pod {pod_name(pod)}: {msg}".rstrip(": ")
    return None


def quota_problem(events: Iterable[dict]) -> str | None:
    """The Job controller's latest FailedCreate refusal by a ResourceQuota, if any."""
    refusals = [e for e in events if e.get("reason") == "FailedCreate" and QUOTA_REFUSED in _event_text(e)]
    if not refusals:
        return None
    latest = max(refusals, key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "",
                                          (e.get("metadata") or {}).get("resourceVersion", "")))
    text = _event_text(latest)
    mark = f"{QUOTA_REFUSED}: "
    return mark + text.split(mark, 1)[1] if mark in text else text


def blocking_problem(pods: Iterable[dict], events: Iterable[dict]) -> Problem | None:
    pods, events = list(pods), list(events)
    for pod in pods:
        if msg := waiting_problem(pod):
            return Problem("fatal", msg)
    for pod in pods:
        if msg := unschedulable_problem(pod, events):
            return Problem("unschedulable", msg)
    if not any(not (p.get("metadata") or {}).get("deletionTimestamp") for p in pods):
        if msg := quota_problem(events):
            return Problem("quota", msg)
    return None


INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# the Job controller's FailJob message (pkg/controller/job/pod_failure_policy.go matchPodFailurePolicy)
_FAIL_JOB_POD = re.compile(r"for pod [^/\s]+/(\S+) failed with exit code")


def rank_of(pod: dict) -> int | None:
    """A gang's pod's rank (its completion index), None for a single-pod step's."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_ANNOTATION)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def culprit(job: dict, pods: Iterable[dict]) -> dict | None:
    """The pod whose failure failed the Job: the one the Job controller's podFailurePolicy message names, else
    the one that ended first with a failure (in a gang the others are stopped after it), else the newest."""
    pods = [p for p in pods if terminated_reason(p)]
    for cond in _conditions(job):
        if cond.get("type") in ("FailureTarget", "Failed") and (m := _FAIL_JOB_POD.search(cond.get("message") or "")):
            named = next((p for p in pods if pod_name(p) == m.group(1)), None)
            if named is not None:
                return named
    if any(rank_of(p) is not None for p in pods):
        return min(pods, key=_finished_at, default=None)
    return max(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", default=None)


def _finished_at(pod: dict) -> str:
    ends = [(cs.get("state") or {}).get("terminated", {}).get("finishedAt") or "~" for cs in _container_statuses(pod)]
    return min(ends, default="~")


def failure_reason(job: dict, pods: Iterable[dict], events: Iterable[dict]) -> str:
    pods, events = list(pods), list(events)
    deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
    failed = next((c for c in _conditions(job) if c.get("type") == "Failed" and _true(c)), None)
    if failed and failed.get("reason") == "DeadlineExceeded":
        return (f"DeadlineExceeded: the Job ran longer than its deadline of {deadline}s (the task's "
                "execution_timeout) and was stopped")
    if (pod := culprit(job, pods)) is not None:
        msg = terminated_reason(pod)
        rank = rank_of(pod)
        if rank is None:
            return msg
        workers = (job.get("spec") or {}).get("completions")
        return f"rank {rank}" + (f" of {workers} workers" if workers else "") + f" failed (pod {pod_name(pod)}): {msg}"
    if problem := blocking_problem(pods, events):
        return problem.message
    gone = "" if pods else _pods_gone(job, events)
    if failed:
        return f"{failed.get('reason') or 'Failed'}: {failed.get('message') or 'the Job failed'}{gone}"
    return f"the Job failed without a recorded reason{gone}"


def _pods_gone(job: dict, events: Iterable[dict]) -> str:
    """What is known of a failed Job whose pods are gone (deleted, garbage-collected): which pods it made (its
    ``SuccessfulCreate`` events, ``pkg/controller/job/job_controller.go``) and that their cause cannot be read."""
    created = sorted({_event_text(e).removeprefix("Created pod: ") for e in events
                      if e.get("reason") == "SuccessfulCreate" and _event_text(e).startswith("Created pod: ")})
    failed = (job.get("status") or {}).get("failed")
    which = f"its pod {', '.join(created)} is" if len(created) == 1 else (
        f"its pods {', '.join(created)} are" if created else "its pods are")
    return (f" ({which} gone, so the container's exit code and reason, e.g. OOMKilled, can no longer be read"
            + (f"; {failed} pod{'s' if failed != 1 else ''} failed" if failed else "") + ")")
