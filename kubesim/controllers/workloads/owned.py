"""What every workload controller shares: `OwnerController` (a controller of objects that own others, found by
their controller ownerReference; refused creates become `FailedCreate` events and are retried with back-off),
controller references, pod phase/readiness, conditions and the pod-template hash.

Upstream: pkg/controller/controller_ref_manager.go (adoption by controller ownerReference),
pkg/controller/controller_utils.go (`ComputeHash`, `FilterActivePods`, pod creation from a template) and
k8s.io/apimachinery/pkg/util/rand (`SafeEncodeString`).
"""
from __future__ import annotations

import copy
import hashlib
import json

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.names import SAFE_ALPHABET
from kubesim.controllers.framework import Controller, ControllerContext, EventRecorder, Key, key_of

TERMINAL = ("Succeeded", "Failed")
_SAFE = SAFE_ALPHABET     # apimachinery's SafeEncodeString alphabet


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
                self.queue.add_rate_limited(key_of(owner))
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
