"""``waiting.decide`` for a Job in Kueue's queue (pure): queued is not failing, Kueue's words are said when they
change, queue_wait ends it, a preemption is said once with its message and time and followed on."""

from __future__ import annotations

from dataclasses import replace

from operators.training.waiting import FollowSettings, Outcome, Seen, Timers, Wait, decide

REF = "nlp/train-x"
QUEUED = FollowSettings(pod_discovery_timeout=30, queue_wait=None, queued=True)
PENDING = "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 1 more needed"
PREEMPTED = ("Preempted to accommodate a workload (UID: u-a, JobUID: j-a) due to reclamation within the cohort; "
             "preemptor path: /skiff/recsys; preemptee path: /skiff/nlp")


def job(suspend: bool, *conditions: str, preemptions: int | None = None) -> dict:
    template = {"metadata": {"annotations": {"skiff.io/resume": "1" if preemptions else "0",
                                             "skiff.io/preemptions": str(preemptions)}}} if preemptions is not None else {}
    return {"metadata": {"name": "train-x", "uid": "u1", "labels": {"kueue.x-k8s.io/queue-name": "skiff"}},
            "spec": {"backoffLimit": 0, "suspend": suspend, "template": template},
            "status": {"conditions": [{"type": c, "status": "True"} for c in conditions]}}


def workload(*conds: tuple[str, str, str, str]) -> dict:
    return {"metadata": {"name": "job-train-x-abcde"}, "status": {"conditions": [
        {"type": t, "status": s, "message": m, "lastTransitionTime": at} for t, s, m, at in conds]}}


def queue(pending: int) -> dict:
    return {"metadata": {"name": "skiff"}, "status": {"pendingWorkloads": pending}}


def running_pod() -> dict:
    return {"metadata": {"name": "p1"}, "status": {"phase": "Running"}}


def test_queued_longer_than_pod_discovery_is_not_a_failure_and_says_kueues_words_when_they_change():
    seen = Seen(job(True), workload=workload(("QuotaReserved", "False", PENDING, "t0")), queue=queue(3))
    first, timers = decide(seen, Timers(start=0.0), 0.0, QUEUED, REF)
    assert first == Wait(say=(f"Job {REF} is queued in Kueue: {PENDING} (LocalQueue skiff: 3 workloads pending)",))
    later, timers = decide(seen, timers, 1000.0, QUEUED, REF)      # far past pod_discovery_timeout
    assert later == Wait()                                          # nothing new to say, no failure
    fewer, timers = decide(replace(seen, queue=queue(1)), timers, 1001.0, QUEUED, REF)
    assert fewer.say and fewer.say[0].endswith("(LocalQueue skiff: 1 workload pending)")


def test_queue_wait_fails_with_kueues_message():
    settings = replace(QUEUED, queue_wait=60)
    seen = Seen(job(True), workload=workload(("QuotaReserved", "False", PENDING, "t0")))
    _, timers = decide(seen, Timers(start=0.0), 0.0, settings, REF)
    wait, timers = decide(seen, timers, 59.0, settings, REF)
    assert isinstance(wait, Wait)
    out, _ = decide(seen, timers, 60.0, settings, REF)
    assert out == Outcome("failed", f"Kueue did not admit Job {REF} within 60s (queue_wait): {PENDING}", "queue")


def test_pod_discovery_counts_from_when_kueue_starts_the_job():
    _, timers = decide(Seen(job(True), workload=workload()), Timers(start=0.0), 0.0, QUEUED, REF)
    started = Seen(job(False), workload=workload(("QuotaReserved", "True", "Quota reserved in ClusterQueue nlp", "t1")))
    wait, timers = decide(started, timers, 500.0, QUEUED, REF)
    assert isinstance(wait, Wait)
    wait, timers = decide(started, timers, 529.0, QUEUED, REF)
    assert isinstance(wait, Wait)
    out, _ = decide(started, timers, 531.0, QUEUED, REF)
    assert isinstance(out, Outcome) and out.kind == "discovery"


