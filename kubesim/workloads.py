"""Workload controllers as kube-controller-manager runs them: Job, Deployment (via ReplicaSets),
ReplicaSet, StatefulSet, PVC binding (a PVC becomes Bound with its requested capacity), Endpoints, and
HorizontalPodAutoscalers (bounds only: there is no metrics server).

Each controller owns what it creates with a controller ownerReference (`blockOwnerDeletion: true`), finds
its children by that reference, and reports status through the status subresource. A refused create (e.g.
quota) becomes a `FailedCreate` Warning event on the owner and is retried with back-off.
"""
from __future__ import annotations

import copy
import hashlib
import json

from kubesim.clock import parse_time
from kubesim.controller import Controller, ControllerContext, EventRecorder, Key, key_of
from kubesim.errors import ApiError

TERMINAL = ("Succeeded", "Failed")
_SAFE = "bcdfghjklmnpqrstvwxz2456789"     # apimachinery's SafeEncodeString alphabet


def controllers(cluster: ControllerContext) -> list[Controller]:
    return [JobController(cluster), DeploymentController(cluster), ReplicaSetController(cluster),
            StatefulSetController(cluster), PVCBinder(cluster), EndpointsController(cluster),
            HorizontalPodAutoscalerController(cluster)]


def template_hash(template: dict, size: int = 10) -> str:
    n = int.from_bytes(hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()[:8], "big")
    out = ""
    for _ in range(size):
        n, r = divmod(n, len(_SAFE))
        out += _SAFE[r]
    return out


def controller_ref(owner: dict) -> dict:
    md = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": md["name"], "uid": md["uid"],
            "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: dict) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def pod_ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def pod_phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def active(pod: dict) -> bool:
    return pod_phase(pod) not in TERMINAL and not pod["metadata"].get("deletionTimestamp")


def condition(type_: str, status: str, reason: str, message: str, now: str) -> dict:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastProbeTime": now, "lastTransitionTime": now}


