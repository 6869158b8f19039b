"""Why did (or will) a training Job fail?  Pure functions over Job / Pod / Event dicts as the API returns them.

``job_state(job)``       -> "succeeded" | "failed" | "active"
``blocking_problem(...)``-> a problem that keeps an *active* Job from ever progressing on its own
                            (image pull, container config, unschedulable pod, quota refusal), or None
``failure_reason(...)``  -> one line naming the cause of a failed Job, for the task error and the alert: a pod's
                            (OOMKilled, exit code) before the Job's own condition; when its pods are gone, says so
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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
    if pod_status.get("reason") in ("DeadlineExceeded", "Evicted", "Preempted"):
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
                return f"exit code {code}{detail}: container {cs.get('name')} in pod {pod_name(pod)}{msg}"
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
            return f"Unschedulable: pod {pod_name(pod)}: {msg}".rstrip(": ")
    return None


def quota_problem(events: Iterable[dict]) -> str | None:
    """The Job controller's latest FailedCreate refusal by a ResourceQuota, if any."""
    refusals = [e for e in events if e.get("reason") == "FailedCreate" and "exceeded quota" in _event_text(e)]
    if not refusals:
        return None
    latest = max(refusals, key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "",
                                          (e.get("metadata") or {}).get("resourceVersion", "")))
    text = _event_text(latest)
    return "exceeded quota: " + text.split("exceeded quota: ", 1)[1] if "exceeded quota: " in text else text


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


def failure_reason(job: dict, pods: Iterable[dict], events: Iterable[dict]) -> str:
    pods, events = list(pods), list(events)
    deadline = (job.get("spec") or {}).get("activeDeadlineSeconds")
    failed = next((c for c in _conditions(job) if c.get("type") == "Failed" and _true(c)), None)
    if failed and failed.get("reason") == "DeadlineExceeded":
        return (f"DeadlineExceeded: the Job ran longer than its deadline of {deadline}s (the task's "
                "execution_timeout) and was stopped")
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "", reverse=True):
        if msg := terminated_reason(pod):
            return msg
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
