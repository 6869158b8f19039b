"""Kueue's documentation's own worked examples, run on kubesim through the real `kubernetes` client, with
their documented outcomes (kueue v0.19 site/content/en/docs/concepts/cluster_queue.md "Borrowing
example", "BorrowingLimit", "LendingLimit"; preemption.md; cluster_queue.md "Preemption")."""
from __future__ import annotations

import pytest

from kubesim.testing import sync_api_client, wait_until
from tests.support.kubesim.kueue_objects import Kueue

NS = "default"


@pytest.fixture
def kq(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    k = Kueue(api)
    k.flavor("default-flavor")
    yield k
    api.close()


def two_teams(kq, a=None, b=None, preemption=None):
    kq.cluster_queue("team-a-cq", [("default-flavor", {"cpu": a or 9})], cohort="team-ab", preemption=preemption)
    kq.cluster_queue("team-b-cq", [("default-flavor", {"cpu": b or 12})], cohort="team-ab", preemption=preemption)
    kq.local_queue(NS, "a", "team-a-cq")
    kq.local_queue(NS, "b", "team-b-cq")


def test_borrowing_example_a_admits_up_to_both_nominal_quotas_while_b_is_idle(kq):
    """"If team-b-cq has no admitted Workloads, then team-a-cq can admit Workloads with resources adding
    up to 12+9=21 CPUs"."""
    two_teams(kq)
    kq.job(NS, "a1", "a", cpu=9)
    kq.job(NS, "a2", "a", cpu=12)
    kq.wait_running(NS, "a1", "a2")
    assert kq.cluster_queue_usage("team-a-cq", "default-flavor", "cpu") == ("21", "12")
    kq.job(NS, "a3", "a", cpu=1)
    assert kq.wait_pending(NS, "a3") == ("couldn't assign flavors to pod set main: insufficient unused quota "
                                         "for cpu in flavor default-flavor, 1 more needed")
    assert kq.suspended(NS, "a3")


def test_borrowing_example_b_within_nominal_is_admitted_before_a_borrowing(kq):
    """"If team-b-cq has pending Workloads and team-a-cq has all its nominalQuota used, Kueue will admit
    Workloads in team-b-cq before admitting any new Workloads in team-a-cq" - even an older one."""
    two_teams(kq)
    kq.job(NS, "a1", "a", cpu=9)
    kq.job(NS, "b1", "b", cpu=6)
    kq.job(NS, "b-short", "b", cpu=6, duration="1")
    kq.wait_running(NS, "a1", "b1", "b-short")
    kq.job(NS, "a2", "a", cpu=4)          # older, would borrow
    kq.wait_pending(NS, "a2")
    kq.job(NS, "b2", "b", cpu=6)          # newer, within B's nominal quota once b-short ends
    kq.wait_pending(NS, "b2")
    kq.wait_running(NS, "b2")
    assert kq.suspended(NS, "a2")
    assert "insufficient unused quota for cpu in flavor default-flavor" in kq.pending_message(NS, "a2")


def test_borrowing_limit_caps_what_a_borrows(kq):
    """borrowingLimit 1 on team-a-cq: "team-a-cq can admit Workloads with resources adding up to 9+1=10
    CPUs"; team-b-cq, without a limit, "can use up to 12+9 CPUs"."""
    kq.cluster_queue("team-a-cq", [("default-flavor", {"cpu": {"nominalQuota": 9, "borrowingLimit": 1}})],
                     cohort="team-ab")
    kq.cluster_queue("team-b-cq", [("default-flavor", {"cpu": 12})], cohort="team-ab")
    kq.local_queue(NS, "a", "team-a-cq")
    kq.local_queue(NS, "b", "team-b-cq")
    kq.job(NS, "a11", "a", cpu=11, duration="0.5")
    assert kq.wait_pending(NS, "a11") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default-flavor, previously "
        "considered podsets requests (0) + current podset request (11) > maximum capacity (10)")
    kq.job(NS, "a10", "a", cpu=10, duration="0.5")
    kq.wait_running(NS, "a10")
    wait_until(lambda: kq.condition(NS, "a10", "Finished"), what="a10 finished")
    kq.job(NS, "b21", "b", cpu=21)
    kq.wait_running(NS, "b21")


def test_lending_limit_caps_what_b_lends(kq):
    """lendingLimit 1 on team-b-cq: "team-a-cq can admit Workloads with resources adding up to 9+1=10
    CPUs"."""
    kq.cluster_queue("team-a-cq", [("default-flavor", {"cpu": 9})], cohort="team-ab")
    kq.cluster_queue("team-b-cq", [("default-flavor", {"cpu": {"nominalQuota": 12, "lendingLimit": 1}})],
                     cohort="team-ab")
    kq.local_queue(NS, "a", "team-a-cq")
    kq.job(NS, "a10", "a", cpu=10)
    kq.wait_running(NS, "a10")
    kq.job(NS, "a1", "a", cpu=1)
    assert "1 more needed" in kq.wait_pending(NS, "a1")