class OwnerController(Controller):
    """A controller of `kind` objects that own `child` objects (found by controller ownerReference)."""

    kind: tuple[str, str] = ("", "")      # (group, plural) of the owner
    child: tuple[str, str] = ("", "pods")
    component = ""

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.rt = cluster.rt(self.kind[1], self.kind[0])
        self.child_rt = cluster.rt(self.child[1], self.child[0])
        self.events = EventRecorder(self.store, self.component)
        self.children: dict[str, set[Key]] = {}     # owner uid -> child keys
        self.child_owner: dict[Key, str] = {}
        self.uid_key: dict[str, Key] = {}
        self.failures: dict[Key, int] = {}          # consecutive refused creates, for the back-off

    def reset(self) -> None:
        self.children.clear()
        self.child_owner.clear()
        self.uid_key.clear()
        self.failures.clear()

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) == self.kind:
            key = key_of(obj)
            if event_type == "DELETED":
                self.uid_key.pop(obj["metadata"]["uid"], None)
            else:
                self.uid_key[obj["metadata"]["uid"]] = key
            self.queue.add(key)
        elif (rt.group, rt.plural) == self.child:
            self._index_child(obj, deleted=event_type == "DELETED")
            for o in (controller_uid(obj), controller_uid(old) if old else None):
                if o and o in self.uid_key:
                    self.queue.add(self.uid_key[o])

    def _index_child(self, obj: dict, deleted: bool = False) -> None:
        key = key_of(obj)
        prev = self.child_owner.pop(key, None)
        if prev is not None:
            self.children.get(prev, set()).discard(key)
        owner = controller_uid(obj)
        if owner and not deleted:
            self.child_owner[key] = owner
            self.children.setdefault(owner, set()).add(key)

    def owned(self, owner: dict) -> list[dict]:
        uid = owner["metadata"]["uid"]
        out = []
        for key in list(self.children.get(uid, ())):
            obj = self.cluster.cache.get(self.child_rt, *key)
            if obj is not None and controller_uid(obj) == uid:
                out.append(obj)
        return sorted(out, key=lambda o: (o["metadata"].get("creationTimestamp", ""), o["metadata"]["name"]))

    def current(self, key: Key) -> dict | None:
        try:
            return self.store.get(self.rt, *key)
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def create_child(self, owner: dict, obj: dict, rt=None) -> dict | None:
        """Create a child; a refusal becomes a FailedCreate event and a retry with back-off."""
        rt = rt or self.child_rt
        key = key_of(owner)
        try:
            created = self.cluster.observe(rt, self.store.create(rt, owner["metadata"]["namespace"], obj))
        except ApiError as e:
            n = self.failures.get(key, 0)
            self.failures[key] = n + 1
            self.events.record(owner, "Warning", "FailedCreate", f"Error creating: {e.message}")
            base = self.cluster.timing.create_retry
            self.queue.add_after(key, min(base * 2 ** n, base * 10))
            return None
        self.failures.pop(key, None)
        if rt is self.child_rt:
            self._index_child(created)
        return created

    def delete_child(self, owner: dict, child: dict, event: bool = True) -> None:
        try:
            self.store.delete(self.child_rt, child["metadata"]["namespace"], child["metadata"]["name"],
                              propagation="Background")
        except ApiError as e:
            if e.code != 404:
                raise
            return
        if event:
            self.events.record(owner, "Normal", "SuccessfulDelete",
                               f"Deleted {self.child_rt.kind.lower()}: {child['metadata']['name']}")

    def write_status(self, owner: dict, status: dict) -> dict:
        if owner.get("status") == status:
            return owner
        owner = copy.deepcopy(owner)
        owner["status"] = status
        try:
            return self.cluster.observe(self.rt, self.store.update(
                self.rt, owner["metadata"]["namespace"], owner["metadata"]["name"], owner, subresource="status"))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_after(key_of(owner), 0.01)
                return owner
            if e.code == 404:
                return owner
            raise

    def pod_from_template(self, owner: dict, template: dict, *, name: str | None = None,
                          generate_name: str | None = None, labels: dict | None = None) -> dict:
        tmd = template.get("metadata") or {}
        md = {"labels": {**(tmd.get("labels") or {}), **(labels or {})},
              "ownerReferences": [controller_ref(owner)]}
        if tmd.get("annotations"):
            md["annotations"] = dict(tmd["annotations"])
        if tmd.get("finalizers"):
            md["finalizers"] = list(tmd["finalizers"])
        if name:
            md["name"] = name
        else:
            md["generateName"] = generate_name
        return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": copy.deepcopy(template.get("spec") or {})}


# ------------------------------------------------------------------------------------------------------
def job_finish(spec: dict, succeeded: int, failures: int, running: int, elapsed: float) -> tuple | None:
    """Whether a Job is finished, as (outcome, reason, message); checked in the real controller's order:
    activeDeadlineSeconds, backoffLimit, then completions (no completions: one success and none running)."""
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and elapsed >= deadline:
        return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
    if failures > int(spec.get("backoffLimit", 6)):
        return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    completions = spec.get("completions")
    if (completions is not None and succeeded >= completions) or (
            completions is None and succeeded > 0 and not running):
        return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
    return None


