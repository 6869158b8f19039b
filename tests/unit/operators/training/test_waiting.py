"""``waiting.decide``: the training follower's decisions, from objects and a clock only (no cluster)."""

from __future__ import annotations

import pytest

from operators.training.waiting import FollowSettings, Outcome, Seen, Timers, Wait, decide

REF = "recsys/train-x"
SETTINGS = FollowSettings(pod_discovery_timeout=300, quota_wait=0, unschedulable_timeout=1800,
                          event_poll_interval=5)


def job(*conditions: str, **status) -> dict:
    conds = [{"type": c, "status": "True"} for c in conditions]
    return {"metadata": {"name": "train-x", "uid": "u1"}, "spec": {"backoffLimit": 0},
            "status": {"conditions": conds, **status}}


def pod(name="p1", *, waiting: str | None = None, unschedulable: str | None = None, deleting=False) -> dict:
    status: dict = {"phase": "Pending"}
    if waiting:
        status["containerStatuses"] = [{"name": "train", "image": "img:1",
                                        "state": {"waiting": {"reason": waiting, "message": "no such image"}}}]
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": unschedulable}]
    md = {"name": name, **({"deletionTimestamp": "2026-11-30T00:00:00Z"} if deleting else {})}
    return {"metadata": md, "status": status}


QUOTA_EVENT = {"reason": "FailedCreate", "involvedObject": {"name": "train-x"}, "lastTimestamp": "t",
               "message": 'pods "p" is forbidden: exceeded quota: skiff-quota, requested: cpu=4, used: cpu=8, '
                          "limited: cpu=8"}


def run(seen: Seen, times: list[float], settings: FollowSettings = SETTINGS, timers: Timers | None = None):
    """Decide at each time in turn, carrying the timers, as follow_job's loop does (which lists the events when
    asked and decides again at once); returns the decisions."""
    timers = timers or Timers(start=0.0)
    out = []
    for now in times:
        decision, timers = decide(seen, timers, now, settings, REF)
        out.append(decision)
        if decision == Wait(list_events=True):  # (a read Job changes ``seen``: the tests pass a new one)
            decision, timers = decide(seen, timers, now, settings, REF)
            out.append(decision)
    return out, timers


def test_waits_until_the_job_is_seen_and_reads_it_now_and_then():
    # a shared watch reports changes: a Job deleted before the follower subscribed would never show up
    decisions, timers = run(Seen(None), [0, 9.9, 10.0, 19.9, 20.0])
    assert decisions == [Wait(), Wait(), Wait(read_job=True), Wait(), Wait(read_job=True)]
    assert timers.job_read_at == 20.0


@pytest.mark.parametrize(("the_job", "outcome"), [
    (job("Complete"), Outcome("success")),
    (job("Failed"), Outcome("failed", None, "job")),
    (job(failed=1), Outcome("failed", None, "job")),  # backoffLimit 0: the first failed pod is the end
    ({"deleted": True, "metadata": {"name": "train-x"}},
     Outcome("failed", f"the Job {REF} was deleted while the task waited for it", "deleted")),
])
def test_the_jobs_end(the_job, outcome):
    assert decide(Seen(the_job, (pod(),)), Timers(start=0), 10, SETTINGS, REF)[0] == outcome


def test_image_pull_error_fails_at_once():
    decision, _ = decide(Seen(job(), (pod(waiting="ErrImagePull"),)), Timers(start=0), 0.5, SETTINGS, REF)
    assert decision.kind == "fatal" and decision.reason.startswith("ErrImagePull: container train")


def test_no_pod_within_discovery_timeout_and_events_listed_every_poll_interval():
    decisions, timers = run(Seen(job()), [0.5, 1.0, 3.0, 6.0, 299.0])
    assert decisions == [Wait(), Wait(list_events=True), Wait(), Wait(), Wait(list_events=True), Wait(),
                         Wait(list_events=True), Wait()]
    decision, _ = decide(Seen(job()), timers, 300.0, SETTINGS, REF)
    assert decision == Outcome("failed", f"no pod was created for Job {REF} within 300s (pod_discovery_timeout)",
                               "discovery")


def test_a_pod_once_seen_means_no_discovery_failure_even_if_it_goes():
    _, timers = run(Seen(job(), (pod(),)), [1.0])
    decisions, _ = run(Seen(job()), [400.0], timers=timers)
    assert decisions == [Wait(list_events=True), Wait()]


def test_quota_refusal_fails_at_once_by_default():
    _, timers = run(Seen(job()), [1.0])  # the loop listed the events at 1.0 (none yet)
    decision, _ = decide(Seen(job(), (), (QUOTA_EVENT,)), timers, 1.0, SETTINGS, REF)
    assert decision.kind == "quota" and decision.reason.startswith("exceeded quota: skiff-quota")


def test_quota_wait_outlasts_pod_discovery_and_ends_with_a_pod():
    settings = FollowSettings(pod_discovery_timeout=10, quota_wait=100, event_poll_interval=5)
    refused = Seen(job(), (), (QUOTA_EVENT,))
    decisions, timers = run(refused, [2.0, 50.0, 99.0], settings)
    assert not any(isinstance(d, Outcome) for d in decisions)  # 99 s > pod_discovery_timeout: still waiting
    assert timers.quota_since == 2.0
    decision, _ = decide(refused, timers, 102.0, settings, REF)
    assert decision.kind == "quota"
    _, timers = run(Seen(job(), (pod(),)), [60.0], settings, timers)  # quota freed: a pod came
    assert timers.quota_since is None


def test_quota_wait_none_waits_forever():
    settings = FollowSettings(quota_wait=None, pod_discovery_timeout=10)
    decisions, _ = run(Seen(job(), (), (QUOTA_EVENT,)), [1.0, 1e6], settings)
    assert not any(isinstance(d, Outcome) for d in decisions)


def test_unschedulable_timer_starts_when_seen_and_resets_when_scheduled():
    stuck = Seen(job(), (pod(unschedulable="0/6 nodes are available: 6 Insufficient nvidia.com/gpu."),))
    settings = FollowSettings(unschedulable_timeout=60)
    decisions, timers = run(stuck, [10.0, 69.0], settings)
    assert decisions == [Wait(), Wait()] and timers.unschedulable_since == 10.0
    _, reset = run(Seen(job(), (pod(),)), [65.0], settings, timers)
    assert reset.unschedulable_since is None
    decision, _ = decide(stuck, timers, 70.0, settings, REF)
    assert decision.kind == "unschedulable"
    assert decision.reason == ("Unschedulable: pod p1: 0/6 nodes are available: 6 Insufficient nvidia.com/gpu. "
                               "(pending for 60s)")
    assert run(stuck, [1e9], FollowSettings(unschedulable_timeout=None))[0] == [Wait()]


def test_a_pod_being_deleted_does_not_count():
    decisions, timers = run(Seen(job(), (pod(deleting=True),)), [0.5])
    assert decisions == [Wait()] and not timers.seen_pod
