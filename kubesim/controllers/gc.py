"""The garbage collector: ownerReferences, as kube-controller-manager's garbagecollector does.

- Background: when an owner is gone, its dependents are deleted.
- Foreground: the owner stays (deletionTimestamp + `foregroundDeletion` finalizer) while the GC deletes its
  dependents; the finalizer goes once no dependent with `blockOwnerDeletion: true` is left.
- Orphan: the GC removes the owner's reference from every dependent, then the `orphan` finalizer.
- A dependent whose owner does not exist (deleted earlier, or the uid in the reference does not match the
  live object of that name) is dangling and is collected; when only some of its owners are gone, only
  those references are removed.
Namespace contents are removed by the store (the namespace controller's job).
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller, ControllerContext

Ref = tuple[str, str, str | None, str]   # (group, plural, namespace, name) of a dependent


class GarbageCollector(Controller):
    name = "garbage-collector"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.live: dict[str, tuple] = {}                    # uid -> (rt, namespace, name)
        self.dependents: dict[str, dict[Ref, object]] = {}  # owner uid -> dependent ref -> rt
        self.owner_uids: dict[Ref, tuple[str, ...]] = {}    # dependent ref -> its owners' uids

    def reset(self) -> None:
        self.live.clear()
        self.dependents.clear()
        self.owner_uids.clear()

    def on_event(self, event_type, rt, obj, old):
        if rt.plural == "events":
            return
        md = obj["metadata"]
        uid = md.get("uid")
        ref: Ref = (rt.group, rt.plural, md.get("namespace"), md["name"])
        owners = tuple(o.get("uid") for o in md.get("ownerReferences") or [] if o.get("uid"))
        previous = self.owner_uids.get(ref, ())
        for o in previous:
            if o not in owners or event_type == "DELETED":
                deps = self.dependents.get(o)
                if deps is not None:
                    deps.pop(ref, None)
                    if not deps:
                        del self.dependents[o]
        if event_type == "DELETED":
            self.owner_uids.pop(ref, None)
            if self.live.get(uid, (None, None, None))[2] == md["name"]:
                del self.live[uid]
            for o in owners:               # an owner in foreground deletion may be waiting for this one
                self.queue.add(("owner", o))
            if uid in self.dependents:
                self.queue.add(("owner", uid))
            return
        self.live[uid] = (rt, md.get("namespace"), md["name"])
        if owners:
            self.owner_uids[ref] = owners
            for o in owners:
                self.dependents.setdefault(o, {})[ref] = rt
            if event_type == "ADDED" or set(owners) != set(previous):
                self.queue.add(("dependent", *ref))
        else:
            self.owner_uids.pop(ref, None)
        finalizers = md.get("finalizers") or []
        if md.get("deletionTimestamp") and ("orphan" in finalizers or "foregroundDeletion" in finalizers):
            self.queue.add(("owner", uid))

    def reconcile(self, key) -> None:
        if key[0] == "owner":
            self._owner(key[1])
        else:
            self._dependent(key[1:])

    # --- an owner that is gone or being deleted --------------------------------------------------
    def _owner(self, uid: str) -> None:
        entry = self.live.get(uid)
        owner = None
        if entry is not None:
            rt, ns, name = entry
            owner = self._get(rt, ns, name)
            if owner is not None and owner["metadata"]["uid"] != uid:
                owner = None
        deps = dict(self.dependents.get(uid, {}))
        if owner is None:
            for ref in deps:     # gone: each dependent is checked (it may have other owners)
                self.queue.add(("dependent", *ref))
            return
        md = owner["metadata"]
        finalizers = md.get("finalizers") or []
        if not md.get("deletionTimestamp"):
            return
        if "orphan" in finalizers:
            for ref, drt in deps.items():
                self._drop_reference(drt, ref, {uid})
            self._remove_finalizer(entry, uid, "orphan")
        elif "foregroundDeletion" in finalizers:
            blocking = 0
            for ref, drt in deps.items():
                dep = self._get(drt, ref[2], ref[3])
                if dep is None:
                    continue
                if any(o.get("uid") == uid and o.get("blockOwnerDeletion")
                       for o in dep["metadata"].get("ownerReferences") or []):
                    blocking += 1
                if not dep["metadata"].get("deletionTimestamp"):
                    # as the real GC: a dependent that owns others is deleted in the foreground too
                    nested = dep["metadata"]["uid"] in self.dependents
                    self._delete(drt, ref, "Foreground" if nested else "Background")
            if not blocking:
                self._remove_finalizer(entry, uid, "foregroundDeletion")

    # --- a dependent whose owners may be gone ------------------------------------------------------
    def _dependent(self, ref: Ref) -> None:
        group, plural, ns, name = ref
        drt = next((r for r in self.store.registry.all() if r.group == group and r.plural == plural), None)
        if drt is None:
            return
        dep = self._get(drt, ns, name)
        if dep is None:
            return
        owners = dep["metadata"].get("ownerReferences") or []
        dangling = set()
        for o in owners:
            if not self._owner_exists(o, ns):
                dangling.add(o.get("uid"))
        if not dangling:
            return
        if len(dangling) == len(owners):
            self._delete(drt, ref, "Background")
        else:
            self._drop_reference(drt, ref, dangling)

    def _owner_exists(self, ref: dict, namespace: str | None) -> bool:
        uid = ref.get("uid")
        live = self.live.get(uid)
        if live is not None and live[2] == ref.get("name"):
            return True
        ort = self.store.registry.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if ort is None:
            return True      # an owner kind this server does not know: leave the dependent alone
        owner = self._get(ort, namespace if ort.namespaced else None, ref.get("name", ""))
        return owner is not None and owner["metadata"].get("uid") == uid

    # --- writes ------------------------------------------------------------------------------------
    def _get(self, rt, ns, name) -> dict | None:
        try:
            return self.store.get(rt, ns, name)
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def _delete(self, rt, ref: Ref, propagation: str) -> None:
        try:
            self.store.delete(rt, ref[2], ref[3], propagation=propagation)
        except ApiError as e:
            if e.code != 404:
                raise

    def _modify(self, rt, ns, name, change) -> dict | None:
        """Read-modify-write with optimistic concurrency: ``change(obj)`` edits a fresh copy and returns False
        when there is nothing to do; a 409 re-reads and tries again, a vanished object ends it."""
        for _ in range(5):
            obj = self._get(rt, ns, name)
            if obj is None or not change(obj):
                return None
            try:
                return self.store.update(rt, ns, name, obj)
            except ApiError as e:
                if e.code == 404:
                    return None
                if e.code != 409:
                    raise
        return None

    def _drop_reference(self, rt, ref: Ref, uids: set[str]) -> None:
        def change(dep: dict) -> bool:
            owners = dep["metadata"].get("ownerReferences") or []
            kept = [o for o in owners if o.get("uid") not in uids]
            if len(kept) == len(owners):
                return False
            if kept:
                dep["metadata"]["ownerReferences"] = kept
            else:
                dep["metadata"].pop("ownerReferences", None)
            return True

        updated = self._modify(rt, ref[2], ref[3], change)
        if updated is not None:
            self.cluster.observe(rt, updated)

    def _remove_finalizer(self, entry, uid: str, finalizer: str) -> None:
        rt, ns, name = entry

        def change(owner: dict) -> bool:
            finalizers = owner["metadata"].get("finalizers") or []
            if owner["metadata"]["uid"] != uid or finalizer not in finalizers:
                return False
            owner["metadata"]["finalizers"] = [f for f in finalizers if f != finalizer]
            return True

        self._modify(rt, ns, name, change)
