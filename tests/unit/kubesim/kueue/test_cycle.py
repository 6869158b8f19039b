"""kubesim's Kueue scheduling pass (`kubesim.kueue.cycle.run`), pure: state that must not outlive a cluster."""
from __future__ import annotations

from tests.support.kubesim import kueue_tables as t

GPU = "nvidia.com/gpu"


def _day(first_gpus: int):
    """One 8-GPU ClusterQueue; `big` (older, 10 GPUs: never fits) ahead of `x` (uid reused across days)."""
    cqs = [t.cq("a", [("gpu", {GPU: 8})])]
    lqs = t.local_queues(("ns", "a", "a"))
    flavors = [t.flavor("gpu")]
    big = t.workload("big", "ns", "a", {GPU: 10}, created="2026-01-01T00:00:00Z", uid="big")
    x = t.workload("x", "ns", "a", {GPU: first_gpus}, created="2026-01-01T00:00:01Z", uid="x")
    return cqs, lqs, flavors, [big, x]


def test_a_second_simulation_does_not_reuse_the_first_ones_pod_sets_for_a_reused_uid():
    """Issue 28: a module-wide (uid, generation) cache made day 2's `x` (2 GPUs) look like day 1's `x`
    (10 GPUs, the same hash as `big`), so it took `big`'s NoFit and stayed pending on an empty queue."""
    cqs, lqs, flavors, wls = _day(10)
    d1 = t.run(cqs, lqs, flavors, wls)
    assert not d1.admit                                             # day 1: neither fits in 8 GPUs
    cqs, lqs, flavors, wls = _day(2)
    d2 = t.run(cqs, lqs, flavors, wls)
    assert [w["metadata"]["name"] for w, _ in d2.admit] == ["x"]    # day 2: x's own 2 GPUs fit
    assert d2.pending[("ns", "big")][1].startswith("couldn't assign flavors to pod set main: insufficient quota")


# ---- Kueue v0.19.2's own cases, replayed ------------------------------------------------------------------
# Each states the outcome the named case of kubernetes-sigs/kueue v0.19.2 `pkg/scheduler/scheduler_test.go`
# TestSchedule (or `pkg/scheduler/flavorassigner/flavorassigner_test.go` TestAssignFlavors) expects. Kueue's
# table enables UnadmittedWorkloadsObservability, so its reasons are granular (WaitingForQuota...); with
# v0.19's default gates (kube_features.go: off) the scheduler writes `Pending`, which kubesim does.
LATER = "2026-01-02T00:00:00Z"


def _names(decisions) -> list[str]:
    return sorted(w["metadata"]["name"] for w, _ in decisions.admit)


def test_prefer_reclamation_over_cq_priority_based_preemption():
    """"prefer reclamation over cq priority based preemption": both flavors need preemption; on-demand
    would preempt a1 inside other-alpha, spot reclaims from b1, which borrows it in other-beta. Reclaim
    ranks above preempt (flavorassigner.go preemptionMode) and whenCanPreempt defaults to TryNextFlavor,
    so spot is chosen and b1 - not a1 - is preempted."""
    policy = {"within": "LowerPriority", "reclaim": "LowerPriority"}
    cqs = [t.cq("other-alpha", [("on-demand", {"gpu": 10}), ("spot", {"gpu": 10})], cohort="other", **policy),
           t.cq("other-beta", [("on-demand", {"gpu": 0}), ("spot", {"gpu": 0})], cohort="other", **policy)]
    lqs = t.local_queues(("eng-alpha", "other", "other-alpha"), ("eng-beta", "other", "other-beta"))
    wls = [t.reserve(t.workload("a1", "eng-alpha", "other", {"gpu": 5}, priority=50), "other-alpha", "on-demand"),
           t.reserve(t.workload("b1", "eng-beta", "other", {"gpu": 5}, priority=50), "other-beta", "spot"),
           t.workload("preemptor", "eng-alpha", "other", {"gpu": 6}, priority=100, uid="wl-preemptor",
                      job_uid="job-preemptor")]
    d = t.run(cqs, lqs, [t.flavor("on-demand"), t.flavor("spot")], wls)
    assert d.evict == [(("eng-beta", "b1"), "Preempted", "InCohortReclamation",
                        "Preempted to accommodate a workload (UID: wl-preemptor, JobUID: job-preemptor) due to "
                        "reclamation within the cohort; preemptor path: /other/other-alpha; preemptee path: "
                        "/other/other-beta")]
    assert d.pending[("eng-alpha", "preemptor")] == (
        "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor "
        "on-demand, 1 more needed, insufficient unused quota for gpu in flavor spot, 1 more needed. Pending the "
        "preemption of 1 workload(s)")
    assert not d.admit


