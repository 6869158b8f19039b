"""The ReplicaSet controller (keep `replicas` pods, heal deleted ones) and the Deployment controller
(ReplicaSets by pod-template hash, RollingUpdate within maxSurge/maxUnavailable, Recreate, rollout status).

Upstream: pkg/controller/replicaset/replica_set.go (`manageReplicas`), pkg/controller/deployment/rolling.go
and recreate.go, pkg/controller/deployment/util/deployment_util.go (`ResolveFenceposts`, `MaxSurge`).
"""
from __future__ import annotations

import copy

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Key, key_of
from kubesim.controllers.workloads.owned import (
    TERMINAL,
    OwnerController,
    active,
    condition,
    controller_ref,
    pod_phase,
    pod_ready,
    template_hash,
)


class ReplicaSetController(OwnerController):
    """apps/v1 ReplicaSets: keep `replicas` pods `<rs>-<5 random>` (heals deleted pods)."""

    name = "replicaset-controller"
    kind = ("apps", "replicasets")
    component = "replicaset-controller"

    def reconcile(self, key: Key) -> None:
        rs = self.current(key)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        pods = self.owned(rs)
        for p in pods:
            if pod_phase(p) in TERMINAL and not p["metadata"].get("deletionTimestamp"):
                self.delete_child(rs, p, event=False)     # a failed replica is replaced
        alive = [p for p in pods if active(p)]
        want = int(rs["spec"].get("replicas", 1))
        for _ in range(want - len(alive)):
            pod = self.pod_from_template(rs, rs["spec"].get("template") or {},
                                         generate_name=f"{rs['metadata']['name']}-")
            created = self.create_child(rs, pod)
            if created is None:
                break
            alive.append(created)
            self.events.record(rs, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        if len(alive) > want:
            # not-ready and newest first, as the real controller prefers
            victims = sorted(alive, key=lambda p: (pod_ready(p), p["metadata"].get("creationTimestamp", "")))
            for p in victims[:len(alive) - want]:
                self.delete_child(rs, p)
                alive.remove(p)
        ready = sum(1 for p in alive if pod_ready(p))
        self.write_status(rs, {"replicas": len(alive), "fullyLabeledReplicas": len(alive), "readyReplicas": ready,
                               "availableReplicas": ready, "observedGeneration": rs["metadata"]["generation"]})




def _resolve(value, want: int, round_up: bool) -> int:
    """maxSurge / maxUnavailable: an int, or a percentage of the desired replicas (surge rounds up)."""
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * want / 100
        return int(-(-exact // 1)) if round_up else int(exact // 1)
    return int(value or 0)


def rollout_targets(spec: dict, want: int, new: tuple[int, int],
                    old: list[tuple[int, int, int]]) -> tuple[int, list[int]]:
    """Replicas for the new ReplicaSet and each old one, one step of a rollout as the deployment
    controller computes it. new: (spec replicas, available); old: (spec replicas, pods, available).
    RollingUpdate: at most want+maxSurge pods, at least want-maxUnavailable available.
    Recreate: old ones go to 0 first; the new one scales up once their pods are gone."""
    strategy = spec.get("strategy") or {}
    new_replicas, new_available = new
    if strategy.get("type") == "Recreate":
        if any(pods for _r, pods, _a in old):
            return 0, [0 for _ in old]
        return want, [0 for _ in old]
    ru = strategy.get("rollingUpdate") or {}
    surge = _resolve(ru.get("maxSurge", "25%"), want, True)
    unavailable = _resolve(ru.get("maxUnavailable", "25%"), want, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    total = new_replicas + sum(r for r, _p, _a in old)
    if new_replicas > want:
        new_target = want
    else:
        new_target = min(want, new_replicas + max(0, want + surge - total))
    # scale old ones down (oldest first) while enough pods stay available
    all_pods = new_target + sum(r for r, _p, _a in old)
    can_remove = all_pods - (want - unavailable) - max(0, new_target - new_available)
    targets = []
    for replicas, _pods, _available in old:
        cut = min(replicas, max(0, can_remove))
        can_remove -= cut
        targets.append(replicas - cut)
    return new_target, targets


class DeploymentController(OwnerController):
    """apps/v1 Deployments: one ReplicaSet `<deploy>-<pod-template-hash>` per template; a template change
    rolls the pods over (`rollout_targets`: maxSurge / maxUnavailable, or Recreate)."""

    name = "deployment-controller"
    kind = ("apps", "deployments")
    child = ("apps", "replicasets")
    component = "deployment-controller"

    def reconcile(self, key: Key) -> None:
        d = self.current(key)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = d["spec"]
        want = int(spec.get("replicas", 1))
        template = copy.deepcopy(spec.get("template") or {})
        phash = template_hash(template)
        name = f"{d['metadata']['name']}-{phash}"
        sets = self.owned(d)
        new = next((rs for rs in sets if rs["metadata"]["name"] == name), None)
        old = [rs for rs in sets if rs is not new]
        revisions = [int((rs["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision", 0))
                     for rs in sets]
        old_state = [(int(rs["spec"].get("replicas", 0)), int((rs.get("status") or {}).get("replicas", 0)),
                      int((rs.get("status") or {}).get("availableReplicas", 0))) for rs in old]
        if new is None:
            first, _ = rollout_targets(spec, want, (0, 0), old_state)
            template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = phash
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = phash
            revision = str(max(revisions, default=0) + 1)
            rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": name, "labels": dict(template["metadata"]["labels"]),
                               "annotations": {"deployment.kubernetes.io/revision": revision,
                                               "deployment.kubernetes.io/desired-replicas": str(want)},
                               "ownerReferences": [controller_ref(d)]},
                  "spec": {"replicas": first, "selector": selector, "template": template}}
            new = self.create_child(d, rs)
            if new is None:
                return
            if first:
                self.events.record(d, "Normal", "ScalingReplicaSet", f"Scaled up replica set {name} from 0 to {first}")
            self._set_annotation(d, "deployment.kubernetes.io/revision", revision)
        new_state = (int(new["spec"].get("replicas", 0)), int((new.get("status") or {}).get("availableReplicas", 0)))
        new_target, old_targets = rollout_targets(spec, want, new_state, old_state)
        if new_target != new_state[0]:
            self._scale(d, new, new_target)
        for rs, target in zip(old, old_targets, strict=True):
            if int(rs["spec"].get("replicas", 0)) != target:
                self._scale(d, rs, target)
        self._status(d, new, sets if new in sets else sets + [new], want)

    def _scale(self, d: dict, rs: dict, replicas: int) -> None:
        fresh = self.store.get(self.child_rt, rs["metadata"]["namespace"], rs["metadata"]["name"])
        before = fresh["spec"].get("replicas", 0)
        fresh["spec"]["replicas"] = replicas
        try:
            self.cluster.observe(self.child_rt, self.store.update(self.child_rt, fresh["metadata"]["namespace"],
                                                                  fresh["metadata"]["name"], fresh))
        except ApiError as e:
            if e.code in (404, 409):
                self.queue.add_rate_limited(key_of(d))
                return
            raise
        verb = "up" if replicas > before else "down"
        self.events.record(d, "Normal", "ScalingReplicaSet",
                           f"Scaled {verb} replica set {rs['metadata']['name']} from {before} to {replicas}")

    def _set_annotation(self, d: dict, key: str, value: str) -> None:
        fresh = self.current(key_of(d))
        if fresh is None:
            return
        fresh["metadata"].setdefault("annotations", {})[key] = value
        try:
            self.cluster.observe(self.rt, self.store.update(self.rt, *key_of(d), fresh))
        except ApiError as e:
            if e.code not in (404, 409):
                raise

    def _status(self, d: dict, new: dict, sets: list[dict], want: int) -> None:
        d = self.current(key_of(d)) or d
        def total(field: str, rss) -> int:
            return sum(int((rs.get("status") or {}).get(field, 0)) for rs in rss)
        replicas, available = total("replicas", sets), total("availableReplicas", sets)
        updated = int((new.get("status") or {}).get("replicas", 0))
        now = self.cluster.now()
        old = {c["type"]: c for c in (d.get("status") or {}).get("conditions") or []}
        complete = updated == want and replicas == want and available == want

        def cond(type_, status, reason, message):
            prev = old.get(type_)
            c = condition(type_, status, reason, message, now)
            if prev and prev.get("status") == status:
                c["lastTransitionTime"] = prev.get("lastTransitionTime", now)
                if prev.get("reason") == reason:
                    c["lastUpdateTime"] = prev.get("lastUpdateTime", now)
            c.setdefault("lastUpdateTime", now)
            c.pop("lastProbeTime", None)
            return c
        rsname = new["metadata"]["name"]
        conditions = [
            cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
            if available >= want else
            cond("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability."),
            cond("Progressing", "True", "NewReplicaSetAvailable", f'ReplicaSet "{rsname}" has successfully progressed.')
            if complete else
            cond("Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{rsname}" is progressing.'),
        ]
        status = {"observedGeneration": d["metadata"]["generation"], "replicas": replicas,
                  "updatedReplicas": updated, "readyReplicas": total("readyReplicas", sets),
                  "availableReplicas": available, "conditions": conditions}
        if replicas - available > 0:
            status["unavailableReplicas"] = replicas - available
        self.write_status(d, status)
