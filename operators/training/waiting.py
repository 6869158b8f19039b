"""What to do while waiting for a training Job: a pure decision, ``decide(seen, timers, now, settings)``.

It takes what the watches have seen (the Job, its pods, the Job's events if listed) and the waiting timers,
and returns an ``Outcome`` (the Job ended, or can never progress on its own) or ``Wait`` (maybe asking the
caller to list the Job's events), plus the updated timers. No I/O and no clock of its own, so every
waiting policy is tested without a cluster:

* no pod within ``pod_discovery_timeout`` (unless a quota refusal explains it);
* a quota refusal (only visible as events, listed every ``event_poll_interval`` while the Job has no pod,
  so a healthy Job costs no event requests) lasting ``quota_wait`` (None: wait for quota forever);
* a pod unschedulable for ``unschedulable_timeout``;
* an image-pull / container-config error, which never heals on its own: fail at once;
* a Job not seen at all ``JOB_UNSEEN_GRACE`` seconds after the start (a shared watch only reports what it
  sees change; the Job may have been deleted before the follower subscribed): have it read once in a while;
* a Job queued in Kueue (``settings.queued``): while it is suspended nothing above applies; Kueue's words
  (``queued``: the Workload's QuotaReserved message, the LocalQueue's pending count) are said whenever they
  change, and after ``queue_wait`` the step fails with them. A Job suspended again after it ran was preempted
  (Kueue evicts the Workload, then suspends the Job): said once per preemption (told apart by the Workload's
  Preempted message, which names the preemptor) with that message and time, even if the follower never saw the
  Job run, kept in ``Timers.preemptions`` for the task log and the e-mail, and followed on - it is
  not a failure. The pod-discovery clock starts when Kueue starts the Job. While a preempted Job is suspended
  the decision asks for the count to be written on its pod template (``Wait.annotate``,
  ``checkpoint.preemption_annotations``), so the next pod starts knowing it resumes and how often it was
  preempted; when Kueue starts it again the log says it resumed. A Job whose queue does not exist (Kueue's
  "LocalQueue skiff doesn't exist", ``queued.no_queue``) fails at once: no one would ever admit it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from operators.training import checkpoint, failure, queued

JOB_UNSEEN_GRACE = 10.0


@dataclass(frozen=True)
class FollowSettings:
    pod_discovery_timeout: float = 300.0
    quota_wait: float | None = 0.0  # seconds a quota refusal may last before failing; None = wait forever
    unschedulable_timeout: float | None = 1800.0
    log_tail_lines: int = 50
    event_poll_interval: float = 5.0  # only while the Job has no pod (quota refusals are events)
    queued: bool = False  # created suspended in a Kueue LocalQueue: follow its Workload too
    queue_wait: float | None = None  # seconds Kueue may keep it queued before failing; None = as long as the task may run
    usage_interval: float = 0.0  # seconds between usage readings for the end-of-step summary (usage.py); 0: none
    usage_advice_share: float = 0.25

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Seen:
    """What the watches saw: the Job (None: not listed yet; ``{"deleted": True, ...}``: gone or replaced)."""
    job: dict | None
    pods: tuple[dict, ...] = ()
    events: tuple[dict, ...] = ()
    workload: dict | None = None   # Kueue: the Job's Workload
    queue: dict | None = None      # Kueue: the Job's LocalQueue


@dataclass(frozen=True)
class Timers:
    start: float
    seen_pod: bool = False
    quota_since: float | None = None
    unschedulable_since: float | None = None
    events_at: float = float("-inf")
    job_read_at: float | None = None
    queued_since: float | None = None      # Kueue: suspended since (None: running or not queued)
    ran: bool = False                      # Kueue: the Job has run (unsuspended) at least once
    said: str | None = None                # Kueue: the last queue message said
    preemptions: tuple[str, ...] = ()      # Kueue: "<time>: <message>" of each preemption
    annotated: int = 0                     # Kueue: the preemption count last asked to be written on the template


@dataclass(frozen=True)
class Outcome:
    status: str  # "success" | "failed"
    reason: str | None = None  # None for a failed Job: the caller explains it from the objects (failure.py)
    kind: str | None = None  # "job" | "deleted" | "fatal" | "unschedulable" | "quota" | "discovery" | "queue"
    preemptions: tuple[str, ...] = ()  # Kueue: each preemption the Job lived through ("<time>: <message>")


@dataclass(frozen=True)
class Wait:
    list_events: bool = False  # the caller should list the Job's events, then decide again
    read_job: bool = False  # the caller should read the Job (absent: gone), then decide again
    say: tuple[str, ...] = ()  # lines for the task log (Kueue's words while queued)
    annotate: dict[str, str] | None = None  # the caller should write these on the Job's pod template, then decide


def decide(seen: Seen, timers: Timers, now: float, settings: FollowSettings,
           ref: str) -> tuple[Outcome | Wait, Timers]:
    """``ref`` is "namespace/name", for the messages."""
    decision, timers = _decide(seen, timers, now, settings, ref)
    if isinstance(decision, Outcome) and timers.preemptions:
        decision = replace(decision, preemptions=timers.preemptions)
    return decision, timers


def _in_queue(seen: Seen, timers: Timers, now: float, settings: FollowSettings,
              ref: str) -> tuple[Outcome | Wait | None, Timers]:
    """Kueue: (a decision while the Job is suspended, or None once it runs; the timers)."""
    job, lines = seen.job, []
    hit = queued.preemption(seen.workload)   # Kueue's messages name the preemptor's uid: one per preemption
    told = hit is not None and any(note.endswith(f": {hit[1]}") for note in timers.preemptions)
    if told and hit[0] and hit[1].startswith(queued.PODS_READY_TIMEOUT):
        # waitForPodsReady's message is the same at every eviction: its time tells a new one from the last
        told = f"{hit[0]}: {hit[1]}" in timers.preemptions
    if hit is not None and not told:
        note = f"{hit[0] or 'time not recorded'}: {hit[1]}"
        if hit[1].startswith(queued.PODS_READY_TIMEOUT):
            lines.append(f"Job {ref} was evicted by Kueue at {note} - not all of its pods were ready within Kueue's "
                         "waitForPodsReady timeout (a node short for the gang?); its pods were stopped and it waits "
                         "in the queue to run again after Kueue's back-off (not a failed try)")
        else:
            lines.append(f"Job {ref} was preempted by Kueue at {note} - its pods were stopped and it waits in the "
                         "queue to run again (a preemption is not a failed try)")
        timers = replace(timers, preemptions=timers.preemptions + (note,))
    count = checkpoint.preemption_count(seen.workload, job, len(timers.preemptions))
    if not queued.suspended(job):
        if timers.queued_since is not None or not timers.ran:   # just started (again): discovery from now
            if count and timers.queued_since is not None:
                lines.append(f"Job {ref} resumed: Kueue admitted it again after {count} preemption(s); its new pod "
                             f"starts with {checkpoint.ENV_RESUME}=1, {checkpoint.ENV_PREEMPTIONS}="
                             f"{checkpoint.written_preemptions(job)} and the same {checkpoint.ENV_DIR}")
            timers = replace(timers, queued_since=None, ran=True, said=None, start=now)
        return (Wait(say=tuple(lines)) if lines else None), timers
    if timers.queued_since is None:
        timers = replace(timers, queued_since=now)
    annotate = checkpoint.preemption_annotations(job, count)
    if annotate and timers.annotated != count:   # asked once per count; a refusal is said, not retried
        return Wait(say=tuple(lines), annotate=annotate), replace(timers, annotated=count)
    message = queued.waiting_message(seen.workload, seen.queue, queued.queue_name(job))
    if message != timers.said:
        lines.append(f"Job {ref} is queued in Kueue: {message}")
        timers = replace(timers, said=message)
    if (missing := queued.no_queue(seen.workload, seen.queue)) is not None:
        return Outcome("failed", f"no queue will admit Job {ref}: Kueue says \"{missing[0]}\" and keeps it suspended "
                       f"until that queue exists; the Job is deleted (its checkpoint directory is kept for the next "
                       f"try). To fix: {missing[1]}", "queue"), timers
    limit = settings.queue_wait
    if limit is not None and now - timers.queued_since >= limit:
        return Outcome("failed", f"Kueue did not admit Job {ref} within {limit:g}s (queue_wait): {message}",
                       "queue"), timers
    return Wait(say=tuple(lines)), timers


def _decide(seen: Seen, timers: Timers, now: float, settings: FollowSettings,
            ref: str) -> tuple[Outcome | Wait, Timers]:
    job = seen.job
    if job is None:
        if now - (timers.job_read_at if timers.job_read_at is not None else timers.start) >= JOB_UNSEEN_GRACE:
            return Wait(read_job=True), replace(timers, job_read_at=now)
        return Wait(), timers
    if job.get("deleted"):
        return Outcome("failed", f"the Job {ref} was deleted while the task waited for it", "deleted"), timers
    state = failure.job_state(job)
    if state == "succeeded":
        return Outcome("success"), timers
    if state == "failed":
        return Outcome("failed", None, "job"), timers
    if settings.queued:
        waiting, timers = _in_queue(seen, timers, now, settings, ref)
        if waiting is not None:
            return waiting, timers
    pods = [p for p in seen.pods if not p["metadata"].get("deletionTimestamp")]
    timers = replace(timers, seen_pod=timers.seen_pod or bool(pods))
    problem = failure.blocking_problem(pods, [])
    if problem and problem.kind == "fatal":
        return Outcome("failed", problem.message, "fatal"), timers
    if problem and problem.kind == "unschedulable":
        since = timers.unschedulable_since if timers.unschedulable_since is not None else now
        timers = replace(timers, unschedulable_since=since)
        limit = settings.unschedulable_timeout
        if limit is not None and now - since >= limit:
            return Outcome("failed", f"{problem.message} (pending for {limit:g}s)", "unschedulable"), timers
    else:
        timers = replace(timers, unschedulable_since=None)
    if pods:
        return Wait(), replace(timers, quota_since=None)
    # No pod: the events say why (a quota refusal); have them listed now and then, before judging.
    if now - timers.start >= 1.0 and now - timers.events_at >= settings.event_poll_interval:
        return Wait(list_events=True), replace(timers, events_at=now)
    quota = failure.quota_problem(list(seen.events))
    if quota:
        since = timers.quota_since if timers.quota_since is not None else now
        timers = replace(timers, quota_since=since)
        if settings.quota_wait is not None and now - since >= settings.quota_wait:
            return Outcome("failed", quota, "quota"), timers
        return Wait(), timers  # waiting for quota may outlast pod discovery
    if not timers.seen_pod and now - timers.start >= settings.pod_discovery_timeout:
        return Outcome("failed", f"no pod was created for Job {ref} within {settings.pod_discovery_timeout:g}s "
                       "(pod_discovery_timeout)", "discovery"), timers
    return Wait(), timers


def started(pod: dict) -> bool:
    """The pod's container has started (so its log can be followed)."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state or "terminated" in state:
            return True
    return False