def _blocked_case(reclaim: str, cycles: int | None = 1):
    """ClusterQueueA lends its 2 GPUs (1 used by a1), a2 (2 GPUs) waits in it; ClusterQueueB (0 GPUs) has b1 (1)."""
    cqs = [t.cq("ClusterQueueA", [("on-demand", {"gpu": 2})], cohort="root", reclaim=reclaim),
           t.cq("ClusterQueueB", [("on-demand", {"gpu": 0})], cohort="root")]
    lqs = t.local_queues(("eng-alpha", "lq", "ClusterQueueA"), ("eng-beta", "lq", "ClusterQueueB"))
    wls = [t.reserve(t.workload("a1-admitted", "eng-alpha", "lq", {"gpu": 1}), "ClusterQueueA", "on-demand"),
           t.workload("a2-pending", "eng-alpha", "lq", {"gpu": 2}),
           t.workload("b1-pending", "eng-beta", "lq", {"gpu": 1}, created=LATER)]
    return t.run(cqs, lqs, [t.flavor("on-demand")], wls, cycles=cycles)


def test_capacity_blocked_when_lending_clusterqueue_not_guaranteed_to_reclaim():
    """"capacity blocked when lending clusterqueue not guaranteed to reclaim (ReclaimWithinCohort=
    LowerPriority)" and "(...=Never)": a2 needs preemption but has no candidates, and ClusterQueueA cannot
    always reclaim (policy.go CanAlwaysReclaim: only `Any`), so scheduler.go
    reserveCapacityForUnreclaimablePreempt holds a2's share of the quota for the cycle: b1 may not borrow it."""
    for reclaim in ("LowerPriority", "Never"):
        d = _blocked_case(reclaim)
        assert not d.admit and not d.evict, reclaim
        assert d.pending[("eng-alpha", "a2-pending")] == (
            "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor "
            "on-demand, 1 more needed")
        assert d.pending[("eng-beta", "b1-pending")] == (
            "Pending", "Workload no longer fits after processing another workload")
        # the hold is for that cycle's snapshot only: a2 went to the inadmissible list, b1 was requeued at once
        # (cache/queue/cluster_queue.go RequeueIfNotPresent: FailedAfterNomination is immediate), so the next
        # cycle, without a2 as a head, admits b1 on the borrowed GPU
        assert _names(_blocked_case(reclaim, cycles=None)) == ["b1-pending"]


def test_capacity_not_blocked_when_lending_clusterqueue_can_reclaim():
    """"capacity not blocked when lending clusterqueue can reclaim (ReclaimWithinCohort=Any)": b1 borrows."""
    d = _blocked_case("Any")
    assert _names(d) == ["b1-pending"]
    assert d.pending[("eng-alpha", "a2-pending")][1] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for gpu in flavor on-demand, 1 more needed")


