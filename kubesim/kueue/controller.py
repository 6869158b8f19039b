"""The shell of kubesim's Kueue: its webhook, its scheduler and its Job integration, as API clients of the store.

Kueue is "installed" when its CRDs are (`kubesim.kueue.install` or any client creating them, as `helm
install` does): until the ClusterQueue kind is served, every part here does nothing.

- `Webhook` (an admission plugin, before validation as a mutating webhook runs): a Job created with the
  `kueue.x-k8s.io/queue-name` label is suspended (`pkg/controller/jobframework/defaults.go`
  ApplyDefaultForSuspend); a StatefulSet's pods are gated (`statefulsets.gate_pod`).
- `KueueScheduler`: after any change of a Kueue object or a namespace, `cycle.run` decides; this writes the
  decisions (quota reserved and admitted, evicted/preempted, pending messages) and the ClusterQueue and
  LocalQueue status counts and flavor usage (`pkg/controller/core/clusterqueue_controller.go`).
- `JobReconciler` (`pkg/controller/jobframework/reconciler.go` ReconcileGenericJob, in its order):
  a finished Job finishes its Workload (quota released); a Job without Workload gets one; an evicted
  Workload stops its Job (`jobs/job/job_controller.go` Stop: suspend, reset startTime, restore the pod
  template) and, once no pod is active, gives its quota back and is requeued; an admitted Workload
  starts its suspended Job (RunWithPodSetsInfo: flavor nodeLabels merged into nodeSelector, flavor
  tolerations added, unsuspended); a running Job without admission is stopped.
"""
from __future__ import annotations

import copy
import logging

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.admission.resourcequota import format_qty
from kubesim.controllers.framework import Controller, ControllerContext, EventRecorder, Key, key_of
from kubesim.kueue import config, cycle, quota
from kubesim.kueue import workload as wlib

log = logging.getLogger("kubesim.kueue")
CYCLE: Key = (None, "cycle")


def installed(store) -> bool:
    return store.registry.lookup(wlib.GROUP, wlib.VERSION, "clusterqueues") is not None


def kueue_rt(store, plural: str):
    return store.registry.lookup(wlib.GROUP, wlib.VERSION, plural)


class KueueController(Controller):
    """Shared reads and status writes of the Kueue components."""

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.events = EventRecorder(self.store, "kueue-admission")

    def rt(self, plural: str):
        return kueue_rt(self.store, plural)

    def objects(self, plural: str, namespace: str | None = None) -> list[dict]:
        rt = self.rt(plural)
        return self.cluster.cache.list(rt, namespace) if rt is not None else []

    def write_status(self, rt, obj: dict, status: dict, retry: Key | None = None) -> dict | None:
        """Write `status` unless it is already there; on a conflict, reconcile `retry` again."""
        ns, name = key_of(obj)
        try:
            fresh = self.store.get(rt, ns, name)
            if fresh["metadata"]["uid"] != obj["metadata"]["uid"] or fresh.get("status") == status:
                return fresh
            fresh["status"] = status
            return self.cluster.observe(rt, self.store.update(rt, ns, name, fresh, subresource="status"))
        except ApiError as e:
            if e.code in (404, 409):
                self.queue.add_after(retry or CYCLE, 0.01)
                return None
            raise


