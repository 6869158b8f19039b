"""Kueue's scheduling cycles as one pure function: the cluster's Kueue objects in, decisions out.

Follows kubernetes-sigs/kueue `pkg/scheduler/scheduler.go` (v0.19) `schedule` / `nominate` /
`processEntry` and `pkg/cache/queue/cluster_queue.go`:
- each ClusterQueue keeps its pending Workloads ordered by priority (higher first) then queue order
  timestamp (creation, older first); a cycle takes one head per ClusterQueue. With `BestEffortFIFO`
  (the default) a head that cannot be admitted is set aside and the next Workload becomes the head; with
  `StrictFIFO` it blocks its ClusterQueue;
- a head whose LocalQueue or ClusterQueue is missing, or whose namespace the ClusterQueue's
  `namespaceSelector` does not select, is inadmissible with Kueue's message;
- the cycle's entries are processed non-borrowing first, then higher priority, then FIFO
  (`makeClassicalIterator`); each is re-checked against the usage the earlier entries of the cycle
  took ("Workload no longer fits after processing another workload");
- Fit: quota reserved (admitted: no admission checks are simulated); Preempt: the preemption targets are
  evicted and the head waits (`. Pending the preemption of N workload(s)`), its usage held for the rest
  of the cycle; NoFit: pending with the flavor assigner's message.

Kueue runs cycles forever; here `run` repeats them until a cycle admits nothing, from the state as it is,
so it is level-triggered: called after every change, it reaches the same decisions (decisions already in
effect - a Workload already evicted - are the caller's to skip).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from kubesim.kueue import flavors as fa
from kubesim.kueue import preemption, quota
from kubesim.kueue import workload as wlib
from kubesim.selectors import label_selector_from_dict


@dataclass
class Decisions:
    admit: list[tuple[dict, dict]] = field(default_factory=list)             # (workload, admission)
    evict: list[tuple[tuple, str, str, str]] = field(default_factory=list)   # (key, reason, preempted reason, message)
    pending: dict[tuple, tuple[str, str]] = field(default_factory=dict)      # key -> (reason, message)


def key(wl: dict) -> tuple[str, str]:
    return wl["metadata"]["namespace"], wl["metadata"]["name"]


def order_key(wl: dict):
    return (-int(wl["spec"].get("priority") or 0), wl["metadata"].get("creationTimestamp") or "",
            wl["metadata"]["name"])


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
        return None, ("Inadmissible", f"LocalQueue {wl['spec'].get('queueName')} doesn't exist")
    cq_name = (lq.get("spec") or {}).get("clusterQueue") or ""
    cq = cqs.get(cq_name)
    if cq is None:
        return None, ("Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
    selector = (cq.get("spec") or {}).get("namespaceSelector")
    if selector is None or not label_selector_from_dict(selector).matches(namespaces.get(ns, {})):
        return None, ("Inadmissible", "Workload namespace doesn't match ClusterQueue selector")
    return cq_name, None


def run(cqs: dict[str, dict], lqs: dict[tuple, dict], flavors: dict[str, dict], workloads: list[dict],
        namespaces: dict[str, dict]) -> Decisions:
    out = Decisions()
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
        cq_name, why = _cluster_queue_of(wl, lqs, cqs, namespaces)
        if why:
            out.pending[key(wl)] = why
            continue
        pending.setdefault(cq_name, []).append(wl)
    for wls in pending.values():
        wls.sort(key=order_key)
    evicting: set[tuple] = {a.key for a in admitted if a.evicted}
    set_aside: set[tuple] = set()
    for _ in range(sum(len(v) for v in pending.values()) + 1):
        heads = []
        for cq_name, wls in pending.items():
            strict = (cqs[cq_name].get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
            for wl in wls:
                if key(wl) not in set_aside:
                    heads.append((cq_name, wl))
                    break
                if strict:
                    break
        if not heads:
            break
        before = len(set_aside)
        admitted_now = _cycle(heads, cqs, nodes, flavors, admitted, evicting, set_aside, pending, out)
        if not admitted_now and len(set_aside) == before:
            break
    return out


def _cycle(heads, cqs, nodes, flavors, admitted, evicting, set_aside, pending, out) -> bool:
    def assignment_for(cq_name, wl):
        cq_obj, node = cqs[cq_name], nodes[cq_name]
        prio, created = int(wl["spec"].get("priority") or 0), wl["metadata"].get("creationTimestamp") or ""

        def oracle(usage):
            return bool(preemption.targets(cq_obj, nodes, usage, prio, created, admitted))
        return fa.assign(cq_obj, node, flavors, podsets(wl), oracle)

    entries = [(cq_name, wl, assignment_for(cq_name, wl)) for cq_name, wl in heads]
    entries.sort(key=lambda e: (e[2].borrows, order_key(e[1])))
    admitted_any = False
    preempted_this_cycle: set[tuple] = set()
    for cq_name, wl, first in entries:
        k = key(wl)
        a = assignment_for(cq_name, wl)
        node = nodes[cq_name]
        if a.mode == fa.NOFIT and first.mode != fa.NOFIT:
            out.pending[k] = ("Pending", "Workload no longer fits after processing another workload")
            continue
        if a.mode == fa.NOFIT:
            out.pending[k] = ("Pending", a.message())
            set_aside.add(k)
            continue
        if a.mode == fa.PREEMPT:
            prio, created = int(wl["spec"].get("priority") or 0), wl["metadata"].get("creationTimestamp") or ""
            targets = preemption.targets(cqs[cq_name], nodes, a.usage, prio, created, admitted)
            set_aside.add(k)
            if not targets:
                out.pending[k] = ("Pending", a.message())
                continue
            if preempted_this_cycle & {t.key for t, _ in targets}:
                out.pending[k] = ("Pending", "Workload has overlapping preemption targets with another workload")
                continue
            preempted_this_cycle |= {t.key for t, _ in targets}
            for fr, v in a.usage.items():
                quota.add_usage(node, fr, v)
            fresh = [(t, r) for t, r in targets if t.key not in evicting]
            for t, reason in fresh:
                msg = preemption.message(wl["metadata"].get("uid", ""),
                                         (wl["metadata"].get("labels") or {}).get(wlib.JOB_UID_LABEL, ""),
                                         reason, preemption.cq_path(node), preemption.cq_path(nodes[t.cluster_queue]))
                out.evict.append((t.key, "Preempted", reason, msg))
                evicting.add(t.key)
            out.pending[k] = ("Pending", f"{a.message()}. Pending the preemption of {len(targets)} workload(s)")
            continue
        admission = {"clusterQueue": cq_name, "podSetAssignments": a.to_api(podsets(wl))}
        for fr, v in a.usage.items():
            quota.add_usage(node, fr, v)
        rec = _admitted_record({**wl, "status": {"admission": admission}}, cq_name)
        admitted.append(rec)
        out.admit.append((wl, admission))
        pending[cq_name].remove(wl)
        out.pending.pop(k, None)
        admitted_any = True
    return admitted_any
