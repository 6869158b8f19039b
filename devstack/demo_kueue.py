"""The Kueue part of ``make demo KUEUE=1`` (``python -m devstack demo --kueue``): nlp's step borrows recsys' idle
GPUs, recsys' online step reclaims them, Kueue preempts the borrower, which saves its checkpoint on SIGTERM, waits
suspended for GPUs while the online step runs, and resumes from its checkpoint (the DAGs:
``devstack/demo_dags/kueue_demo.py``).

What happened is read from the Job's history, never from a state sampled at the right moment: Kueue's job
reconciler records an Event on the Job each time it stops it (reason ``Stopped``, the Workload's eviction message:
``Preempted to accommodate a workload ...``) and each time it starts it (reason ``Started``, ``Admitted by
clusterQueue <cq>``), kueue ``pkg/controller/jobframework/reconciler.go`` (``StopWorkload``, ``startJob``). A
repeat of the same event is one Event with a higher ``count`` (client-go ``tools/record/events_cache.go``), so the
admissions are the ``Started`` events' counts summed. A preemption that lasted 0.3 s is still in the history after
it is over; a poll every 0.5 s for ``spec.suspend`` missed it (issue 36).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from devstack.stack import Stack

KUEUE_BORROW, KUEUE_ONLINE = "kueue_demo_nlp_borrow", "kueue_demo_recsys_online"   # devstack/demo_dags/kueue_demo.py
PREEMPTED = "Preempted"   # the start of Kueue's eviction message for a preemption (preemption.go)


def _when(event: Any) -> datetime | None:
    return event.last_timestamp or event.first_timestamp or event.event_time


def job_events(core, namespace: str, job_name: str) -> list:
    """The Job's Events (core/v1), oldest first: a recorder names each ``<object>.<hex of its UnixNano>``
    (client-go ``tools/record/event.go`` ``makeEvent``), so the names sort in time order."""
    items = [e for e in core.list_namespaced_event(namespace).items
             if e.involved_object and e.involved_object.kind == "Job" and e.involved_object.name == job_name]
    return sorted(items, key=lambda e: e.metadata.name)


def preemption(events: list) -> Any | None:
    """Kueue's ``Stopped`` event of a preemption on the Job, or None: it stays in the history once the Job runs
    again."""
    return next((e for e in events if e.reason == "Stopped" and (e.message or "").startswith(PREEMPTED)), None)


def admissions(events: list) -> int:
    """How many times Kueue started (admitted) the Job: the ``Started`` events' counts."""
    return sum(e.count or 1 for e in events if e.reason == "Started")


def readmitted_after(events: list) -> float | None:
    """Seconds the Job waited suspended between its preemption and its next admission (from the events' times),
    or None while it has not been admitted again. Once preempted, admitted twice: before and after."""
    stopped = preemption(events)
    if stopped is None or admissions(events) < 2:
        return None
    started = max((_when(e) for e in events if e.reason == "Started" and _when(e)), default=None)
    since = stopped.first_timestamp or _when(stopped)
    return max(0.0, (started - since).total_seconds()) if started and since else 0.0


def _gpu_shares(stack: Stack) -> str:
    """Each training ClusterQueue's GPUs: used, borrowed and lent (what the page's team cards show)."""
    from kubernetes import client

    from operators.platform.kueue import queue_shares

    cqs = client.CustomObjectsApi(stack.k8s()).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2",
                                                                         "clusterqueues")["items"]
    rows = queue_shares(cqs)
    return "; ".join(f"{team}: {g['used']:g} of {g['nominal']:g} used, {g['borrowed']:g} borrowed, {g['lent']:g} lent"
                     for team in ("recsys", "nlp") if (g := rows.get(team, {}).get("nvidia.com/gpu")))


def _task_log(stack: Stack, dag_id: str, run_id: str) -> str:
    """The ``train`` task's log so far; empty while Airflow has none to serve yet."""
    try:
        return stack.task_log(dag_id, run_id, "train")
    except (RuntimeError, OSError):  # not served yet (no try, no log server): the caller waits and asks again
        return ""