def job_pods_wanted(spec: dict, succeeded: int) -> int:
    """How many pods should be active: parallelism, capped by the completions still missing."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None:
        return parallelism if succeeded == 0 else 0
    return max(0, min(parallelism, completions - succeeded))


class JobController(OwnerController):
    """batch/v1 Jobs: pods `<job>-<5 random>`, backoffLimit, activeDeadlineSeconds, suspend, TTL, conditions."""

    name = "job-controller"
    kind = ("batch", "jobs")
    component = "job-controller"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.counted: dict[str, set[str]] = {}    # job uid -> uids of finished pods already in its status
        self.lost: dict[str, set[str]] = {}       # job uid -> uids of pods deleted before they finished
        self.removing: set[str] = set()           # pods this controller deletes itself (not failures)

    def reset(self) -> None:
        super().reset()
        self.counted.clear()
        self.lost.clear()
        self.removing.clear()

    def on_event(self, event_type, rt, obj, old):
        if event_type == "DELETED" and (rt.group, rt.plural) == self.child:
            uid, owner = obj["metadata"]["uid"], controller_uid(obj)
            if owner and pod_phase(obj) not in TERMINAL and uid not in self.removing:
                # as the real controller (pod tracking finalizers): a pod deleted before it finished failed
                self.lost.setdefault(owner, set()).add(uid)
            self.removing.discard(uid)
        elif event_type == "DELETED" and (rt.group, rt.plural) == self.kind:
            self.counted.pop(obj["metadata"]["uid"], None)
            self.lost.pop(obj["metadata"]["uid"], None)
        super().on_event(event_type, rt, obj, old)

    def delete_child(self, owner: dict, child: dict, event: bool = True) -> None:
        self.removing.add(child["metadata"]["uid"])
        super().delete_child(owner, child, event)

    def reconcile(self, key: Key) -> None:
        job = self.current(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec, status = job["spec"], copy.deepcopy(job.get("status") or {})
        now = self.cluster.now()
        conds = status.get("conditions") or []
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
            self._ttl(job, status)
            return
        pods = self.owned(job)
        # As the real controller: status.succeeded/failed are what was counted so far; each pod that
        # finished since is added once (the real one marks counted pods by removing its finalizer).
        counted = self.counted.setdefault(job["metadata"]["uid"], set())
        succeeded, failed = int(status.get("succeeded") or 0), int(status.get("failed") or 0)
        for uid in self.lost.pop(job["metadata"]["uid"], set()) - counted:
            counted.add(uid)
            failed += 1
        for p in pods:
            if pod_phase(p) in TERMINAL and p["metadata"]["uid"] not in counted:
                counted.add(p["metadata"]["uid"])
                if pod_phase(p) == "Succeeded":
                    succeeded += 1
                else:
                    failed += 1
        running = [p for p in pods if active(p)]
        failures = failed    # for backoffLimit; with OnFailure, container restarts count too (as in 1.31)
        if spec.get("template", {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            failures += sum(cs.get("restartCount", 0) for p in running
                            for cs in (p.get("status") or {}).get("containerStatuses") or [])

        if spec.get("suspend"):
            for p in running:
                self.delete_child(job, p)
            if not any(c["type"] == "Suspended" and c["status"] == "True" for c in conds):
                conds = [c for c in conds if c["type"] != "Suspended"] + [
                    condition("Suspended", "True", "JobSuspended", "Job suspended", now)]
                self.events.record(job, "Normal", "Suspended", "Job suspended")
            status.pop("startTime", None)
            self._status(job, status, [], succeeded, failed, conds)
            return
        if any(c["type"] == "Suspended" and c["status"] == "True" for c in conds):
            conds = [c for c in conds if c["type"] != "Suspended"] + [
                condition("Suspended", "False", "JobResumed", "Job resumed", now)]
            self.events.record(job, "Normal", "Resumed", "Job resumed")
        status.setdefault("startTime", now)

        elapsed = (self.store.clock.now() - parse_time(status["startTime"])).total_seconds()
        finish = job_finish(spec, succeeded, failures, len(running), elapsed)
        if finish is None and spec.get("activeDeadlineSeconds") is not None:
            self.queue.add_after(key, spec["activeDeadlineSeconds"] - elapsed)
        if finish is not None:
            outcome, reason, message = finish
            for p in running:
                self.delete_child(job, p)
            first = "SuccessCriteriaMet" if outcome == "Complete" else "FailureTarget"
            conds = [c for c in conds if c["type"] not in (first, outcome)] + [
                condition(first, "True", reason, message, now), condition(outcome, "True", reason, message, now)]
            if outcome == "Complete":
                status["completionTime"] = now
                self.events.record(job, "Normal", "Completed", "Job completed")
            else:
                self.events.record(job, "Warning", reason, message)
            job = self._status(job, status, [], succeeded, failed, conds)
            self._ttl(job, job.get("status") or {})
            return

        want = job_pods_wanted(spec, succeeded)
        template = spec.get("template") or {}
        for _ in range(want - len(running)):
            pod = self.pod_from_template(job, template, generate_name=f"{job['metadata']['name']}-")
            created = self.create_child(job, pod)
            if created is None:
                break
            running.append(created)
            self.events.record(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        for p in running[max(want, 0):]:
            self.delete_child(job, p)
        self._status(job, status, running[:max(want, 0)], succeeded, failed, conds)

    def _status(self, job: dict, status: dict, running: list[dict], succeeded: int, failed: int,
                conds: list[dict]) -> dict:
        status = {k: v for k, v in status.items() if k not in ("active", "succeeded", "failed")}
        if running:
            status["active"] = len(running)
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        status["ready"] = sum(1 for p in running if pod_ready(p))
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        if conds:
            status["conditions"] = conds
        return self.write_status(job, status)

    def _ttl(self, job: dict, status: dict) -> None:
        """ttlSecondsAfterFinished: the TTL-after-finished controller deletes the Job (Background)."""
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        done = [c for c in status.get("conditions") or [] if c["type"] in ("Complete", "Failed")]
        finished_at = status.get("completionTime") or (done[0]["lastTransitionTime"] if done else None)
        finished = parse_time(finished_at) if finished_at else None
        if finished is None:
            return
        left = ttl - (self.store.clock.now() - finished).total_seconds()
        if left > 0:
            self.queue.add_after(key_of(job), left)
            return
        try:
            self.store.delete(self.rt, job["metadata"]["namespace"], job["metadata"]["name"],
                              propagation="Background", preconditions={"uid": job["metadata"]["uid"]})
        except ApiError as e:
            if e.code not in (404, 409):
                raise


# ------------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------------
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
                self.queue.add_after(key_of(d), 0.01)
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


# ------------------------------------------------------------------------------------------------------
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


# ------------------------------------------------------------------------------------------------------
class PVCBinder(Controller):
    """A dynamic provisioner in one step: a Pending PVC becomes Bound with the capacity it requests."""

    name = "persistentvolume-binder"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.rt = cluster.rt("persistentvolumeclaims")

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) == ("", "persistentvolumeclaims") and event_type != "DELETED" and (obj.get("status") or {}).get("phase") != "Bound":
            self.queue.add(key_of(obj))

    def reconcile(self, key: Key) -> None:
        try:
            pvc = self.store.get(self.rt, *key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        if (pvc.get("status") or {}).get("phase") == "Bound" or pvc["metadata"].get("deletionTimestamp"):
            return
        spec = pvc.get("spec") or {}
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
        pvc["status"] = {"phase": "Bound", "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                         "capacity": {"storage": storage}}
        try:
            self.cluster.observe(self.rt, self.store.update(self.rt, *key, pvc, subresource="status"))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_after(key, 0.01)
            elif e.code != 404:
                raise


# ------------------------------------------------------------------------------------------------------
class EndpointsController(Controller):
    """Endpoints for Services with a selector: the IPs of matching pods (ready ones in `addresses`,
    others in `notReadyAddresses`), with the Service's target ports — as the endpoints controller does."""

    name = "endpoints-controller"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.svc_rt = cluster.rt("services")
        self.ep_rt = cluster.rt("endpoints")
        self.pods_rt = cluster.rt("pods")
        # the Services with a selector, filed under one of its key=value pairs: a pod event looks up only the
        # Services one of its labels could satisfy, not every Service of the namespace
        self._by_pair: dict[tuple, dict[Key, dict]] = {}     # (ns, key, value) -> {service key: selector}
        self._pair_of: dict[Key, tuple] = {}

    def reset(self) -> None:
        self._by_pair.clear()
        self._pair_of.clear()

    def _file_service(self, key: Key, selector: dict | None) -> None:
        pair = self._pair_of.pop(key, None)
        if pair is not None:
            bucket = self._by_pair[pair]
            bucket.pop(key, None)
            if not bucket:
                del self._by_pair[pair]
        if selector:
            pair = (key[0], *min(selector.items()))
            self._pair_of[key] = pair
            self._by_pair.setdefault(pair, {})[key] = selector

    def on_event(self, event_type, rt, obj, old):
        kind = (rt.group, rt.plural)
        if kind == ("", "services"):
            key = key_of(obj)
            self._file_service(key, None if event_type == "DELETED" else (obj.get("spec") or {}).get("selector"))
            self.queue.add(key)
        elif kind == ("", "pods"):
            ns = obj["metadata"]["namespace"]
            for labels in (obj["metadata"].get("labels") or {}, ((old or {}).get("metadata") or {}).get("labels")):
                for pair in (labels or {}).items():
                    for key, sel in self._by_pair.get((ns, *pair), {}).items():
                        if all(labels.get(k) == v for k, v in sel.items()):
                            self.queue.add(key)

    def reconcile(self, key: Key) -> None:
        ns, name = key
        svc = self.cluster.cache.get(self.svc_rt, ns, name)
        if svc is None:      # the Service is gone: so are its Endpoints
            try:
                self.store.delete(self.ep_rt, ns, name)
            except ApiError as e:
                if e.code != 404:
                    raise
            return
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            return           # a Service without a selector: its Endpoints are the user's
        ready, not_ready = [], []
        for p in sorted(self.cluster.cache.select(self.pods_rt, ns, selector), key=lambda p: p["metadata"]["name"]):
            ip = (p.get("status") or {}).get("podIP")
            if not ip or not active(p):
                continue
            addr = {"ip": ip, "nodeName": p["spec"].get("nodeName"),
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"],
                                  "uid": p["metadata"]["uid"]}}
            (ready if pod_ready(p) else not_ready).append(addr)
        ports = [{k: v for k, v in {"name": sp.get("name"), "protocol": sp.get("protocol", "TCP"),
                                    "port": sp.get("targetPort") if isinstance(sp.get("targetPort"), int)
                                    else sp.get("port")}.items() if v is not None}
                 for sp in svc["spec"].get("ports") or []]
        subset = {"ports": ports} if ports else {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        subsets = [subset] if (ready or not_ready) else []
        desired = {"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": name, "namespace": ns, "labels": dict(svc["metadata"].get("labels") or {})},
                   "subsets": subsets}
        try:
            current = self.store.get(self.ep_rt, ns, name)
        except ApiError as e:
            if e.code != 404:
                raise
            try:
                self.store.create(self.ep_rt, ns, desired)
            except ApiError as err:
                if err.code == 409:
                    self.queue.add_after(key, 0.01)
                elif err.code not in (403, 404):
                    raise
            return
        if ((current.get("subsets") or []) == subsets
                and (current["metadata"].get("labels") or {}) == desired["metadata"]["labels"]):
            return
        current["subsets"] = subsets
        current["metadata"]["labels"] = desired["metadata"]["labels"]
        try:
            self.store.update(self.ep_rt, ns, name, current)
        except ApiError as e:
            if e.code == 409:
                self.queue.add_after(key, 0.01)
            elif e.code != 404:
                raise


