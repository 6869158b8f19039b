"""Kueue's StatefulSet integration: the set's pods are one group, gated until its Workload is admitted.

Follows kubernetes-sigs/kueue (v0.19):
- `pkg/controller/jobs/statefulset/statefulset_webhook.go` + `jobs/pod/pod_webhook.go`: a pod of a
  StatefulSet with the `kueue.x-k8s.io/queue-name` label is created with the scheduling gate
  `kueue.x-k8s.io/admission` and the labels `kueue.x-k8s.io/managed: "true"` and
  `kueue.x-k8s.io/pod-group-name: <workload>` (`webhook.Webhook`, run with the Job webhook);
- `statefulset_reconciler.go`: one Workload per StatefulSet (`statefulset-<name>-<hash>`, pod set `main`
  with count = replicas, owned by the set); scaled to 0 its quota is released and the Workload put on
  hold (QuotaReserved False `OnHold` "StatefulSet scaled to zero; workload on hold"), scaled up again it
  waits for quota ("Workload no longer on hold; waiting for quota reservation");
- `jobs/pod/pod_controller.go` (pod groups): an admitted group's pods are ungated with the flavors'
  nodeLabels and tolerations merged in; an evicted group's running pods are deleted (the StatefulSet
  recreates them, gated again) and once none runs its quota is released and it is requeued.
"""
from __future__ import annotations

import copy

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Key, key_of
from kubesim.kueue import workload as wlib
from kubesim.kueue.controller import KueueController, installed
from kubesim.kueue.jobs import merged_template

GATE = "kueue.x-k8s.io/admission"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
ON_HOLD = "OnHold"


def sts_owner(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or []
                 if r.get("controller") and r.get("kind") == "StatefulSet"), None)


def add_gate(pod: dict) -> None:
    """pod_webhook.go: the admission scheduling gate and `kueue.x-k8s.io/managed: "true"` (mutates `pod`)."""
    gates = pod.setdefault("spec", {}).setdefault("schedulingGates", [])
    if not any(g.get("name") == GATE for g in gates):
        gates.append({"name": GATE})
    pod["metadata"].setdefault("labels", {})[MANAGED_LABEL] = "true"


def gate_pod(pod: dict) -> None:
    """The pod webhook's defaulting for a queued StatefulSet's pod (mutates `pod`)."""
    ref = sts_owner(pod)
    add_gate(pod)
    labels = pod["metadata"]["labels"]
    labels[GROUP_LABEL] = wlib.workload_name("StatefulSet", "apps", ref["name"], ref["uid"])


def gated(pod: dict) -> bool:
    return any(g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def running(pod: dict) -> bool:
    return (not gated(pod) and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not pod["metadata"].get("deletionTimestamp"))


class StatefulSetReconciler(KueueController):
    name = "kueue-statefulset-controller"

    def __init__(self, cluster):
        super().__init__(cluster)
        self.sts_rt = cluster.rt("statefulsets", "apps")
        self.pods_rt = cluster.rt("pods")

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) == ("apps", "statefulsets"):
            if event_type != "DELETED" and (obj["metadata"].get("labels") or {}).get(wlib.QUEUE_LABEL):
                self.queue.add(key_of(obj))
        elif ((rt.group, rt.plural) == ("", "pods") or (rt.group == wlib.GROUP and rt.plural == "workloads")):
            ref = sts_owner(obj)
            if ref:
                self.queue.add((obj["metadata"]["namespace"], ref["name"]))

    def reconcile(self, key: Key) -> None:
        if not installed(self.store):
            return
        try:
            sts = self.store.get(self.sts_rt, *key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        if sts["metadata"].get("deletionTimestamp") or not (sts["metadata"].get("labels") or {}).get(wlib.QUEUE_LABEL):
            return
        found = self.cluster.cache.select(self.rt("workloads"), key[0], {wlib.JOB_UID_LABEL: sts["metadata"]["uid"]})
        wl, replicas = (found[0] if found else None), int(sts["spec"].get("replicas", 1))
        if wl is None:
            if replicas > 0:
                self._create(sts, replicas)
            return
        reserved = wlib.condition(wl, "QuotaReserved") or {}
        has_admission = bool((wl.get("status") or {}).get("admission"))
        now, wl_rt = self.cluster.now(), self.rt("workloads")
        if replicas == 0:
            if has_admission:
                self.write_status(wl_rt, wl, wlib.unreserve(wl, ON_HOLD, "StatefulSet scaled to zero; workload on hold", now), key)
            return
        if reserved.get("reason") == ON_HOLD:
            self.write_status(wl_rt, wl, wlib.unreserve(
                wl, "Pending", "Workload no longer on hold; waiting for quota reservation", now), key)
            return
        pods = [p for p in self.cluster.cache.list(self.pods_rt, key[0])
                if (sts_owner(p) or {}).get("uid") == sts["metadata"]["uid"]]
        evicted = wlib.condition(wl, "Evicted")
        if evicted and evicted.get("status") == "True":
            active = [p for p in pods if running(p)]
            for p in active:
                self._delete(p)
            if has_admission and not active:
                status = wlib.unreserve(wl, "Pending", evicted.get("message") or "", now)
                wlib.set_condition(status, "Requeued", evicted.get("reason") == "Preempted", evicted.get("reason") or "",
                                   evicted.get("message") or "", now, wl["metadata"].get("generation", 1))
                self.write_status(wl_rt, wl, status, key)
            return
        if has_admission and wlib.is_true(wl, "Admitted"):
            for p in pods:
                if gated(p):
                    self._ungate(p, wl, key)

    def _create(self, sts: dict, replicas: int) -> None:
        wpcs = {o["metadata"]["name"]: o for o in self.objects("workloadpriorityclasses")}
        template = copy.deepcopy(sts["spec"].get("template") or {})
        prio, ref = wlib.priority_of(sts["metadata"].get("labels") or {}, template.get("spec") or {}, wpcs, {})
        wl = wlib.build(sts, replicas, {"spec": template.get("spec") or {}}, prio, ref)
        try:
            self.cluster.observe(self.rt("workloads"), self.store.create(self.rt("workloads"), sts["metadata"]["namespace"], wl))
        except ApiError as e:
            if e.code != 409:
                raise

    def _delete(self, pod: dict) -> None:
        try:
            self.store.delete(self.pods_rt, *key_of(pod))
        except ApiError as e:
            if e.code != 404:
                raise

    def _ungate(self, pod: dict, wl: dict, key: Key) -> None:
        names = sorted({f for psa in wl["status"]["admission"].get("podSetAssignments") or []
                        for f in (psa.get("flavors") or {}).values()})
        flavors = [f for f in (self.cluster.cache.get(self.rt("resourceflavors"), None, n) for n in names) if f]
        try:
            fresh = self.store.get(self.pods_rt, *key_of(pod))
            if not gated(fresh):
                return
            fresh["spec"] = merged_template({"spec": fresh["spec"]}, flavors)["spec"]
            fresh["spec"]["schedulingGates"] = [g for g in fresh["spec"].get("schedulingGates") or [] if g.get("name") != GATE]
            if not fresh["spec"]["schedulingGates"]:
                fresh["spec"].pop("schedulingGates")
            self.cluster.observe(self.pods_rt, self.store.update(self.pods_rt, *key_of(fresh), fresh))
        except ApiError as e:
            if e.code not in (404, 409):
                raise
            self.queue.add_after(key, 0.01)
