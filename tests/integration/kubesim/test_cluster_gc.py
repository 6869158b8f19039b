"""Garbage collection by ownerReferences, as kube-controller-manager's garbage collector does it."""
from __future__ import annotations

import kubernetes
from kubernetes.client import BatchV1Api, CoreV1Api, CustomObjectsApi, V1DeleteOptions

from kubesim.testing import wait_until


def configmap(name, owner=None, block=False) -> dict:
    md = {"name": name}
    if owner is not None:
        md["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                  "name": owner["name"], "uid": owner["uid"], "blockOwnerDeletion": block}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"k": "v"}}


def owner(core, name="owner", finalizers=None) -> dict:
    body = configmap(name)
    if finalizers:
        body["metadata"]["finalizers"] = finalizers
    cm = core.create_namespaced_config_map("default", body)
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": cm.metadata.uid}


def names(core) -> set[str]:
    return {c.metadata.name for c in core.list_namespaced_config_map("default").items}


def exists(core, name) -> bool:
    return name in names(core)


def test_background_deletes_dependents(k8s):
    """Background (default): the owner goes at once, then the GC deletes its dependents."""
    core = CoreV1Api(k8s)
    o = owner(core)
    core.create_namespaced_config_map("default", configmap("dep-1", o))
    core.create_namespaced_config_map("default", configmap("dep-2", o))
    core.create_namespaced_config_map("default", configmap("bystander"))
    core.delete_namespaced_config_map("owner", "default")
    wait_until(lambda: names(core) == {"bystander"})


def test_foreground_waits_for_blocking_dependents(k8s):
    """Foreground: the owner keeps a deletionTimestamp and the foregroundDeletion finalizer until its
    blockOwnerDeletion dependents are gone; a dependent held by its own finalizer keeps the owner."""
    core = CoreV1Api(k8s)
    o = owner(core)
    held = configmap("held", o, block=True)
    held["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_config_map("default", held)
    core.create_namespaced_config_map("default", configmap("free", o, block=True))
    core.delete_namespaced_config_map("owner", "default", body=V1DeleteOptions(propagation_policy="Foreground"))
    wait_until(lambda: not exists(core, "free"))
    got = core.read_namespaced_config_map("owner", "default")
    assert got.metadata.deletion_timestamp is not None and "foregroundDeletion" in got.metadata.finalizers
    assert core.read_namespaced_config_map("held", "default").metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    wait_until(lambda: not exists(core, "owner") and not exists(core, "held"))


def test_orphan_keeps_dependents_without_owner_reference(k8s):
    """Orphan: the GC removes the owner's reference from each dependent, then the orphan finalizer."""
    core = CoreV1Api(k8s)
    o = owner(core)
    core.create_namespaced_config_map("default", configmap("child", o, block=True))
    core.delete_namespaced_config_map("owner", "default", body=V1DeleteOptions(propagation_policy="Orphan"))
    wait_until(lambda: not exists(core, "owner"))
    child = core.read_namespaced_config_map("child", "default")
    assert not child.metadata.owner_references and child.metadata.deletion_timestamp is None


def test_job_deleted_without_policy_orphans_pods(k8s):
    """batch/v1 Job: a DELETE with no propagationPolicy orphans its pods (the real default for Jobs)."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"metadata": {"annotations": {"kubesim.io/duration": "60"}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}})
    pods = wait_until(lambda: core.list_namespaced_pod("default", label_selector="job-name=j").items)
    batch.delete_namespaced_job("j", "default")
    wait_until(lambda: not batch.list_namespaced_job("default").items)
    wait_until(lambda: not core.read_namespaced_pod(pods[0].metadata.name, "default").metadata.owner_references)


def test_job_deleted_in_background_takes_its_pods(k8s):
    """propagationPolicy Background on a Job deletes its pods too."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"metadata": {"annotations": {"kubesim.io/duration": "60"}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}})
    wait_until(lambda: core.list_namespaced_pod("default", label_selector="job-name=j").items)
    batch.delete_namespaced_job("j", "default", propagation_policy="Background")
    wait_until(lambda: not core.list_namespaced_pod("default").items)


def test_dangling_owner_reference_is_collected(k8s):
    """A dependent created after its owner is gone, or pointing at a uid that is not the live object of
    that name, is deleted by the GC."""
    core = CoreV1Api(k8s)
    o = owner(core)
    core.delete_namespaced_config_map("owner", "default")
    core.create_namespaced_config_map("default", configmap("late", o))
    live = owner(core, "owner")          # same name, new uid
    core.create_namespaced_config_map("default", configmap("wrong-uid", o))
    core.create_namespaced_config_map("default", configmap("right-uid", live))
    wait_until(lambda: not exists(core, "late") and not exists(core, "wrong-uid"))
    assert exists(core, "right-uid")


def test_only_dangling_references_removed_when_another_owner_lives(k8s):
    """With two owners of which one is gone, the dependent stays and loses only that reference."""
    core = CoreV1Api(k8s)
    a, b = owner(core, "a"), owner(core, "b")
    both = configmap("both", a)
    both["metadata"]["ownerReferences"].append(configmap("x", b)["metadata"]["ownerReferences"][0])
    core.create_namespaced_config_map("default", both)
    core.delete_namespaced_config_map("a", "default")

    def refs():
        got = core.read_namespaced_config_map("both", "default")
        return [r.name for r in got.metadata.owner_references or []]
    wait_until(lambda: refs() == ["b"])


def test_custom_resource_owner(k8s):
    """Owners may be custom resources: deleting one collects the pods it owns."""
    ext = kubernetes.client.ApiextensionsV1Api(k8s)
    ext.create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}},
        _preload_content=False)
    co, core = CustomObjectsApi(k8s), CoreV1Api(k8s)
    w = co.create_namespaced_custom_object("example.com", "v1", "default", "widgets",
                                           {"apiVersion": "example.com/v1", "kind": "Widget",
                                            "metadata": {"name": "w"}})
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "w", "uid": w["metadata"]["uid"]}
    core.create_namespaced_config_map("default", configmap("owned", ref))
    co.delete_namespaced_custom_object("example.com", "v1", "default", "widgets", "w")
    wait_until(lambda: not exists(core, "owned"))


def test_namespace_deletion_takes_its_workloads(k8s):
    """Deleting a namespace removes everything in it — Jobs, their pods, ConfigMaps — then the namespace."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-x"}})
    batch.create_namespaced_job("team-x", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"metadata": {"annotations": {"kubesim.io/duration": "60"}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "c", "image": "busybox"}]}}}})
    core.create_namespaced_config_map("team-x", configmap("cm"))
    wait_until(lambda: core.list_namespaced_pod("team-x").items)
    core.delete_namespace("team-x")
    wait_until(lambda: "team-x" not in {n.metadata.name for n in core.list_namespace().items})
    assert not core.list_pod_for_all_namespaces(field_selector="metadata.namespace=team-x").items
    assert not batch.list_job_for_all_namespaces().items