def test_a_preemption_is_said_once_with_its_message_and_time_and_the_job_is_followed_to_its_end():
    timers = Timers(start=0.0)
    running = Seen(job(False), workload=workload(("QuotaReserved", "True", "Quota reserved in ClusterQueue nlp", "t1")),
                   pods=(running_pod(),))
    _, timers = decide(running, timers, 1.0, QUEUED, REF)
    # Kueue evicts the Workload, then suspends the Job; the Workload's news may come after the Job's
    suspended = Seen(job(True), workload=running.workload)
    wait, timers = decide(suspended, timers, 2.0, QUEUED, REF)
    assert isinstance(wait, Wait) and not any("preempted" in line for line in wait.say)
    evicted = workload(("QuotaReserved", "False", PREEMPTED, "t2"), ("Evicted", "True", PREEMPTED, "t2"),
                       ("Preempted", "True", PREEMPTED, "2026-12-01T10:00:00Z"))
    wait, timers = decide(Seen(job(True), workload=evicted), timers, 3.0, QUEUED, REF)
    note = f"2026-12-01T10:00:00Z: {PREEMPTED}"
    assert wait.say[0].startswith(f"Job {REF} was preempted by Kueue at {note}")
    assert "not a failed try" in wait.say[0]
    # the suspended Job's next pod must learn it resumes: the count goes on its template (downward API)
    assert wait.annotate == {"skiff.io/resume": "1", "skiff.io/preemptions": "1"}
    again, timers = decide(Seen(job(True), workload=evicted), timers, 4.0, QUEUED, REF)
    assert again.annotate is None and not any("preempted" in line for line in again.say)   # said once, written once
    readmitted = workload(("QuotaReserved", "True", "Quota reserved in ClusterQueue nlp", "t5"),
                          ("Preempted", "False", "Previously: " + PREEMPTED, "t5"))
    wait, timers = decide(Seen(job(False, preemptions=1), workload=readmitted, pods=(running_pod(),)), timers, 5.0,
                          QUEUED, REF)
    assert wait.say == (f"Job {REF} resumed: Kueue admitted it again after 1 preemption(s); its new pod starts with "
                        "SKIFF_RESUME=1, SKIFF_PREEMPTIONS=1 and the same SKIFF_CHECKPOINT_DIR",)
    assert decide(Seen(job(False), workload=readmitted, pods=(running_pod(),)), timers, 6.0, QUEUED, REF)[0] == Wait()
    done, _ = decide(Seen(job(False, "Complete"), workload=readmitted), timers, 9.0, QUEUED, REF)
    assert done == Outcome("success", preemptions=(note,))


def test_a_preemption_seen_only_after_readmission_is_still_told():
    timers = Timers(start=0.0)
    _, timers = decide(Seen(job(False), workload=workload(), pods=(running_pod(),)), timers, 1.0, QUEUED, REF)
    _, timers = decide(Seen(job(True), workload=workload()), timers, 2.0, QUEUED, REF)
    readmitted = workload(("Preempted", "False", "Previously: " + PREEMPTED, "t5"))
    wait, timers = decide(Seen(job(False), workload=readmitted, pods=(running_pod(),)), timers, 3.0, QUEUED, REF)
    assert wait.say and "time not recorded" in wait.say[0] and PREEMPTED in wait.say[0]
    assert timers.preemptions == (f"time not recorded: {PREEMPTED}",)


def test_a_preemption_is_told_from_the_workload_even_if_the_job_was_never_seen_running():
    """A follower that subscribed after Kueue started and preempted the Job: the Workload still says so."""
    evicted = workload(("Preempted", "True", PREEMPTED, "2026-12-01T10:00:00Z"))
    wait, timers = decide(Seen(job(True), workload=evicted), Timers(start=0.0), 0.0, QUEUED, REF)
    assert wait.say[0].startswith(f"Job {REF} was preempted by Kueue at 2026-12-01T10:00:00Z: {PREEMPTED}")
    reset = workload(("Preempted", "False", "Previously: " + PREEMPTED, "2026-12-01T10:05:00Z"))
    wait, timers = decide(Seen(job(False), workload=reset, pods=(running_pod(),)), timers, 1.0, QUEUED, REF)
    assert len(timers.preemptions) == 1                          # the reset condition is the same preemption
    assert len(wait.say) == 1 and "resumed: Kueue admitted it again after 1 preemption(s)" in wait.say[0]


