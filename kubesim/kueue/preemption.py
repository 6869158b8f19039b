"""Kueue's classical preemption: which admitted Workloads to evict so that a pending one fits.

Follows kubernetes-sigs/kueue `pkg/scheduler/preemption/` (v0.19):
- candidates (`classical/hierarchical_preemption.go`): Workloads of the preemptor's ClusterQueue that
  satisfy `withinClusterQueue`, and Workloads of other ClusterQueues of the cohort that satisfy
  `reclaimWithinCohort` (`common/preemption_policy.go`: LowerPriority, LowerOrNewerEqualPriority, Any);
  only Workloads using a flavor/resource that needs preemption count. A cohort candidate is a
  "hierarchical reclaim" when the preemptor's request fits in its own ClusterQueue's unused nominal quota,
  otherwise it may only be taken when the preemptor would not borrow afterwards (`borrowWithinCohort` is
  not simulated);
- order (`common/ordering.go` CandidatesOrdering, `classical/candidate_generator.go`): already evicted
  first, other ClusterQueues before the preemptor's own, lower priority first, most recently admitted
  first; a cohort candidate stops being one once its ClusterQueue is back within nominal quota;
- targets (`preemption.go` classicalPreemptions): remove candidates in that order until the preemptor
  fits, then add back, in reverse order, every one it still fits without (`fillBackWorkloads`): a
  minimal set. Reasons: `InClusterQueue`, `InCohortReclamation`; message `preemptionMessage`;
- the flavor assigner's oracle (`preemption_oracle.go` SimulatePreemption): `simulate`.

Pure: works on `quota.Node`s (already holding the usage of every admitted Workload) and plain records.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal

from kubesim.kueue import flavors as fa
from kubesim.kueue import quota as q

IN_CLUSTER_QUEUE, IN_COHORT_RECLAMATION = "InClusterQueue", "InCohortReclamation"
HUMAN_REASONS = {IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
                 IN_COHORT_RECLAMATION: "reclamation within the cohort"}
_WITHIN_CQ, _HIERARCHICAL, _WITHOUT_BORROWING = "WithinCQ", "HierarchicalReclaim", "ReclaimWithoutBorrowing"


@dataclass
class Admitted:
    """An admitted Workload as preemption sees it."""
    key: tuple[str, str]            # (namespace, name)
    uid: str
    cluster_queue: str
    priority: int
    created: str                    # queue order timestamp (RFC 3339)
    reserved_at: str                # QuotaReserved lastTransitionTime
    usage: dict[q.FR, Decimal]
    evicted: bool = False


def satisfies_policy(policy: str, preemptor_priority: int, preemptor_created: str, cand: Admitted) -> bool:
    """`common/preemption_policy.go` SatisfiesPreemptionPolicy."""
    if policy == "Any":
        return True
    if policy == "LowerPriority":
        return cand.priority < preemptor_priority
    if policy == "LowerOrNewerEqualPriority":
        return cand.priority < preemptor_priority or (
            cand.priority == preemptor_priority and preemptor_created < cand.created)
    return False


def _sort_key(cand: Admitted, cq_name: str):
    # CandidatesOrdering: evicted first, other CQs first, lower priority, newest reservation, uid
    return (not cand.evicted, cand.cluster_queue == cq_name, cand.priority,
            _Desc(cand.reserved_at), cand.uid)


class _Desc(str):
    def __lt__(self, other):
        return str.__gt__(self, other)


def _remove(nodes: dict[str, q.Node], w: Admitted) -> None:
    for fr, v in w.usage.items():
        q.remove_usage(nodes[w.cluster_queue], fr, v)


def _add(nodes: dict[str, q.Node], w: Admitted) -> None:
    for fr, v in w.usage.items():
        q.add_usage(nodes[w.cluster_queue], fr, v)


def _fits(cq: q.Node, usage: dict[q.FR, Decimal], allow_borrowing: bool) -> bool:
    """preemption.go `workloadFits`."""
    for fr, v in usage.items():
        if not allow_borrowing and cq.borrowing_with(fr, v):
            return False
        if v > q.available(cq, fr):
            return False
    return True


def targets(cq_obj: dict, nodes: dict[str, q.Node], usage: dict[q.FR, Decimal], priority: int, created: str,
            admitted: list[Admitted]) -> list[tuple[Admitted, str]]:
    """The Workloads to preempt (with their reasons) so that `usage` fits in ClusterQueue `cq_obj`; []
    when no set of candidates makes room. `nodes` are restored before returning."""
    cq = nodes[cq_obj["metadata"]["name"]]
    policy = (cq_obj.get("spec") or {}).get("preemption") or {}
    within, reclaim = policy.get("withinClusterQueue") or "Never", policy.get("reclaimWithinCohort") or "Never"
    need = {fr for fr, v in usage.items() if v > q.available(cq, fr)}
    if not need:
        return []
    same, cohort = [], []
    has_advantage = q.fits_in_quota(cq, usage)
    for w in admitted:
        if not need & set(w.usage):
            continue
        if w.cluster_queue == cq.name:
            if within != "Never" and satisfies_policy(within, priority, created, w):
                same.append((w, _WITHIN_CQ))
        elif (cq.parent is not None and reclaim != "Never" and w.cluster_queue in nodes
              and nodes[w.cluster_queue].parent is cq.parent
              and satisfies_policy(reclaim, priority, created, w)):
            cohort.append((w, _HIERARCHICAL if has_advantage else _WITHOUT_BORROWING))
    ordered = sorted(cohort + same, key=lambda c: _sort_key(c[0], cq.name))
    under_nominal = all(cq.quotas.get(fr, q.ResourceQuota(q.ZERO)).nominal > cq.usage.get(fr, q.ZERO)
                        for fr in need)
    if not cohort or not under_nominal:
        attempts = [True]
    elif not any(v == _HIERARCHICAL for _, v in cohort):
        attempts = [False, True]
    else:
        attempts = [True, False]
    for borrow in attempts:
        chosen: list[tuple[Admitted, str]] = []
        for w, variant in ordered:
            if w.cluster_queue != cq.name:     # candidateIsValid
                if borrow and variant == _WITHOUT_BORROWING:
                    continue
                if q.within_nominal(nodes[w.cluster_queue], need):
                    continue
            _remove(nodes, w)
            chosen.append((w, IN_CLUSTER_QUEUE if variant == _WITHIN_CQ else IN_COHORT_RECLAMATION))
            if _fits(cq, usage, borrow):
                chosen = _fill_back(nodes, cq, usage, chosen, borrow)
                for w2, _ in chosen:
                    _add(nodes, w2)
                return chosen
        for w2, _ in chosen:
            _add(nodes, w2)
    return []


@contextmanager
def removed(nodes: dict[str, q.Node], workloads) -> Iterator[None]:
    """`Snapshot.SimulateWorkloadUsageRemoval`: the nodes without these Workloads' usage, then restored."""
    for w in workloads:
        _remove(nodes, w)
    try:
        yield
    finally:
        for w in workloads:
            _add(nodes, w)


