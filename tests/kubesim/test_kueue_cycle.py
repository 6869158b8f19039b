"""kubesim's Kueue scheduling pass (`kubesim.kueue.cycle.run`), pure: state that must not outlive a cluster."""
from __future__ import annotations

from tests.kubesim import kueue_tables as t

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