def test_the_preemption_count_is_what_kubernetes_and_kueue_hold_not_the_followers_memory():
    """A follower started afresh (triggerer restart) reads the count back from the Job's template and Kueue's
    schedulingStats; it never writes a smaller one, and never touches a started Job's template."""
    stats = {"evictions": [{"reason": "Preempted", "underlyingCause": "InCohortReclamation", "count": 2},
                           {"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1},
                           {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 5}]}
    evicted = workload(("Preempted", "True", PREEMPTED, "2026-12-01T10:00:00Z"))
    evicted["status"]["schedulingStats"] = stats
    wait, _ = decide(Seen(job(True, preemptions=1), workload=evicted), Timers(start=0.0), 0.0, QUEUED, REF)
    assert wait.annotate == {"skiff.io/resume": "1", "skiff.io/preemptions": "3"}   # Kueue's count: 2 + 1
    plain = workload(("Preempted", "True", PREEMPTED, "2026-12-01T10:00:00Z"))
    wait, _ = decide(Seen(job(True, preemptions=4), workload=plain), Timers(start=0.0), 0.0, QUEUED, REF)
    assert wait.annotate is None                                 # 4 already written: more than this follower saw
    started = job(True, preemptions=0)
    started["status"]["startTime"] = "2026-12-01T10:00:00Z"      # the API server refuses template changes then
    wait, _ = decide(Seen(started, workload=plain), Timers(start=0.0), 0.0, QUEUED, REF)
    assert wait.annotate is None and wait.say


def test_a_job_not_queued_is_judged_as_before():
    listing, timers = decide(Seen(job(True)), Timers(start=0.0), 31.0, replace(QUEUED, queued=False), REF)
    assert listing == Wait(list_events=True)                 # no pod: the events are listed first, as before
    out, _ = decide(Seen(job(True)), timers, 31.0, replace(QUEUED, queued=False), REF)
    assert isinstance(out, Outcome) and out.kind == "discovery"


def test_a_workload_whose_queue_does_not_exist_fails_at_once_unless_the_local_queue_appeared_since():
    missing_lq = "LocalQueue skiff doesn't exist"     # Kueue's words (workload_controller.go), reason Inadmissible
    seen = Seen(job(True), workload=workload(("QuotaReserved", "False", missing_lq, "t0")), queue=None)
    out, _ = decide(seen, Timers(start=0.0), 0.0, QUEUED, REF)
    assert isinstance(out, Outcome) and out.kind == "queue"
    assert out.reason.startswith(f"no queue will admit Job {REF}: Kueue says \"{missing_lq}\"")
    assert "run the platform_sync DAG, which creates each team's LocalQueues" in out.reason
    appeared, _ = decide(replace(seen, queue=queue(1)), Timers(start=0.0), 0.0, QUEUED, REF)
    assert isinstance(appeared, Wait)           # Kueue reconsiders it now that the queue exists
    no_cq = Seen(job(True), workload=workload(("QuotaReserved", "False", "ClusterQueue nlp doesn't exist", "t0")),
                 queue=queue(1))
    out, _ = decide(no_cq, Timers(start=0.0), 0.0, QUEUED, REF)
    assert isinstance(out, Outcome) and "a cluster admin applies the team's ClusterQueue" in out.reason


def test_an_eviction_by_waitforpodsready_is_told_as_such_not_as_a_preemption():
    """Kueue's waitForPodsReady evicts a Workload whose pods are not all ready in time (a gang short of nodes) with
    "Exceeded the PodsReady timeout <ns>/<workload>" (workload_controller.go reconcileNotReadyTimeout): the log
    says evicted for readiness, waiting for Kueue's back-off, not a failed try; not "preempted"."""
    timeout = "Exceeded the PodsReady timeout nlp/job-train-x-abcde"
    seen = Seen(job(True), workload=workload(("Evicted", "True", timeout, "t5"),
                                             ("QuotaReserved", "False", timeout, "t5")), queue=queue(1))
    decision, _ = decide(seen, replace(Timers(start=0.0), ran=True), 10.0, QUEUED, REF)
    said = [line for line in decision.say if "by Kueue at" in line]
    assert said == [f"Job {REF} was evicted by Kueue at t5: {timeout} - not all of its pods were ready within "
                    "Kueue's waitForPodsReady timeout (a node short for the gang?); its pods were stopped and it "
                    "waits in the queue to run again after Kueue's back-off (not a failed try)"], decision.say

    _, timers = decide(seen, replace(Timers(start=0.0), ran=True), 10.0, QUEUED, REF)
    _, timers = decide(seen, timers, 11.0, QUEUED, REF)
    later = Seen(job(True), workload=workload(("Evicted", "True", timeout, "t9"),
                                              ("QuotaReserved", "False", timeout, "t9")), queue=queue(1))
    second, timers = decide(later, timers, 20.0, QUEUED, REF)     # evicted again: same words, a new time
    assert [line for line in second.say if "evicted by Kueue at t9" in line], second.say
    third, _ = decide(later, timers, 21.0, QUEUED, REF)
    assert not [line for line in third.say if "evicted by Kueue" in line], third.say
