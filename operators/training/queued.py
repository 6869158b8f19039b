"""What Kueue says about a queued training Job, in Kueue's own words (pure: Workload and LocalQueue in, text out).

Kueue (kubernetes-sigs/kueue v0.19) writes its decisions on the Job's Workload (``pkg/workload/workload.go``):
* ``QuotaReserved`` False with the scheduler's pending message while the Workload waits, e.g. "couldn't assign
  flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 1 more needed"
  (``pkg/scheduler/scheduler.go`` / ``flavorassigner``); True "Quota reserved in ClusterQueue X" once admitted;
* ``Evicted`` True reason ``Preempted`` and ``Preempted`` True (``InClusterQueue`` / ``InCohortReclamation``)
  with ``preemptionMessage`` ("Preempted to accommodate a workload (UID: ..., JobUID: ...) due to reclamation
  within the cohort; preemptor path: ...; preemptee path: ...", ``pkg/scheduler/preemption/preemption.go``);
  both are set back to False with "Previously: <message>" when quota is reserved again
  (``workload.SetQuotaReservation``).
A LocalQueue's ``status.pendingWorkloads`` counts the Workloads waiting in it (``pkg/controller/core/
localqueue_controller.go``); Kueue gives a Workload's own position only through its visibility API, which
Skiff does not call, so the follower says how many wait in the queue.

A Workload whose LocalQueue (or that queue's ClusterQueue) does not exist stays pending for good: Kueue's workload
controller sets QuotaReserved False, reason Inadmissible, "LocalQueue <name> doesn't exist" / "ClusterQueue <name>
doesn't exist" and admits it only once someone creates the queue (``pkg/controller/core/workload_controller.go``,
Reconcile). ``no_queue`` reads that, so the step fails saying so instead of waiting on a queue no one serves.
"""

from __future__ import annotations

import re

from operators.core.checks import bounded

PREVIOUSLY = "Previously: "
# waitForPodsReady's eviction (pkg/controller/core/workload_controller.go reconcileNotReadyTimeout: Evicted True,
# reason PodsReadyTimeout, "Exceeded the PodsReady timeout <namespace>/<workload>"), requeued after a back-off
PODS_READY_TIMEOUT = "Exceeded the PodsReady timeout"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"   # on every Job's Workload (pkg/controller/constants: JobUIDLabel)


def condition(obj: dict | None, type_: str) -> dict | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c.get("type") == type_),
                None)


def suspended(job: dict) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


def queue_name(job: dict) -> str | None:
    from operators.platform.kueue import QUEUE_NAME_LABEL

    return ((job.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL)


# Kueue's words for a missing queue (workload_controller.go: fmt.Sprintf("LocalQueue %s doesn't exist", ...))
_MISSING = re.compile(r"^(LocalQueue|ClusterQueue) (\S*) doesn't exist$")
FIXES = {"LocalQueue": "run the platform_sync DAG, which creates each team's LocalQueues, or set queueing: quota in "
                       "the platform file",
         "ClusterQueue": "a cluster admin applies the team's ClusterQueue (python -m operators.rbac teams --platform "
                         "FILE | kubectl apply -f -), or set queueing: quota in the platform file"}


def no_queue(workload: dict | None, queue: dict | None) -> tuple[str, str] | None:
    """(Kueue's message, the fix) when Kueue says the Workload's queue does not exist - unless the LocalQueue it
    named has appeared since (Kueue then reconsiders it); None otherwise."""
    reserved = condition(workload, "QuotaReserved")
    if reserved is None or reserved.get("status") != "False":
        return None
    hit = _MISSING.match(reserved.get("message") or "")
    if hit is None or (hit.group(1) == "LocalQueue" and queue is not None):
        return None
    return hit.group(0), FIXES[hit.group(1)]


def left_for_kueue(job: dict) -> bool:
    """A Job created suspended in a Kueue LocalQueue (or suspended by Kueue after a preemption) and not yet
    finished: only Kueue will ever start it."""
    from operators.training.failure import job_state

    return suspended(job) and queue_name(job) is not None and job_state(job) == "active" \
        and not job["metadata"].get("deletionTimestamp")


def waiting_message(workload: dict | None, queue: dict | None, queue_label: str | None) -> str:
    """Why the Job waits: the Workload's QuotaReserved message, and how many wait in its LocalQueue."""
    if workload is None:
        text = "waiting for Kueue to create the Job's Workload"
    else:
        reserved = condition(workload, "QuotaReserved")
        if reserved is None:
            text = "waiting for Kueue to consider the Workload"
        elif reserved.get("status") == "True":
            text = f"{reserved.get('message') or 'quota reserved'}; waiting for Kueue to start the Job"
        else:
            text = reserved.get("message") or reserved.get("reason") or "pending"
    pending = ((queue or {}).get("status") or {}).get("pendingWorkloads")
    if queue_label and pending is not None:
        text += f" (LocalQueue {queue_label}: {pending} workload{'s' if pending != 1 else ''} pending)"
    return bounded(text, 600)


def preemption(workload: dict | None) -> tuple[str, str] | None:
    """(time, message) of the Workload's latest preemption or eviction, current or just reset ("Previously: "),
    None if it was never evicted."""
    for type_ in ("Preempted", "Evicted"):
        c = condition(workload, type_)
        if c is None:
            continue
        message = c.get("message") or ""
        if c.get("status") == "True":
            return c.get("lastTransitionTime") or "", bounded(message, 600)
        if message.startswith(PREVIOUSLY):   # already reset: its time is the new reservation's, not the eviction's
            return "", bounded(message.removeprefix(PREVIOUSLY), 600)
    return None