def test_when_can_preempt_may_stop_search_uses_second_flavor_when_the_first_has_no_candidates():
    """"use second flavor when the first has no preemption candidates; WhenCanPreempt: MayStopSearch":
    noPreemptionCandidates always tries the next flavor (shouldTryNextFlavor)."""
    cqs = [t.cq("other-alpha", [("on-demand", {"cpu": {"nominalQuota": "50", "borrowingLimit": "50"}}),
                                ("spot", {"cpu": {"nominalQuota": "100", "borrowingLimit": "0"}})],
                within="LowerPriority", flavorFungibility={"whenCanPreempt": "MayStopSearch"})]
    lqs = t.local_queues(("eng-alpha", "other", "other-alpha"))
    wls = [t.reserve(t.workload("admitted", "eng-alpha", "other", {"cpu": 50}), "other-alpha", "on-demand"),
           t.workload("new", "eng-alpha", "other", {"cpu": 20}, created=LATER)]
    d = t.run(cqs, lqs, [t.flavor("on-demand"), t.flavor("spot")], wls)
    assert [(w["metadata"]["name"], a["podSetAssignments"][0]["flavors"]) for w, a in d.admit] == [
        ("new", {"cpu": "spot"})]


def _fungibility_case(preference: str):
    """on-demand: 5 CPUs, no borrowing, held by low (priority -1); spot: 0 CPUs, may borrow 5 from the lender."""
    cqs = [t.cq("cq", [("on-demand", {"cpu": {"nominalQuota": "5", "borrowingLimit": "0"}}),
                       ("spot", {"cpu": {"nominalQuota": "0", "borrowingLimit": "5"}})], cohort="cohort",
                within="LowerPriority", flavorFungibility={"whenCanBorrow": "TryNextFlavor",
                                                           "whenCanPreempt": "TryNextFlavor", "preference": preference}),
           t.cq("lender", [("on-demand", {"cpu": 0}), ("spot", {"cpu": 5})], cohort="cohort")]
    lqs = t.local_queues(("default", "queue", "cq"))
    wls = [t.reserve(t.workload("low", "default", "queue", {"cpu": 5}, priority=-1), "cq", "on-demand"),
           t.workload("high", "default", "queue", {"cpu": 5}, uid="wl-high", job_uid="job-high", created=LATER)]
    return t.run(cqs, lqs, [t.flavor("on-demand"), t.flavor("spot")], wls)


def test_borrowing_over_preemption_borrows_in_second_flavor():
    """"BorrowingOverPreemption preference: borrow in second flavor instead of preempting in first"."""
    d = _fungibility_case("BorrowingOverPreemption")
    assert [(w["metadata"]["name"], a["podSetAssignments"][0]["flavors"]) for w, a in d.admit] == [
        ("high", {"cpu": "spot"})]
    assert not d.evict


def test_preemption_over_borrowing_preempts_in_first_flavor():
    """"PreemptionOverBorrowing preference: preempt in first flavor instead of borrowing in second"."""
    d = _fungibility_case("PreemptionOverBorrowing")
    assert not d.admit
    assert d.evict == [(("default", "low"), "Preempted", "InClusterQueue",
                        "Preempted to accommodate a workload (UID: wl-high, JobUID: job-high) due to prioritization "
                        "in the ClusterQueue; preemptor path: /cohort/cq; preemptee path: /cohort/cq")]
    assert d.pending[("default", "high")] == (
        "Pending", "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor on-demand, "
        "5 more needed. Pending the preemption of 1 workload(s)")


def _borrow_try_next(when_can_borrow: str | None):
    """flavorassigner_test.go "borrow try next flavor, found the second flavor" (its `pods` resource left out:
    kubesim's ClusterQueues here do not cover it): flavor one would borrow 1 CPU, flavor two fits 9 without."""
    fung = {"whenCanBorrow": when_can_borrow, "whenCanPreempt": "TryNextFlavor"} if when_can_borrow else {}
    cqs = [t.cq("test-clusterqueue", [("one", {"cpu": {"nominalQuota": "10", "borrowingLimit": "1"}}),
                                      ("two", {"cpu": 10})], cohort="test-cohort", flavorFungibility=fung),
           t.cq("test-secondary-clusterqueue", [("one", {"cpu": 1})], cohort="test-cohort")]
    lqs = t.local_queues(("ns", "q", "test-clusterqueue"))
    wls = [t.reserve(t.workload("using", "ns", "q", {"cpu": 2}), "test-clusterqueue", "one"),
           t.workload("wl", "ns", "q", {"cpu": 9}, created=LATER)]
    d = t.run(cqs, lqs, [t.flavor("one"), t.flavor("two")], wls)
    return [(w["metadata"]["name"], a["podSetAssignments"][0]["flavors"]) for w, a in d.admit]


