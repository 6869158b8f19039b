"""The PersistentVolume controller and a dynamic provisioner in one: a Pending PersistentVolumeClaim gets a
PersistentVolume of its own and both become Bound; a deleted claim's volume is deleted (reclaim policy Delete).

Upstream (what it stands in for):
- the volume's name is ``pvc-<claim uid>``, its capacity, access modes, volume mode and class the claim's, its
  reclaim policy ``Delete`` (the default of a StorageClass): sig-storage-lib-external-provisioner's
  ``controller.go`` (``getProvisionedVolumeNameForClaim``, ``provisionClaimOperation``); a hostPath source as
  kind's local-path provisioner provisions;
- binding: pkg/controller/volume/persistentvolume/pv_controller.go ``bind``: the volume's ``claimRef`` names the
  claim (with its uid), the claim's ``spec.volumeName`` the volume, annotations ``pv.kubernetes.io/bind-completed``
  and ``pv.kubernetes.io/bound-by-controller`` on the claim (``bound-by-controller`` on the volume too), then
  both statuses ``Bound``, the claim's with the volume's capacity and access modes (``updateClaimStatus``);
- a released volume with policy Delete is deleted (``reclaimVolume`` -> ``deleteVolumeOperation``).
No StorageClass objects: a claim without a class gets a volume without one (a real cluster's default class would
be set on the claim by the DefaultStorageClass admission plugin).
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller, ControllerContext, Key, key_of

PROVISIONER = "kubesim.io/hostpath"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


def volume_name(claim: dict) -> str:
    return f"pvc-{claim['metadata']['uid']}"


def desired_volume(claim: dict) -> dict:
    """The volume a provisioner makes for ``claim`` (pure)."""
    md, spec = claim["metadata"], claim.get("spec") or {}
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    name = volume_name(claim)
    pv_spec = {"capacity": {"storage": storage},
               "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
               "persistentVolumeReclaimPolicy": "Delete",
               "volumeMode": spec.get("volumeMode") or "Filesystem",
               "hostPath": {"path": f"/var/lib/kubesim/volumes/{name}", "type": "DirectoryOrCreate"},
               "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": md["namespace"],
                            "name": md["name"], "uid": md["uid"], "resourceVersion": md.get("resourceVersion")}}
    if spec.get("storageClassName"):
        pv_spec["storageClassName"] = spec["storageClassName"]
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER, BOUND_BY_CONTROLLER: "yes"}},
            "spec": pv_spec}


class PVCBinder(Controller):
    """Provision, bind, and delete a released volume (see the module's docstring)."""

    name = "persistentvolume-binder"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.rt = cluster.rt("persistentvolumeclaims")
        self.pv_rt = cluster.rt("persistentvolumes")

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) != ("", "persistentvolumeclaims"):
            return
        if event_type == "DELETED" or (obj.get("status") or {}).get("phase") != "Bound":
            self.queue.add(key_of(obj))

    def reconcile(self, key: Key) -> None:
        try:
            pvc = self.store.get(self.rt, *key)
        except ApiError as e:
            if e.code != 404:
                raise
            self._delete_released(key)
            return
        if (pvc.get("status") or {}).get("phase") == "Bound" or pvc["metadata"].get("deletionTimestamp"):
            return
        self._delete_released(key, keep=pvc["metadata"]["uid"])  # a deleted claim's namesake: its volume goes
        try:
            self._bind_claim(pvc, self._volume_for(pvc))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_rate_limited(key)
                return
            if e.code != 404:
                raise

    def _volume_for(self, pvc: dict) -> dict:
        """The claim's volume, provisioned if missing, with status Bound."""
        name = (pvc.get("spec") or {}).get("volumeName") or volume_name(pvc)
        try:
            pv = self.store.get(self.pv_rt, None, name)
        except ApiError as e:
            if e.code != 404:
                raise
            pv = self.cluster.observe(self.pv_rt, self.store.create(self.pv_rt, None, desired_volume(pvc)))
        if (pv.get("status") or {}).get("phase") != "Bound":
            pv["status"] = {"phase": "Bound"}
            pv = self.cluster.observe(self.pv_rt, self.store.update(self.pv_rt, None, name, pv, subresource="status"))
        return pv

    def _bind_claim(self, pvc: dict, pv: dict) -> dict:
        ns, name = pvc["metadata"]["namespace"], pvc["metadata"]["name"]
        if (pvc.get("spec") or {}).get("volumeName") != pv["metadata"]["name"]:
            ann = pvc["metadata"].setdefault("annotations", {})
            ann[BIND_COMPLETED], ann[BOUND_BY_CONTROLLER] = "yes", "yes"
            pvc.setdefault("spec", {})["volumeName"] = pv["metadata"]["name"]
            pvc = self.cluster.observe(self.rt, self.store.update(self.rt, ns, name, pvc))
        pvc["status"] = {"phase": "Bound", "accessModes": list(pv["spec"].get("accessModes") or []),
                         "capacity": dict(pv["spec"].get("capacity") or {})}
        return self.cluster.observe(self.rt, self.store.update(self.rt, ns, name, pvc, subresource="status"))

    def _delete_released(self, key: Key, keep: str | None = None) -> None:
        """Delete the volumes (policy Delete) that name claim ``key`` but not its uid ``keep``."""
        ns, name = key
        volumes, _ = self.store.list(self.pv_rt)
        for pv in volumes:
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            if (ref.get("namespace"), ref.get("name")) == (ns, name) and ref.get("uid") != keep and \
                    pv["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
                try:
                    self.store.delete(self.pv_rt, None, pv["metadata"]["name"])
                except ApiError as e:
                    if e.code != 404:
                        raise
