"""Kueue's scheduling cycles as one pure function: the cluster's Kueue objects in, decisions out.

Follows kubernetes-sigs/kueue `pkg/scheduler/scheduler.go` (v0.19) `schedule` / `nominate` /
`processEntry` and `pkg/cache/queue/cluster_queue.go`:
- each ClusterQueue keeps its pending Workloads ordered by priority (higher first) then queue order
  timestamp (creation, older first; a PodsReadyTimeout eviction's time with requeuingStrategy.timestamp
  Eviction), leaving out those still backing off (podsready.py); a cycle takes one head per ClusterQueue. With `BestEffortFIFO`
  (the default) a head that cannot be admitted is set aside and the next Workload becomes the head; with
  `StrictFIFO` it blocks its ClusterQueue;
- a head whose LocalQueue or ClusterQueue is missing, or whose namespace the ClusterQueue's
  `namespaceSelector` does not select, is inadmissible with Kueue's message;
- every head is nominated first (flavors and, for Preempt, targets against the cycle's starting state:
  `nominate` / `getAssignments`); the entries are processed by borrowing level (lower first), then higher
  priority, then FIFO (`makeClassicalIterator`), each as `processEntry` does: NoFit pending with the
  flavor assigner's message; Preempt without candidates pending, holding its share of its quota for this
  cycle unless its ClusterQueue can always reclaim (`reserveCapacityForUnreclaimablePreempt`); targets
  another entry already took: "Workload has overlapping preemption targets with another workload"; then
  `fits` (the usage against the quota with this cycle's preempted Workloads removed), else "Workload no
  longer fits after processing another workload" (scheduler.go:477); Fit: quota reserved (admitted: no
  admission checks are simulated); Preempt: the targets are evicted and the head waits (`. Pending the
  preemption of N workload(s)`), its usage held for the rest of the pass;
- a head that issued preemptions is its ClusterQueue's preemptor: with BestEffortFIFO it stays first in its
  queue until admitted, unschedulable or deleted (cluster_queue.go `preemptorWorkload`, Kueue#6929 and
  #7101), so a Workload set aside earlier cannot come back ahead of it and let another queue's borrower
  take the quota its preemptions free; Kueue keeps this in its queue manager's memory, kubesim in
  `Decisions.preemptors`, which the caller passes to the next `run`;
- the QuotaReserved reason is `Pending`, as v0.19's default gates write it (`requeueAndUpdate`:
  UnadmittedWorkloadReasonWithFallback; UnadmittedWorkloadsObservability is off by default).

Kueue runs cycles forever; here `run` repeats them until a cycle admits nothing, from the state as it is,
so it is level-triggered: called after every change, it reaches the same decisions (decisions already in
effect - a Workload already evicted - are the caller's to skip).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal

from kubesim.apimachinery.selectors import label_selector_from_dict
from kubesim.kueue import flavors as fa
from kubesim.kueue import preemption, quota
from kubesim.kueue import workload as wlib


@dataclass
class Decisions:
    admit: list[tuple[dict, dict]] = field(default_factory=list)             # (workload, admission)
    evict: list[tuple[tuple, str, str, str]] = field(default_factory=list)   # (key, reason, preempted reason, message)
    pending: dict[tuple, tuple[str, str]] = field(default_factory=dict)      # key -> (reason, message)
    preemptors: dict[str, tuple] = field(default_factory=dict)   # ClusterQueue -> its sticky preemptor's key


def key(wl: dict) -> tuple[str, str]:
    return wl["metadata"]["namespace"], wl["metadata"]["name"]


NEWEST = "\uffff"        # a reservation time after any RFC 3339 time: one made in this pass


def order_key(wl: dict, timestamp: str = "Eviction"):
    """Priority, then the queue order time (creation, or a PodsReadyTimeout eviction's: `timestamp`)."""
    return (-int(wl["spec"].get("priority") or 0), wlib.queue_order_time(wl, timestamp), wl["metadata"]["name"])


def podsets(wl: dict) -> list[fa.PodSet]:
    return [fa.PodSet(ps["name"], int(ps.get("count", 1)), ps.get("template") or {})
            for ps in wl["spec"].get("podSets") or []]


def _admitted_record(wl: dict, cq_name: str) -> preemption.Admitted:
    reserved = wlib.condition(wl, "QuotaReserved") or {}
    return preemption.Admitted(key(wl), wl["metadata"].get("uid", ""), cq_name, int(wl["spec"].get("priority") or 0),
                               wl["metadata"].get("creationTimestamp") or "", reserved.get("lastTransitionTime") or "",
                               {fr: Decimal(v) for fr, v in wlib.usage_of(wl).items()}, wlib.is_true(wl, "Evicted"))


def _cluster_queue_of(wl, lqs, cqs, namespaces) -> tuple[str | None, tuple[str, str] | None]:
    """(ClusterQueue name, None) or (None, (reason, message)) - scheduler.go nominate's checks."""
    ns = wl["metadata"]["namespace"]
    lq = lqs.get((ns, wl["spec"].get("queueName") or ""))
    if lq is None:
        return None, ("Inadmissible", f"LocalQueue {wl['spec'].get('queueName') or ''} doesn't exist")
    cq_name = (lq.get("spec") or {}).get("clusterQueue") or ""
    cq = cqs.get(cq_name)
    if cq is None:
        return None, ("Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
    selector = (cq.get("spec") or {}).get("namespaceSelector")
    if selector is None or not label_selector_from_dict(selector).matches(namespaces.get(ns, {})):
        return None, ("Pending", "workload namespace doesn't match ClusterQueue selector")    # pkg/workload/resources.go ErrNamespaceMismatch
    return cq_name, None


def run(cqs: dict[str, dict], lqs: dict[tuple, dict], flavors: dict[str, dict], workloads: list[dict],
        namespaces: dict[str, dict], hashes: PodSetHashes | None = None, cycles: int | None = None,
        preemptors: dict[str, tuple] | None = None, now: str | None = None,
        requeue_timestamp: str = "Eviction") -> Decisions:
    """One level-triggered pass. `hashes`: the caller's pod-set hash cache (one per cluster, so uids cannot
    collide across simulations); None hashes afresh. `cycles`: stop after that many scheduling cycles (a
    table of Kueue's scheduler_test.go is one `schedule` call). `preemptors`: each ClusterQueue's preemptor
    as the last pass left it (`Decisions.preemptors`: the caller keeps it, as Kueue's queue manager does).
    `now`: the time a requeueAt is compared with; `requeue_timestamp`: waitForPodsReady's
    requeuingStrategy.timestamp (podsready.py)."""
    out = Decisions(preemptors=dict(preemptors or {}))
    nodes = quota.build(list(cqs.values()))
    admitted: list[preemption.Admitted] = []
    pending: dict[str, list[dict]] = {}
    for wl in workloads:
        if wlib.is_true(wl, "Finished") or wl["metadata"].get("deletionTimestamp"):
            continue
        adm = (wl.get("status") or {}).get("admission")
        if adm:
            if adm.get("clusterQueue") in nodes:
                rec = _admitted_record(wl, adm["clusterQueue"])
                admitted.append(rec)
                for fr, v in rec.usage.items():
                    quota.add_usage(nodes[rec.cluster_queue], fr, v)
            continue
        if wl["spec"].get("active") is False or (wlib.condition(wl, "QuotaReserved") or {}).get("reason") == "OnHold":
            continue          # deactivated, or a StatefulSet scaled to zero (statefulset_reconciler.go)
        if not wlib.backoff_expired(wl, now):
            continue          # requeued after a PodsReadyTimeout, still backing off (podsready.py)
        cq_name, why = _cluster_queue_of(wl, lqs, cqs, namespaces)
        if why:
            out.pending[key(wl)] = why
            continue
        pending.setdefault(cq_name, []).append(wl)
    out.preemptors = {cq: k for cq, k in out.preemptors.items() if any(key(w) == k for w in pending.get(cq, []))}
    for cq_name, wls in pending.items():
        sticky = out.preemptors.get(cq_name)
        if (cqs[cq_name].get("spec") or {}).get("queueingStrategy") == "StrictFIFO":
            sticky = None
        wls.sort(key=lambda w, s=sticky: (key(w) != s, *order_key(w, requeue_timestamp)))
    state = _Pass(cqs, nodes, flavors, admitted, pending, out, hashes if hashes is not None else PodSetHashes())
    state.timestamp = requeue_timestamp
    for _ in range(cycles or sum(len(v) for v in pending.values()) + 1):
        heads = state.heads()
        if not heads:
            break
        before = len(state.set_aside)
        if not state.cycle(heads) and len(state.set_aside) == before:
            break
    return out


class PodSetHashes:
    """What scheduling looks at in a Workload's pod sets (counts and pod specs: requests, tolerations,
    selectors), hashed once per (uid, generation). Owned by one cluster (kubesim's Kueue Scheduler holds one)
    or by one `run`: a uid is unique within a cluster only, so a module-wide cache let a second simulation
    read the first one's pod sets for a reused uid (issue 28)."""

    LIMIT = 50000

    def __init__(self):
        self._by_key: dict[tuple, str] = {}

    def __call__(self, wl: dict) -> str:
        k = (wl["metadata"].get("uid"), wl["metadata"].get("generation"))
        found = self._by_key.get(k)
        if found is None:
            if len(self._by_key) > self.LIMIT:
                self._by_key.clear()
            found = self._by_key[k] = json.dumps([(ps.get("count"), (ps.get("template") or {}).get("spec"))
                                                  for ps in wl["spec"].get("podSets") or []], sort_keys=True)
        return found


class _Pass:
    """One `run`: the queues' heads, the usage taken so far, and what was set aside.

    `memo` is Kueue's scheduling equivalence (pkg/workload `EquivalenceHash`, scheduler.go
    `lastAssignmentOutdated`): Workloads of one ClusterQueue with the same priority and pod sets get the same
    assignment until usage changes, so a thousand identical queued Jobs cost one evaluation, not a thousand."""

    def __init__(self, cqs, nodes, flavors, admitted, pending, out, hashes):
        self.cqs, self.nodes, self.flavors, self.admitted, self.pending, self.out = (
            cqs, nodes, flavors, admitted, pending, out)
        self.hashes = hashes
        self.held: list[tuple] = []
        self.evicting: set[tuple] = {a.key for a in admitted if a.evicted}
        self.set_aside: set[tuple] = set()
        self.next = {cq: 0 for cq in pending}      # index of each queue's first Workload not set aside
        self.memo: dict[tuple, fa.Assignment] = {}
        self.signatures: dict[tuple, tuple] = {}
        self.timestamp = "Eviction"                 # waitForPodsReady requeuingStrategy.timestamp

    def heads(self) -> list[tuple[str, dict]]:
        heads = []
        for cq_name, wls in self.pending.items():
            strict = (self.cqs[cq_name].get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
            i = self.next[cq_name]
            while i < len(wls) and key(wls[i]) in self.set_aside and not strict:
                i += 1
            self.next[cq_name] = i
            if i < len(wls) and key(wls[i]) not in self.set_aside:
                heads.append((cq_name, wls[i]))
        return heads

    def take(self, node, usage) -> None:
        for fr, v in usage.items():
            quota.add_usage(node, fr, v)
        self.memo.clear()

    def assignment(self, cq_name: str, wl: dict) -> fa.Assignment:
        k = key(wl)
        sig = self.signatures.get(k)
        if sig is None:
            sig = self.signatures[k] = (cq_name, int(wl["spec"].get("priority") or 0), self.hashes(wl))
        found = self.memo.get(sig)
        if found is not None:
            return found
        cq_obj, node = self.cqs[cq_name], self.nodes[cq_name]
        prio, created = sig[1], wl["metadata"].get("creationTimestamp") or ""

        def oracle(fr, amount):
            return preemption.simulate(cq_obj, self.nodes, fr, amount, prio, created, self.admitted)
        a = self.memo[sig] = fa.assign(cq_obj, node, self.flavors, podsets(wl), oracle)
        return a

    def nominate(self, cq_name: str, wl: dict) -> tuple[fa.Assignment, list]:
        """scheduler.go `getAssignments`: the flavors and, for Preempt, the targets, as the cycle starts."""
        a = self.assignment(cq_name, wl)
        if a.mode != fa.PREEMPT:
            return a, []
        prio, created = int(wl["spec"].get("priority") or 0), wl["metadata"].get("creationTimestamp") or ""
        return a, preemption.targets(self.cqs[cq_name], self.nodes, a.usage, prio, created, self.admitted)

    def fits(self, node, usage, without) -> bool:
        """scheduler.go `fits`: the usage fits with this cycle's preempted Workloads and the targets gone."""
        with preemption.removed(self.nodes, without):
            return all(v <= quota.available(node, fr) for fr, v in usage.items())

    def reserve_unreclaimable(self, cq_name: str, a: fa.Assignment) -> None:
        """scheduler.go `reserveCapacityForUnreclaimablePreempt` / `quotaResourcesToReserve`: a head that
        needs preemption but has no candidates holds what it could use of its quota from borrowers in this
        cycle, unless its ClusterQueue can always reclaim (`policy.go` CanAlwaysReclaim: reclaimWithinCohort
        Any)."""
        if ((self.cqs[cq_name].get("spec") or {}).get("preemption") or {}).get("reclaimWithinCohort") == "Any":
            return
        node, hold = self.nodes[cq_name], {}
        for fr, v in a.usage.items():
            rq = node.quotas.get(fr, quota.ResourceQuota(quota.ZERO))
            used = node.usage.get(fr, quota.ZERO)
            if a.borrows:
                hold[fr] = v if rq.borrowing_limit is None else min(v, rq.nominal + rq.borrowing_limit - used)
            else:
                hold[fr] = max(quota.ZERO, min(v, rq.nominal - used))
        self.take(node, hold)
        self.held.append((node, hold))

    def cycle(self, heads) -> bool:
        """scheduler.go `schedule`: nominate every head, then `processEntry` in `makeClassicalIterator`'s order."""
        entries = [(cq_name, wl, *self.nominate(cq_name, wl)) for cq_name, wl in heads]
        entries.sort(key=lambda e: (e[2].borrows, order_key(e[1], self.timestamp)))
        admitted_any = False
        preempted: dict[tuple, preemption.Admitted] = {}      # PreemptedWorkloads of this cycle
        self.held = []                                         # quota held for this cycle only (its snapshot)
        for cq_name, wl, a, targets in entries:
            k, out, node = key(wl), self.out, self.nodes[cq_name]
            if a.mode == fa.NOFIT:
                out.pending[k] = ("Pending", a.message())
                self.set_aside.add(k)
                self.unstick(cq_name, k)
                continue
            if a.mode == fa.PREEMPT and not targets:
                out.pending[k] = ("Pending", a.message())
                self.set_aside.add(k)
                self.unstick(cq_name, k)
                self.reserve_unreclaimable(cq_name, a)
                continue
            if a.mode == fa.PREEMPT:
                self.set_aside.add(k)
            if set(preempted) & {t.key for t, _ in targets}:
                out.pending[k] = ("Pending", "Workload has overlapping preemption targets with another workload")
                continue
            if not self.fits(node, a.usage, list(preempted.values()) + [t for t, _ in targets]):
                out.pending[k] = ("Pending", "Workload no longer fits after processing another workload")
                continue
            preempted.update((t.key, t) for t, _ in targets)
            self.take(node, a.usage)
            if a.mode == fa.PREEMPT:
                out.preemptors[cq_name] = k
                self.issue_preemptions(wl, node, targets)
                out.pending[k] = ("Pending", f"{a.message()}. Pending the preemption of {len(targets)} workload(s)")
                continue
            admission = {"clusterQueue": cq_name, "podSetAssignments": a.to_api(podsets(wl))}
            record = _admitted_record({**wl, "status": {"admission": admission}}, cq_name)
            record.reserved_at = NEWEST         # reserved now: after every reservation already made
            self.admitted.append(record)
            out.admit.append((wl, admission))
            self.pending[cq_name].remove(wl)
            out.pending.pop(k, None)
            self.unstick(cq_name, k)
            admitted_any = True
        for node, hold in self.held:
            for fr, v in hold.items():
                quota.remove_usage(node, fr, v)
        self.memo.clear()
        return admitted_any

    def unstick(self, cq_name: str, k: tuple) -> None:
        """A preemptor stays sticky at its queue's head until admitted, unschedulable or deleted."""
        if self.out.preemptors.get(cq_name) == k:
            del self.out.preemptors[cq_name]

    def issue_preemptions(self, wl: dict, node, targets) -> None:
        for t, reason in targets:
            if t.key in self.evicting:
                continue
            msg = preemption.message(wl["metadata"].get("uid", ""),
                                     (wl["metadata"].get("labels") or {}).get(wlib.JOB_UID_LABEL, ""), reason,
                                     preemption.cq_path(node), preemption.cq_path(self.nodes[t.cluster_queue]))
            self.out.evict.append((t.key, "Preempted", reason, msg))
            self.evicting.add(t.key)
