"""A dynamic provisioner and PV binder in one step: a Pending PersistentVolumeClaim becomes Bound with the
capacity it requests (no PersistentVolume objects, no storage classes).

Upstream (what it stands in for): pkg/controller/volume/persistentvolume/pv_controller.go.
"""
from __future__ import annotations

from kubesim.controller import Controller, ControllerContext, Key, key_of
from kubesim.errors import ApiError


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
