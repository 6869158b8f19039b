"""Server-side apply field ownership (metadata.managedFields), through the real client, as kube-apiserver:

an apply records the fields its configuration names under its field manager; a field it stops applying is
removed unless another manager owns it; applying a different value to a field another manager owns is a
409 conflict naming the manager and the field, unless force=true moves the field over; re-applying the same
configuration writes nothing.
"""
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

APPLY = "application/apply-patch+yaml"


def cm(data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
            "data": data}


def apply(core, body, manager, force=None):
    kwargs = {"force": force} if force is not None else {}
    return core.patch_namespaced_config_map("c", "default", body, field_manager=manager, _content_type=APPLY,
                                            **kwargs)


def owners(obj) -> dict[str, dict]:
    return {e.manager: e.fields_v1 for e in obj.metadata.managed_fields or []}


def test_apply_records_ownership_and_removes_dropped_fields(k8s):
    """The first apply creates the object with one Apply entry owning f:data.f:a and f:data.f:b; applying
    only `a` afterwards removes `b` (the manager no longer wants it, nobody else owns it)."""
    core = client.CoreV1Api(k8s)
    first = apply(core, cm({"a": "1", "b": "2"}), "skiff")
    entry = first.metadata.managed_fields[0]
    assert (entry.manager, entry.operation, entry.fields_type) == ("skiff", "Apply", "FieldsV1")
    assert entry.fields_v1 == {"f:data": {"f:a": {}, "f:b": {}}}
    second = apply(core, cm({"a": "1"}), "skiff")
    assert second.data == {"a": "1"} and owners(second)["skiff"] == {"f:data": {"f:a": {}}}


def test_reapplying_the_same_configuration_writes_nothing(k8s):
    """A no-op apply returns the stored object: same resourceVersion, same managedFields time."""
    core = client.CoreV1Api(k8s)
    first = apply(core, cm({"a": "1"}), "skiff")
    again = apply(core, cm({"a": "1"}), "skiff")
    assert again.metadata.resource_version == first.metadata.resource_version
    assert again.metadata.managed_fields[0].time == first.metadata.managed_fields[0].time


def test_conflict_with_another_manager_is_409_unless_forced(k8s):
    """Another manager applying a different value to an owned field gets 409 Conflict naming the owner and
    the field path; the same value is accepted and shared; force=true takes the field over."""
    core = client.CoreV1Api(k8s)
    apply(core, cm({"a": "1"}), "kubectl")
    with pytest.raises(ApiException) as caught:
        apply(core, cm({"a": "2"}), "skiff")
    body = json.loads(caught.value.body)
    assert caught.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == 'Apply failed with 1 conflict: conflict with "kubectl": .data.a'
    assert body["details"]["causes"][0]["field"] == ".data.a"
    assert core.read_namespaced_config_map("c", "default").data == {"a": "1"}    # nothing written

    shared = apply(core, cm({"a": "1"}), "skiff")                                    # same value: shared
    assert set(owners(shared)) == {"kubectl", "skiff"}
    dropped = core.patch_namespaced_config_map("c", "default", cm({}), field_manager="kubectl",
                                               _content_type=APPLY)
    assert dropped.data == {"a": "1"}              # kubectl let go, skiff still owns it: the field stays

    apply(core, cm({"a": "1", "b": "1"}), "kubectl")
    forced = apply(core, cm({"a": "1", "b": "2"}), "skiff", force=True)
    assert forced.data == {"a": "1", "b": "2"}
    assert owners(forced)["kubectl"] == {"f:data": {"f:a": {}}}   # b moved to skiff
    assert owners(forced)["skiff"] == {"f:data": {"f:a": {}, "f:b": {}}}


def test_keyed_list_items_are_owned_per_item(k8s):
    """Containers (a list keyed by name) are owned item by item: two managers each add a container;
    when one stops applying its container, only that container goes."""
    apps = client.AppsV1Api(k8s)

    def deployment(*names):
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": n, "image": f"{n}:1"} for n in names]}}}}

    def apply_d(body, manager):
        return apps.patch_namespaced_deployment("d", "default", body, field_manager=manager, _content_type=APPLY)

    apply_d(deployment("main"), "skiff")
    both = apply_d(deployment("sidecar"), "mesh")
    assert [c.name for c in both.spec.template.spec.containers] == ["main", "sidecar"]
    mesh = next(e for e in both.metadata.managed_fields if e.manager == "mesh").fields_v1
    assert 'k:{"name":"sidecar"}' in mesh["f:spec"]["f:template"]["f:spec"]["f:containers"]
    gone = apply_d({**deployment(), "spec": {**deployment()["spec"], "template": {
        "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "main", "image": "main:1"}]}}}},
        "skiff")
    assert [c.name for c in gone.spec.template.spec.containers] == ["main", "sidecar"]
    only_main = apply_d({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
                                                                "spec": {"containers": []}}}}, "mesh")
    assert [c.name for c in only_main.spec.template.spec.containers] == ["main"]


def test_update_without_managed_fields_keeps_them(k8s):
    """A PUT that does not send managedFields keeps the stored ones (only an explicit list replaces them)."""
    core = client.CoreV1Api(k8s)
    apply(core, cm({"a": "1"}), "skiff")
    body = cm({"a": "1", "z": "9"})
    updated = core.replace_namespaced_config_map("c", "default", body)
    assert owners(updated)["skiff"] == {"f:data": {"f:a": {}}}