def show_kueue(stack: Stack, say, run_timeout: float) -> list[str]:
    """Tell the story; returns what did not happen as told (empty: both runs succeeded after a preemption)."""
    from kubernetes import client

    from kubesim.testing import wait_until

    batch, core = client.BatchV1Api(stack.k8s()), client.CoreV1Api(stack.k8s())
    say(f"Kueue: {KUEUE_BORROW} (team nlp, owner carol): training on 3 GPUs, nlp's 1 and recsys' 2 idle ones, "
        "borrowed ...")
    borrow = stack.trigger(KUEUE_BORROW)

    def nlp_job():
        return next((j for j in batch.list_namespaced_job("nlp").items
                     if (j.metadata.annotations or {}).get("skiff.io/run-id") == borrow), None)
    job = wait_until(lambda: (j := nlp_job()) is not None and not j.spec.suspend and (j.status.active or 0) > 0
                     and j, run_timeout, interval=0.5, what=f"{KUEUE_BORROW}'s Job admitted and running")
    name = job.metadata.name
    say(f"  admitted and running; GPUs per team queue: {_gpu_shares(stack)} (the page's team cards show the same)")
    # the task log has the pod's lines only once the deferred task's trigger follows the pod: a pod preempted
    # and deleted before that takes its lines with it (as on a real cluster), so reclaim only after
    try:
        line = wait_until(lambda: next((ln for ln in _task_log(stack, KUEUE_BORROW, borrow).splitlines()
                                        if "] epoch 1/" in ln), None),
                          run_timeout, interval=1, what=f"{KUEUE_BORROW}'s task log following its pod")
        say(f"  its task log follows the pod: {line.strip()[:160]}")
    except TimeoutError as exc:
        say(f"  {exc}")
    say(f"Kueue: {KUEUE_ONLINE} (team recsys, owner alice): an online step on 1 GPU; none is free in the cohort, "
        "so Kueue reclaims recsys' lent GPUs by preempting nlp's borrower ...")
    online = stack.trigger(KUEUE_ONLINE)
    problems = []
    try:
        stopped = wait_until(lambda: preemption(job_events(core, "nlp", name)), run_timeout, interval=0.5,
                             what=f"Kueue's preemption event on {KUEUE_BORROW}'s Job")
        say(f"  Kueue preempted nlp's Job {name} (its event {stopped.reason}: {stopped.message[:300]})")
        if (j := nlp_job()) is not None and j.spec.suspend:
            say(f"  it waits suspended for GPUs while recsys' online step runs (the page's row: preempted, waiting "
                f"for GPUs); GPUs per team queue: {_gpu_shares(stack)}")
    except TimeoutError as exc:
        problems.append(f"Kueue did not preempt {KUEUE_BORROW}'s Job: {exc}")
        say(f"  {exc}")
    online_state = stack.wait_run(KUEUE_ONLINE, online, timeout=run_timeout)
    say(f"{KUEUE_ONLINE}: {online_state.upper()}")
    state = stack.wait_run(KUEUE_BORROW, borrow, timeout=run_timeout)
    waited = readmitted_after(job_events(core, "nlp", name))
    if waited is not None:
        say(f"  Kueue admitted nlp's Job again once recsys' step had finished, after {waited:.0f} s suspended")
    elif not problems:
        problems.append(f"Kueue did not admit {KUEUE_BORROW}'s Job again after its preemption (its events: "
                        f"kubectl get events -n nlp --field-selector involvedObject.name={name})")
    say(f"{KUEUE_BORROW}: {state.upper()}; its task log (one try, one Job):")
    log = _task_log(stack, KUEUE_BORROW, borrow)
    for needle in ("was preempted by Kueue", "SIGTERM: saved a checkpoint", "resumed: Kueue admitted it again",
                   "resuming from the checkpoint", "wrote /root/models"):
        line = next((ln for ln in log.splitlines() if needle in ln), None)
        say(f"  {line.strip()[:240]}" if line else f"  (no line with {needle!r} in the task log)")
    for dag_id, run_state in ((KUEUE_ONLINE, online_state), (KUEUE_BORROW, state)):
        if run_state != "success":
            problems.append(f"{dag_id} {run_state}: see its task log in Airflow, or {stack.home / 'logs'}")
    return problems