def simulate(cq_obj: dict, nodes: dict[str, q.Node], fr: q.FR, amount: Decimal, priority: int, created: str,
             admitted: list[Admitted]) -> tuple[int, int]:
    """preemption_oracle.go `SimulatePreemption`: (NO_CANDIDATES, PREEMPT_IN_CQ when a target is in the
    preemptor's ClusterQueue, else RECLAIM; the borrowing level once the targets are gone)."""
    cq = nodes[cq_obj["metadata"]["name"]]
    found = targets(cq_obj, nodes, {fr: amount}, priority, created, admitted)
    if not found:
        return fa.NO_CANDIDATES, fa.borrowing_level(cq, fr, amount)
    with removed(nodes, [w for w, _ in found]):
        borrow = fa.borrowing_level(cq, fr, amount)
    return (fa.PREEMPT_IN_CQ if any(w.cluster_queue == cq.name for w, _ in found) else fa.RECLAIM), borrow


def _fill_back(nodes, cq, usage, chosen, borrow):
    """fillBackWorkloads: in reverse order, keep out only the targets the preemptor cannot do without."""
    kept = list(chosen)
    for i in range(len(chosen) - 2, -1, -1):
        w = chosen[i][0]
        _add(nodes, w)
        if _fits(cq, usage, borrow):
            kept.remove(chosen[i])
        else:
            _remove(nodes, w)
    return kept


def message(preemptor_uid: str, job_uid: str, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    """preemption.go `preemptionMessage`."""
    return (f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, JobUID: "
            f"{job_uid or 'UNKNOWN'}) due to {HUMAN_REASONS[reason]}; preemptor path: "
            f"{preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}")


def cq_path(node: q.Node) -> str:
    """preemption.go `buildCQPath`: `/cohort/.../cq`."""
    parts = [node.name] + [n.name for n in node.path_to_root()]
    return "/" + "/".join(reversed(parts))
