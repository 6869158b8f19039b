"""CustomResourceDefinitions: the 4 Sedna CRDs install unchanged, register their resources, and custom
resources get CRUD, /status, merge and JSON patch (strategic merge → 415), as on kube-apiserver."""
from __future__ import annotations

import functools
import importlib.resources

import pytest
import yaml

CRD_DIR = importlib.resources.files("k8s_templates") / "sedna" / "crds"
SEDNA_CRDS = sorted(f.name for f in CRD_DIR.iterdir() if f.name.endswith(".yaml"))
G, V = "sedna.io", "v1alpha1"
MERGE, JSON_PATCH = "application/merge-patch+json", "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


@functools.cache
def _crd_text(filename: str) -> str:
    return (CRD_DIR / filename).read_text()


def load_crd(filename: str) -> dict:
    # libyaml's loader: the pure-Python one takes over a second per large Sedna CRD
    return yaml.load(_crd_text(filename), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def dataset(name: str) -> dict:
    return {"apiVersion": f"{G}/{V}", "kind": "Dataset", "metadata": {"name": name},
            "spec": {"url": "s3://data/train.txt", "format": "txt", "nodeName": "edge-1"}}


async def install(kube, filenames=SEDNA_CRDS):
    ext = kube.api("ApiextensionsV1Api")
    return [await ext.create_custom_resource_definition(load_crd(f)) for f in filenames]


def test_the_four_sedna_crds_are_packaged():
    """The CRDs ship in k8s_templates/sedna/crds with their licence."""
    assert SEDNA_CRDS == ["sedna.io_datasets.yaml", "sedna.io_federatedlearningjobs.yaml",
                          "sedna.io_jointinferenceservices.yaml", "sedna.io_models.yaml"]
    assert (CRD_DIR / "LICENSE").read_text().startswith("\n") or "Apache" in (CRD_DIR / "LICENSE").read_text()


async def test_install_sedna_crds_sets_status_and_discovery(kube):
    """Creating a CRD sets status Established and NamesAccepted (True) and acceptedNames, and the
    resource appears in discovery under /apis/<group>/<version> with its status subresource."""
    crds = await install(kube)
    for crd in crds:
        conds = {c.type: c.status for c in crd.status.conditions}
        assert conds == {"Established": "True", "NamesAccepted": "True"}
        assert crd.status.accepted_names.kind == crd.spec.names.kind
        assert crd.status.stored_versions == [V]
    apis = kube.api("ApisApi")
    groups = {g.name for g in (await apis.get_api_versions()).groups}
    assert G in groups
    custom = kube.api("CustomObjectsApi")
    resources = await custom.get_api_resources(G, V) if hasattr(custom, "get_api_resources") else None
    if resources is not None:
        names = {r.name for r in resources.resources}
        assert {"datasets", "datasets/status", "models", "federatedlearningjobs",
                "jointinferenceservices"} <= names


async def test_custom_resource_crud_and_status(kube):
    """CRs: create/get/list/replace/delete; generation bumps on spec changes; /status changes only
    status, and the main resource ignores status (the CRD declares the status subresource)."""
    await install(kube, ["sedna.io_datasets.yaml"])
    custom = kube.api("CustomObjectsApi")
    ds = await custom.create_namespaced_custom_object(G, V, "default", "datasets",
                                                      {**dataset("ds1"), "status": {"numberOfSamples": 5}})
    assert ds["metadata"]["generation"] == 1 and ds["metadata"]["uid"]
    assert "status" not in ds          # with the status subresource, a create cannot set status
    got = await custom.get_namespaced_custom_object(G, V, "default", "datasets", "ds1")
    assert got["spec"]["url"] == "s3://data/train.txt"
    listed = await custom.list_namespaced_custom_object(G, V, "default", "datasets")
    assert listed["kind"] == "DatasetList" and [i["metadata"]["name"] for i in listed["items"]] == ["ds1"]
    got["spec"]["format"] = "csv"
    got["status"] = {"numberOfSamples": 99}
    replaced = await custom.replace_namespaced_custom_object(G, V, "default", "datasets", "ds1", got)
    assert replaced["metadata"]["generation"] == 2 and "status" not in replaced
    st = await custom.patch_namespaced_custom_object_status(G, V, "default", "datasets", "ds1",
                                                            {"status": {"numberOfSamples": 10}},
                                                            _content_type=MERGE)
    assert st["status"] == {"numberOfSamples": 10} and st["metadata"]["generation"] == 2
    got = await custom.get_namespaced_custom_object_status(G, V, "default", "datasets", "ds1")
    assert got["status"]["numberOfSamples"] == 10
    await custom.delete_namespaced_custom_object(G, V, "default", "datasets", "ds1")
    status, err = await kube.error(custom.get_namespaced_custom_object(G, V, "default", "datasets", "ds1"))
    assert status == 404 and err["message"] == 'datasets.sedna.io "ds1" not found'


async def test_custom_resource_patch_types(kube):
    """CRs accept JSON merge and JSON patch; strategic merge → 415 UnsupportedMediaType."""
    await install(kube, ["sedna.io_datasets.yaml"])
    custom = kube.api("CustomObjectsApi")
    await custom.create_namespaced_custom_object(G, V, "default", "datasets", dataset("p"))
    merged = await custom.patch_namespaced_custom_object(G, V, "default", "datasets", "p",
                                                         {"spec": {"format": "csv"}}, _content_type=MERGE)
    assert merged["spec"]["format"] == "csv" and merged["spec"]["url"] == "s3://data/train.txt"
    patched = await custom.patch_namespaced_custom_object(G, V, "default", "datasets", "p", [
        {"op": "replace", "path": "/spec/nodeName", "value": "edge-2"}], _content_type=JSON_PATCH)
    assert patched["spec"]["nodeName"] == "edge-2"
    status, err = await kube.error(custom.patch_namespaced_custom_object(
        G, V, "default", "datasets", "p", {"spec": {"format": "x"}}, _content_type=STRATEGIC))
    assert status == 415 and err["reason"] == "UnsupportedMediaType"


async def test_deleting_crd_unregisters_and_deletes_crs(kube):
    """Deleting a CRD deletes its custom resources and the resource disappears (404)."""
    await install(kube, ["sedna.io_datasets.yaml"])
    custom = kube.api("CustomObjectsApi")
    await custom.create_namespaced_custom_object(G, V, "default", "datasets", dataset("gone"))
    await kube.api("ApiextensionsV1Api").delete_custom_resource_definition("datasets.sedna.io")
    status, _ = await kube.error(custom.list_namespaced_custom_object(G, V, "default", "datasets"))
    assert status == 404
    await install(kube, ["sedna.io_datasets.yaml"])
    items = (await custom.list_namespaced_custom_object(G, V, "default", "datasets"))["items"]
    assert items == []


async def test_crd_name_must_be_plural_dot_group(kube):
    """metadata.name of a CRD must be <plural>.<group> → otherwise 422 Invalid."""
    crd = load_crd("sedna.io_datasets.yaml")
    crd["metadata"]["name"] = "wrong.sedna.io"
    status, err = await kube.error(kube.api("ApiextensionsV1Api").create_custom_resource_definition(crd))
    assert status == 422 and "spec.names.plural" in err["message"]


@pytest.mark.parametrize("scope", ["Cluster"])
async def test_cluster_scoped_crd(kube, scope):
    """A Cluster-scoped CRD's resources have no namespace in the path or the object."""
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": scope,
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    await kube.api("ApiextensionsV1Api").create_custom_resource_definition(crd)
    custom = kube.api("CustomObjectsApi")
    w = await custom.create_cluster_custom_object("example.com", "v1", "widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "size": 3})
    assert "namespace" not in w["metadata"] and w["size"] == 3
    got = await custom.get_cluster_custom_object("example.com", "v1", "widgets", "w")
    assert got["metadata"]["uid"] == w["metadata"]["uid"]


async def test_crd_update_registers_new_versions(kube):
    """Updating a CRD to serve another version makes that version's path work (same stored objects)."""
    [crd] = await install(kube, ["sedna.io_datasets.yaml"])
    ext = kube.api("ApiextensionsV1Api")
    custom = kube.api("CustomObjectsApi")
    await custom.create_namespaced_custom_object(G, V, "default", "datasets", dataset("multi"))
    body = load_crd("sedna.io_datasets.yaml")
    body["metadata"]["resourceVersion"] = crd.metadata.resource_version
    v2 = dict(body["spec"]["versions"][0], name="v1beta1", storage=False)
    body["spec"]["versions"].append(v2)
    await ext.replace_custom_resource_definition("datasets.sedna.io", body)
    got = await custom.get_namespaced_custom_object(G, "v1beta1", "default", "datasets", "multi")
    assert got["apiVersion"] == f"{G}/v1beta1" and got["spec"]["nodeName"] == "edge-1"


async def test_watch_custom_resources(kube):
    """Custom resources can be watched like built-ins (both clients' Watch yield dicts for them)."""
    await install(kube, ["sedna.io_datasets.yaml"])
    custom = kube.api("CustomObjectsApi")
    async with kube.watching("CustomObjectsApi", "list_namespaced_custom_object", G, V, "default",
                             "datasets") as events:
        await custom.create_namespaced_custom_object(G, V, "default", "datasets", dataset("w"))
        await custom.patch_namespaced_custom_object_status(G, V, "default", "datasets", "w",
                                                           {"status": {"numberOfSamples": 3}},
                                                           _content_type=MERGE)
        await events.wait_for(lambda e: len(e) >= 2)
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "w"), ("MODIFIED", "w")]
    assert events[1][1]["status"] == {"numberOfSamples": 3}