def test_when_can_borrow_try_next_flavor_takes_the_flavor_that_fits_without_borrowing():
    """whenCanBorrow: TryNextFlavor goes on past a flavor that would borrow; the default (MayStopSearch,
    flavorassigner_test.go "borrow before try next flavor") borrows in the first."""
    assert _borrow_try_next("TryNextFlavor") == [("wl", {"cpu": "two"})]
    assert _borrow_try_next(None) == [("wl", {"cpu": "one"})]


def test_namespace_not_selected_is_kueues_message():
    """"failed to match clusterQueue selector": pkg/workload/resources.go ErrNamespaceMismatch, word for word."""
    cqs = [t.cq("sales", [("default", {"cpu": 4})], namespaceSelector={"matchLabels": {"dep": "sales"}})]
    lqs = t.local_queues(("eng", "blocked", "sales"))
    d = t.run(cqs, lqs, [t.flavor("default")], [t.workload("new", "eng", "blocked", {"cpu": 1})],
              namespaces={"eng": {"dep": "eng"}})
    assert d.pending[("eng", "new")] == ("Pending", "workload namespace doesn't match ClusterQueue selector")


def _reclaim_day(a_new_running: bool):
    """a (8 GPUs) borrows: a-old 6 and a-new 4; b (8) runs 6, b-big (8, oldest: never fits now) and b-42 (2)
    wait. Reclaim Any, online a above scheduled b."""
    cqs = [t.cq(n, [("gpu", {GPU: 8})], cohort="day", within="LowerPriority", reclaim="Any") for n in ("a", "b")]
    lqs = t.local_queues(("ns", "a", "a"), ("ns", "b", "b"))
    at = "2026-01-01T01:00:00Z"
    wls = [t.reserve(t.workload("a-old", "ns", "a", {GPU: 6}, priority=3000), "a", "gpu", at),
           t.reserve(t.workload("b-run", "ns", "b", {GPU: 6}, priority=2000), "b", "gpu", at),
           t.workload("b-big", "ns", "b", {GPU: 8}, priority=2000, created="2026-01-01T00:00:01Z"),
           t.workload("b-42", "ns", "b", {GPU: 2}, priority=2000, created="2026-01-01T00:00:02Z"),
           t.workload("a-new", "ns", "a", {GPU: 4}, priority=3000, created="2026-01-01T00:00:03Z")]
    if a_new_running:
        t.reserve(wls[-1], "a", "gpu", "2026-01-01T02:00:00Z")
    return cqs, lqs, [t.flavor("gpu")], wls


def test_a_preemptor_stays_at_its_queues_head_until_admitted():
    """cluster_queue.go preemptorWorkload (Kueue#6929, #7101): b-42 reclaims a-new's GPUs and becomes b's
    sticky preemptor; once a-new is evicted and pending again, b-42 - not b's older b-big, set aside before -
    is b's head, so it is admitted first (non-borrowing) and a-new, which borrows, no longer fits. Without the
    sticky head b-big heads b, a-new takes the freed GPUs back and b-42 preempts it again: the thrash that
    made issue 28's simulated days count thousands of preemptions."""
    d1 = t.run(*_reclaim_day(a_new_running=True))
    assert [e[0][1] for e in d1.evict] == ["a-new"] and d1.preemptors == {"b": ("ns", "b-42")}
    d2 = t.run(*_reclaim_day(a_new_running=False), preemptors=d1.preemptors)
    assert _names(d2) == ["b-42"] and not d2.evict and d2.preemptors == {}
    assert t.run(*_reclaim_day(a_new_running=False), preemptors=d1.preemptors, cycles=1).pending[("ns", "a-new")] == (
        "Pending", "Workload no longer fits after processing another workload")
    forgot = t.run(*_reclaim_day(a_new_running=False))             # what kubesim did before: the thrash
    assert _names(forgot) == ["a-new"] and [e[0][1] for e in forgot.evict] == ["a-new"]