class KueueScheduler(KueueController):
    name = "kueue-scheduler"
    WATCHED = frozenset({"clusterqueues", "localqueues", "resourceflavors", "workloads", "workloadpriorityclasses"})

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.hashes = cycle.PodSetHashes()      # this cluster's uids only
        self.preemptors: dict[str, tuple] = {}  # each ClusterQueue's sticky preemptor (Kueue's queue manager)

    def on_event(self, event_type, rt, obj, old):
        if (rt.group == wlib.GROUP and rt.plural in self.WATCHED) or (rt.group, rt.plural) == ("", "namespaces"):
            self.queue.add(CYCLE)

    def reconcile(self, key: Key) -> None:
        if not installed(self.store):
            return
        cqs = {o["metadata"]["name"]: o for o in self.objects("clusterqueues")}
        lqs = {key_of(o): o for o in self.objects("localqueues")}
        flavors = {o["metadata"]["name"]: o for o in self.objects("resourceflavors")}
        workloads = self.objects("workloads")
        ns_rt = self.cluster.rt("namespaces")
        namespaces = {o["metadata"]["name"]: o["metadata"].get("labels") or {}
                      for o in self.cluster.cache.list(ns_rt)}
        ready = config.wait_for_pods_ready(self.store)
        d = cycle.run(cqs, lqs, flavors, workloads, namespaces, self.hashes, preemptors=self.preemptors,
                      now=self.cluster.now(), requeue_timestamp=ready.timestamp if ready else "Eviction")
        self.preemptors = d.preemptors
        wl_rt, now = self.rt("workloads"), self.cluster.now()
        by_key = {cycle.key(w): w for w in workloads}
        for wl, admission in d.admit:
            self.write_status(wl_rt, wl, wlib.reserve(wl, admission, now))
            self.events.record(wl, "Normal", "QuotaReserved", f"Quota reserved in ClusterQueue {admission['clusterQueue']}")
            self.events.record(wl, "Normal", "Admitted", f"Admitted by ClusterQueue {admission['clusterQueue']}")
        for k, reason, preempted, message in d.evict:
            wl = by_key.get(k)
            if wl is not None and not wlib.is_true(wl, "Evicted"):
                self.write_status(wl_rt, wl, wlib.evict(wl, reason, preempted, message, now))
                self.events.record(wl, "Normal", "Preempted", message)
        for k, (reason, message) in d.pending.items():
            wl = by_key.get(k)
            cond = wlib.condition(wl, "QuotaReserved") if wl else None
            if wl is None or (wl.get("status") or {}).get("admission"):
                continue
            if cond is None or (cond.get("status"), cond.get("reason"), cond.get("message")) != ("False", reason, message):
                self.write_status(wl_rt, wl, wlib.unreserve(wl, reason, message, now))
                self.events.record(wl, "Warning", reason, message)
        self._queue_status(cqs, lqs, self.objects("workloads"))

    def _queue_status(self, cqs: dict, lqs: dict, workloads: list[dict]) -> None:
        """ClusterQueue / LocalQueue status: counts, and per flavor the quota used and borrowed."""
        nodes = quota.build(list(cqs.values()))
        counts: dict[str, dict[str, int]] = {n: {"pendingWorkloads": 0, "reservingWorkloads": 0,
                                                  "admittedWorkloads": 0} for n in cqs}
        lq_counts: dict[tuple, dict[str, int]] = {k: {"pendingWorkloads": 0, "reservingWorkloads": 0,
                                                      "admittedWorkloads": 0} for k in lqs}
        for wl in workloads:
            if wlib.is_true(wl, "Finished"):
                continue
            lq_key = (wl["metadata"]["namespace"], wl["spec"].get("queueName") or "")
            adm = (wl.get("status") or {}).get("admission")
            cq_name = adm["clusterQueue"] if adm else (lqs.get(lq_key, {}).get("spec") or {}).get("clusterQueue")
            fields = ["reservingWorkloads", "admittedWorkloads"] if adm else ["pendingWorkloads"]
            for f in fields:
                if cq_name in counts:
                    counts[cq_name][f] += 1
                if lq_key in lq_counts:
                    lq_counts[lq_key][f] += 1
            if adm and cq_name in nodes:
                for fr, v in wlib.usage_of(wl).items():
                    quota.add_usage(nodes[cq_name], fr, v)
        for name, cq in cqs.items():
            node = nodes[name]
            usage = []
            for group in (cq.get("spec") or {}).get("resourceGroups") or []:
                for flv in group.get("flavors") or []:
                    res = []
                    for r in flv.get("resources") or []:
                        fr = (flv["name"], r["name"])
                        total = node.usage.get(fr, quota.ZERO)
                        borrowed = max(quota.ZERO, total - node.subtree.get(fr, quota.ZERO))
                        res.append({"name": r["name"], "total": format_qty(r["name"], total),
                                    "borrowed": format_qty(r["name"], borrowed)})
                    usage.append({"name": flv["name"], "resources": res})
            status = {**counts[name], "flavorsReservation": usage, "flavorsUsage": copy.deepcopy(usage),
                      "conditions": [c for c in (cq.get("status") or {}).get("conditions") or []
                                     if c.get("type") == "Active"]
                      or [{"type": "Active", "status": "True", "reason": "Ready",
                           "message": "Can admit new workloads", "observedGeneration":
                           cq["metadata"].get("generation", 1), "lastTransitionTime": self.cluster.now()}]}
            self.write_status(self.rt("clusterqueues"), cq, status)
        for k, lq in lqs.items():
            self.write_status(self.rt("localqueues"), lq, {**(lq.get("status") or {}), **lq_counts[k]})