def test_preemption_within_cluster_queue_evicts_the_lower_priority_job_and_requeues_it(kq):
    """preemption.md: the preempted Workload gets `Evicted` (reason Preempted) and `Preempted` (reason
    InClusterQueue) with "Preempted to accommodate a workload (UID: ..., JobUID: ...) due to
    prioritization in the ClusterQueue"; its Job is suspended again, not failed (backoffLimit 0: pods
    removed by the suspension are no failed try), requeued, and runs again once there is room."""
    kq.priority_class("low", 100)
    kq.priority_class("high", 1000)
    kq.cluster_queue("cq", [("default-flavor", {"cpu": 4})], preemption={"withinClusterQueue": "LowerPriority"})
    kq.local_queue(NS, "q", "cq")
    kq.job(NS, "low", "q", cpu=4, priority="low", backoff_limit=0)
    kq.wait_running(NS, "low")
    high = kq.job(NS, "high", "q", cpu=4, priority="high", duration="1")
    evicted = wait_until(lambda: kq.condition(NS, "low", "Evicted"), what="low evicted")
    preempted = kq.condition(NS, "low", "Preempted")
    high_wl = wait_until(lambda: kq.workload_of(NS, "high"))
    assert (evicted["status"], evicted["reason"]) == ("True", "Preempted")
    assert (preempted["status"], preempted["reason"]) == ("True", "InClusterQueue")
    assert evicted["message"] == (
        f"Preempted to accommodate a workload (UID: {high_wl['metadata']['uid']}, JobUID: {high.metadata.uid}) "
        "due to prioritization in the ClusterQueue; preemptor path: /cq; preemptee path: /cq")
    kq.wait_running(NS, "high")
    assert kq.suspended(NS, "low")
    requeued = kq.condition(NS, "low", "Requeued")
    assert (requeued["status"], requeued["reason"]) == ("True", "Preempted")
    job = kq.batch.read_namespaced_job("low", NS)
    assert not job.status.failed and not any(c.type == "Failed" for c in job.status.conditions or [])
    # high ends after 1 s: low is admitted again and runs - the same Job
    wait_until(lambda: kq.running(NS, "low"), timeout=15, what="low running again")
    again = kq.condition(NS, "low", "Evicted")
    assert again["status"] == "False" and again["message"].startswith("Previously: Preempted to accommodate")


def test_reclaim_within_cohort_preempts_only_the_borrowing_workload(kq):
    """cluster_queue.md `reclaimWithinCohort: Any`: a pending Workload that fits in its ClusterQueue's
    nominal quota preempts Workloads of cohort ClusterQueues that borrow, "irrespective of priority" (a1
    is lower than all of B's); of B's candidates the lowest priority goes first (preemption.md
    "Candidates"; admission times tie within a second, as Kueue's condition timestamps do), and only as
    many as needed (minimal set)."""
    kq.priority_class("low", 100)
    kq.priority_class("mid", 500)
    kq.priority_class("high", 1000)
    policy = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    two_teams(kq, a=4, b=4, preemption=policy)
    kq.job(NS, "b1", "b", cpu=4, priority="high")
    kq.wait_running(NS, "b1")
    kq.job(NS, "b2", "b", cpu=2, priority="high")
    kq.wait_running(NS, "b2")
    kq.job(NS, "b3", "b", cpu=2, priority="mid")
    kq.wait_running(NS, "b3")
    assert kq.cluster_queue_usage("team-b-cq", "default-flavor", "cpu") == ("8", "4")
    kq.job(NS, "a1", "a", cpu=2, priority="low")
    evicted = wait_until(lambda: kq.condition(NS, "b3", "Evicted") or kq.condition(NS, "b2", "Evicted"))
    assert kq.condition(NS, "b3", "Preempted")["reason"] == "InCohortReclamation"
    assert evicted["message"].endswith("due to reclamation within the cohort; preemptor path: /team-ab/team-a-cq; "
                                       "preemptee path: /team-ab/team-b-cq")
    kq.wait_running(NS, "a1")
    assert kq.condition(NS, "b2", "Evicted") is None and kq.running(NS, "b2") and kq.running(NS, "b1")
    assert kq.suspended(NS, "b3")
    assert "insufficient unused quota" in kq.wait_pending(NS, "b3")
