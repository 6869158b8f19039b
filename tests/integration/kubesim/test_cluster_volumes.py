"""Claims and volumes: kubesim's PersistentVolume controller and dynamic provisioner
(``kubesim/controllers/workloads/pvcbinder.py``), and how kube-apiserver prints both and a ResourceQuota
(pkg/printers/internalversion/printers.go ``printPersistentVolume``, ``printPersistentVolumeClaim``,
``printResourceQuota``), seen through the Python client and the Table endpoint kubectl reads."""
from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver.endpoints.printers_kinds import CELLS
from kubesim.testing import wait_until

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _table(kubesim, path: str) -> dict:
    req = urllib.request.Request(kubesim.url + path, headers={"Accept": TABLE})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _claim(name: str, size: str = "3Gi", modes=("ReadWriteMany", "ReadWriteOnce"), cls: str | None = None) -> dict:
    spec = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls:
        spec["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec}


def _gone(read) -> bool:
    try:
        read()
    except ApiException as e:
        return e.status == 404
    return False


def test_a_claim_gets_a_volume_of_its_own_both_bound_and_the_volume_goes_with_the_claim(kubesim, k8s):
    """pv_controller.go ``bind``: the volume's claimRef names the claim with its uid, the claim's volumeName the
    volume; the provisioner names it ``pvc-<claim uid>`` with the claim's size, modes and class, policy Delete;
    ``reclaimVolume`` deletes it once the claim is gone."""
    core = CoreV1Api(k8s)
    created = core.create_namespaced_persistent_volume_claim("default", _claim("data", cls="fast"))
    claim = wait_until(lambda: (c := core.read_namespaced_persistent_volume_claim("data", "default"))
                       .status.phase == "Bound" and c, 30, 0.05, what="the claim bound")
    pv_name = f"pvc-{created.metadata.uid}"
    assert claim.spec.volume_name == pv_name
    assert claim.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert claim.status.capacity == {"storage": "3Gi"}
    pv = core.read_persistent_volume(pv_name)
    assert pv.status.phase == "Bound" and pv.spec.capacity == {"storage": "3Gi"}
    assert pv.spec.persistent_volume_reclaim_policy == "Delete" and pv.spec.storage_class_name == "fast"
    assert (pv.spec.claim_ref.namespace, pv.spec.claim_ref.name, pv.spec.claim_ref.uid) == (
        "default", "data", created.metadata.uid)

    # kubectl's columns: the claim's VOLUME and CAPACITY, the volume's CLAIM; access modes in RWO, ROX, RWX order
    pvcs = _table(kubesim, "/api/v1/namespaces/default/persistentvolumeclaims")
    row = next(r["cells"] for r in pvcs["rows"] if r["cells"][0] == "data")
    assert row[:6] == ["data", "Bound", pv_name, "3Gi", "RWO,RWX", "fast"]
    pvs = _table(kubesim, "/api/v1/persistentvolumes")
    assert [c["name"] for c in pvs["columnDefinitions"]] == [
        "Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
        "VolumeAttributesClass", "Reason", "Age", "VolumeMode"]
    row = next(r["cells"] for r in pvs["rows"] if r["cells"][0] == pv_name)
    assert row[:8] == [pv_name, "3Gi", "RWO,RWX", "Delete", "Bound", "default/data", "fast", "<unset>"]

    core.delete_namespaced_persistent_volume_claim("data", "default")
    wait_until(lambda: _gone(lambda: core.read_persistent_volume(pv_name)), 30, 0.05, what="the released volume deleted")


def test_a_claim_deleted_and_made_again_under_its_name_gets_a_new_volume(kubesim, k8s):
    core = CoreV1Api(k8s)
    first = core.create_namespaced_persistent_volume_claim("default", _claim("again", "1Gi"))
    wait_until(lambda: core.read_namespaced_persistent_volume_claim("again", "default").status.phase == "Bound",
               30, 0.05, what="the first claim bound")
    core.delete_namespaced_persistent_volume_claim("again", "default")
    second = core.create_namespaced_persistent_volume_claim("default", _claim("again", "2Gi"))
    wait_until(lambda: core.read_namespaced_persistent_volume_claim("again", "default").status.phase == "Bound",
               30, 0.05, what="the second claim bound")
    assert core.read_namespaced_persistent_volume_claim("again", "default").spec.volume_name == \
        f"pvc-{second.metadata.uid}"
    assert core.read_persistent_volume(f"pvc-{second.metadata.uid}").spec.capacity == {"storage": "2Gi"}
    wait_until(lambda: _gone(lambda: core.read_persistent_volume(f"pvc-{first.metadata.uid}")), 30, 0.05,
               what="the first claim's volume deleted")
    core.delete_namespaced_persistent_volume_claim("again", "default")


def test_a_resource_quota_prints_used_over_hard_requests_apart_from_limits():
    """printResourceQuota: status.hard's names in order, "name: used/hard", ``limits.*`` in the Limit column."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    quota = {"metadata": {"name": "skiff-quota", "creationTimestamp": "2026-12-01T11:55:00Z"},
             "status": {"hard": {"requests.cpu": "8", "limits.memory": "64Gi", "requests.nvidia.com/gpu": "2",
                                 "pods": "50", "limits.cpu": "16"},
                        "used": {"requests.cpu": "1500m", "limits.memory": "2Gi", "limits.cpu": "2"}}}
    assert CELLS[("", "resourcequotas")](quota, now) == [
        "skiff-quota", "5m", "pods: 0/50, requests.cpu: 1500m/8, requests.nvidia.com/gpu: 0/2",
        "limits.cpu: 2/16, limits.memory: 2Gi/64Gi"]


def test_resource_quotas_are_listed_with_kube_apiservers_columns(kubesim, k8s):
    core = CoreV1Api(k8s)
    core.create_namespaced_resource_quota("default", {"apiVersion": "v1", "kind": "ResourceQuota",
                                                      "metadata": {"name": "q"},
                                                      "spec": {"hard": {"requests.cpu": "4", "limits.cpu": "8"}}})
    t = _table(kubesim, "/api/v1/namespaces/default/resourcequotas")
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Age", "Request", "Limit"]
    row = wait_until(lambda: (r := next(r["cells"] for r in _table(
        kubesim, "/api/v1/namespaces/default/resourcequotas")["rows"] if r["cells"][0] == "q")) and r[2] and r,
        30, 0.05, what="the quota's status")
    assert row[2] == "requests.cpu: 0/4" and row[3] == "limits.cpu: 0/8", row
    core.delete_namespaced_resource_quota("q", "default")