# ------------------------------------------------------------------------------------------------------
def hpa_decision(spec: dict, current: int) -> tuple[int, str, str, str]:
    """(desired replicas, ScalingLimited status, reason, message) as the HPA controller decides without a
    metrics server: the replica count is only brought within [minReplicas, maxReplicas]."""
    low, high = int(spec.get("minReplicas") or 1), int(spec["maxReplicas"])
    if current > high:
        return high, "True", "TooManyReplicas", "the desired replica count is more than the maximum replica count"
    if current < low:
        return low, "True", "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    return current, "False", "DesiredWithinRange", "the desired count is within the acceptable range"


class HorizontalPodAutoscalerController(Controller):
    """autoscaling/v2 HPAs. kubesim has no metrics server, so (as a real cluster without one) metrics cannot
    be read — `ScalingActive=False/FailedGetResourceMetric` — but the target is kept within
    [minReplicas, maxReplicas] (scaled through its spec.replicas, with a `SuccessfulRescale` event)."""

    name = "horizontal-pod-autoscaler"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.rt = cluster.rt("horizontalpodautoscalers", "autoscaling", "v2")
        self.events = EventRecorder(self.store, "horizontal-pod-autoscaler")
        self.targets: dict[tuple[str, str, str], set[Key]] = {}    # (namespace, kind, name) -> HPA keys

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) == ("autoscaling", "horizontalpodautoscalers"):
            key = key_of(obj)
            for keys in self.targets.values():
                keys.discard(key)
            ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
            if event_type != "DELETED":
                self.targets.setdefault((key[0], ref.get("kind", ""), ref.get("name", "")), set()).add(key)
                self.queue.add(key)
        elif rt.group == "apps" and rt.plural in ("deployments", "statefulsets", "replicasets"):
            for key in self.targets.get((obj["metadata"].get("namespace"), rt.kind, obj["metadata"]["name"]), ()):
                self.queue.add(key)

    def reconcile(self, key: Key) -> None:
        try:
            hpa = self.store.get(self.rt, *key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        spec, now = hpa.get("spec") or {}, self.cluster.now()
        ref = spec.get("scaleTargetRef") or {}
        trt = self.store.registry.by_kind(ref.get("apiVersion", "apps/v1"), ref.get("kind", ""))
        target = None
        if trt is not None:
            try:
                target = self.store.get(trt, key[0], ref.get("name", ""))
            except ApiError as e:
                if e.code != 404:
                    raise
        old = {c["type"]: c for c in (hpa.get("status") or {}).get("conditions") or []}

        def cond(type_, status, reason, message):
            c = {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}
            if old.get(type_, {}).get("status") == status:
                c["lastTransitionTime"] = old[type_].get("lastTransitionTime", now)
            return c
        status = {k: v for k, v in (hpa.get("status") or {}).items() if k == "lastScaleTime"}
        if target is None:
            plural = f"{trt.plural}.{trt.group}" if trt else ref.get("kind", "").lower()
            status.update(currentReplicas=0, desiredReplicas=0, conditions=[cond(
                "AbleToScale", "False", "FailedGetScale", "the HPA controller was unable to get the target's current "
                f'scale: {plural} "{ref.get("name")}" not found')])
            self._write(hpa, status)
            return
        current = int((target.get("spec") or {}).get("replicas", 1))
        desired, limited, why, message = hpa_decision(spec, current)
        if current == 0:
            desired, limited, why, message = 0, "False", "DesiredWithinRange", message
        if desired != current:
            target["spec"]["replicas"] = desired
            try:
                self.store.update(trt, key[0], target["metadata"]["name"], target)
            except ApiError as e:
                if e.code in (404, 409):
                    self.queue.add_after(key, 0.01)
                    return
                raise
            status["lastScaleTime"] = now
            below = "below Spec.MinReplicas" if desired > current else "above Spec.MaxReplicas"
            self.events.record(hpa, "Normal", "SuccessfulRescale",
                               f"New size: {desired}; reason: Current number of replicas {below}")
        status.update(
            currentReplicas=int((target.get("status") or {}).get("replicas", current)), desiredReplicas=desired,
            conditions=[
                cond("AbleToScale", "True", "SucceededGetScale",
                     "the HPA controller was able to get the target's current scale"),
                cond("ScalingActive", "False", "ScalingDisabled", "scaling is disabled since the replica count of "
                     "the target is zero") if current == 0 else
                cond("ScalingActive", "False", "FailedGetResourceMetric", "the HPA was unable to compute the "
                     "replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no "
                     "metrics returned from resource metrics API"),
                cond("ScalingLimited", limited, why, message)])
        self._write(hpa, status)

    def _write(self, hpa: dict, status: dict) -> None:
        if hpa.get("status") == status:
            return
        hpa["status"] = status
        try:
            self.cluster.observe(self.rt, self.store.update(self.rt, *key_of(hpa), hpa, subresource="status"))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_after(key_of(hpa), 0.01)
            elif e.code != 404:
                raise
