"""The StatefulSet controller: ordinal pods `<sts>-0`..., PVCs `<template>-<sts>-<i>` from
volumeClaimTemplates kept when pods or the set go (retention Retain), OrderedReady and Parallel pod management,
and the set's history: a ControllerRevision per template (what `kubectl rollout history/undo` read).

Upstream: pkg/controller/statefulset/stateful_set_control.go (`getStatefulSetRevisions`: the current template's
revision created, or renumbered to the newest when an older template comes back; history trimmed to
revisionHistoryLimit) and stateful_set_utils.go (`newRevision`: data `{"spec": {"template": {...,
"$patch": "replace"}}}`, the set's annotations, the template's labels plus controller-revision-hash), and
pkg/controller/history/controller_history.go (`NewControllerRevision`: name `<set>-<hash>`, owned by the set).
"""
from __future__ import annotations

import copy

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Key, key_of
from kubesim.controllers.workloads.owned import (
    TERMINAL,
    OwnerController,
    active,
    controller_uid,
    pod_phase,
    pod_ready,
    template_hash,
)


class StatefulSetController(OwnerController):
    """apps/v1 StatefulSets: ordinal pods `<sts>-0`..., PVCs `<template>-<sts>-<i>` kept when pods or the
    set go (retention Retain); OrderedReady creates a pod once the previous ones are Running and Ready."""

    name = "statefulset-controller"
    kind = ("apps", "statefulsets")
    component = "statefulset-controller"

    def reconcile(self, key: Key) -> None:
        sts = self.current(key)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        spec = sts["spec"]
        name = sts["metadata"]["name"]
        want = int(spec.get("replicas", 1))
        revision = f"{name}-{template_hash(spec.get('template') or {})}"
        self._history(sts, revision)
        pods = {p["metadata"]["name"]: p for p in self.owned(sts)}
        ordered = spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        for pname, p in list(pods.items()):
            ordinal = self._ordinal(name, pname)
            outdated = (p["metadata"].get("labels") or {}).get("controller-revision-hash") != revision
            if ordinal is None or ordinal >= want or pod_phase(p) in TERMINAL or (outdated and active(p)):
                if not p["metadata"].get("deletionTimestamp"):
                    self.delete_child(sts, p)
                del pods[pname]
        for i in range(want):
            pname = f"{name}-{i}"
            if pname in pods:
                if ordered and not (pod_phase(pods[pname]) == "Running" and pod_ready(pods[pname])):
                    break
                continue
            if not self._claims(sts, i):
                break
            pod = self._pod(sts, i, revision)
            created = self.create_child(sts, pod)
            if created is None:
                break
            pods[pname] = created
            self.events.record(sts, "Normal", "SuccessfulCreate",
                               f"create Pod {pname} in StatefulSet {name} successful")
            if ordered:
                break
        ready = sum(1 for p in pods.values() if pod_ready(p))
        current = sum(1 for p in pods.values()
                      if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == revision)
        self.write_status(sts, {"observedGeneration": sts["metadata"]["generation"], "replicas": len(pods),
                                "readyReplicas": ready, "currentReplicas": current, "updatedReplicas": current,
                                "availableReplicas": ready, "currentRevision": revision,
                                "updateRevision": revision, "collisionCount": 0})

    def _history(self, sts: dict, revision: str) -> None:
        rt = self.cluster.rt("controllerrevisions", "apps")
        md, spec = sts["metadata"], sts["spec"]
        ns, uid = md["namespace"], md["uid"]
        mine = sorted((r for r in self.cluster.cache.list(rt, ns) if controller_uid(r) == uid),
                      key=lambda r: r.get("revision", 0))
        top = mine[-1].get("revision", 0) if mine else 0
        found = next((r for r in mine if r["metadata"]["name"] == revision), None)
        try:
            if found is None:
                template = copy.deepcopy(spec.get("template") or {})
                body = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                        "metadata": {"name": revision, "namespace": ns,
                                     "labels": {**((template.get("metadata") or {}).get("labels") or {}),
                                                "controller-revision-hash": revision[len(md["name"]) + 1:]},
                                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                                          "name": md["name"], "uid": uid, "controller": True,
                                                          "blockOwnerDeletion": True}]},
                        "data": {"spec": {"template": {**template, "$patch": "replace"}}}, "revision": top + 1}
                if md.get("annotations"):
                    body["metadata"]["annotations"] = dict(md["annotations"])
                self.cluster.observe(rt, self.store.create(rt, ns, body))
                mine.append(body)
            elif found is not mine[-1]:        # an older template is back (rollout undo): now the newest
                self.cluster.observe(rt, self.store.update(rt, ns, revision, {**found, "revision": top + 1}))
            limit = int(spec.get("revisionHistoryLimit", 10))
            for old in [r for r in mine if r["metadata"]["name"] != revision][:max(0, len(mine) - 1 - limit)]:
                self.store.delete(rt, ns, old["metadata"]["name"])
        except ApiError as e:
            if e.code == 409:
                self.queue.add_rate_limited(key_of(sts))
            elif e.code not in (403, 404):
                raise

    @staticmethod
    def _ordinal(name: str, pod_name: str) -> int | None:
        prefix, _, tail = pod_name.rpartition("-")
        return int(tail) if prefix == name and tail.isdigit() else None

    def _claims(self, sts: dict, i: int) -> bool:
        """Create the pod's PVCs from volumeClaimTemplates if missing (they outlive the pod and the set)."""
        pvc_rt = self.cluster.rt("persistentvolumeclaims")
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        labels = dict((sts["spec"].get("selector") or {}).get("matchLabels") or {})
        for t in sts["spec"].get("volumeClaimTemplates") or []:
            claim = f"{t['metadata']['name']}-{name}-{i}"
            try:
                self.store.get(pvc_rt, ns, claim)
                continue
            except ApiError as e:
                if e.code != 404:
                    raise
            pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": claim, "labels": {**((t.get("metadata") or {}).get("labels") or {}),
                                                          **labels}},
                   "spec": copy.deepcopy(t.get("spec") or {})}
            if self.create_child(sts, pvc, rt=pvc_rt) is None:
                return False
            self.events.record(sts, "Normal", "SuccessfulCreate",
                               f"create Claim {claim} Pod {name}-{i} in StatefulSet {name} success")
        return True

    def _pod(self, sts: dict, i: int, revision: str) -> dict:
        name = sts["metadata"]["name"]
        pname = f"{name}-{i}"
        pod = self.pod_from_template(sts, sts["spec"].get("template") or {}, name=pname, labels={
            "statefulset.kubernetes.io/pod-name": pname, "apps.kubernetes.io/pod-index": str(i),
            "controller-revision-hash": revision})
        spec = pod["spec"]
        spec["hostname"] = pname
        if sts["spec"].get("serviceName"):
            spec["subdomain"] = sts["spec"]["serviceName"]
        claims = {t["metadata"]["name"]: f"{t['metadata']['name']}-{name}-{i}"
                  for t in sts["spec"].get("volumeClaimTemplates") or []}
        if claims:
            volumes = [v for v in spec.get("volumes") or [] if v.get("name") not in claims]
            volumes += [{"name": t, "persistentVolumeClaim": {"claimName": c}} for t, c in claims.items()]
            spec["volumes"] = volumes
        return pod
