"""PATCH: strategic merge, JSON merge, JSON patch and server-side apply, as kube-apiserver applies them."""
from __future__ import annotations

import pytest

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.registry import patch as p
from tests.support.kubesim.fixtures import configmap, deployment

STRATEGIC, MERGE, JSON_PATCH, APPLY = p.STRATEGIC, p.MERGE, p.JSON_PATCH, p.APPLY


def container(name, **kw):
    return {"name": name, "image": "busybox", **kw}


# ---- pure functions ---------------------------------------------------------------------------------

def test_strategic_merge_merges_lists_by_patch_merge_key():
    """containers merge by name, env by name, ports by containerPort, volumeMounts by mountPath;
    unnamed lists (args) are replaced."""
    live = {"spec": {"containers": [
        container("a", env=[{"name": "X", "value": "1"}], ports=[{"containerPort": 80}],
                  volumeMounts=[{"name": "v", "mountPath": "/a"}], args=["1", "2"]),
        container("b")]}}
    out = p.strategic_merge(live, {"spec": {"containers": [
        {"name": "a", "env": [{"name": "Y", "value": "2"}], "ports": [{"containerPort": 81}],
         "volumeMounts": [{"name": "w", "mountPath": "/a"}], "args": ["3"]},
        {"name": "c", "image": "x"}]}})
    a, b, c = out["spec"]["containers"]
    assert a["env"] == [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]
    assert a["ports"] == [{"containerPort": 80}, {"containerPort": 81}]
    assert a["volumeMounts"] == [{"name": "w", "mountPath": "/a"}]
    assert a["args"] == ["3"] and a["image"] == "busybox"
    assert b == container("b") and c == {"name": "c", "image": "x"}
    assert live["spec"]["containers"][0]["args"] == ["1", "2"]   # input not mutated


def test_strategic_merge_directives():
    """`$patch: delete` removes a keyed list item, `$patch: replace` replaces a list or a map,
    `$deleteFromPrimitiveList` removes scalars, null deletes a key."""
    live = {"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1", "y": "2"}},
            "spec": {"containers": [container("a"), container("b")], "nodeSelector": {"k": "v"}}}
    out = p.strategic_merge(live, {
        "metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "labels": {"y": None}},
        "spec": {"containers": [{"name": "a", "$patch": "delete"}],
                 "nodeSelector": {"$patch": "replace", "z": "w"}}})
    assert out["metadata"] == {"finalizers": ["b"], "labels": {"x": "1"}}
    assert out["spec"]["containers"] == [container("b")]
    assert out["spec"]["nodeSelector"] == {"z": "w"}
    out = p.strategic_merge(live, {"spec": {"containers": [container("z"), {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [container("z")]


def test_strategic_merge_primitive_set_and_atomic_tolerations():
    """finalizers (patchStrategy merge) merge as a set; tolerations have no patch strategy in the Go
    types, so a patch replaces them whole."""
    live = {"metadata": {"finalizers": ["a"]},
            "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}]}}
    out = p.strategic_merge(live, {"metadata": {"finalizers": ["a", "b"]},
                                   "spec": {"tolerations": [{"key": "x", "operator": "Exists"}]}})
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["spec"]["tolerations"] == [{"key": "x", "operator": "Exists"}]


def test_json_merge_patch_rfc7386():
    """Maps merge, null deletes, lists and scalars replace."""
    out = p.json_merge({"a": {"b": 1, "c": 2}, "l": [1, 2]}, {"a": {"b": None, "d": 3}, "l": [3]})
    assert out == {"a": {"c": 2, "d": 3}, "l": [3]}


def test_json_patch_rfc6902_operations():
    """add (incl. `-` append), remove, replace, move, copy, test; ~0/~1 escapes."""
    doc = {"metadata": {"labels": {"a/b": "1"}}, "l": [1, 2]}
    out = p.json_patch(doc, [
        {"op": "add", "path": "/l/-", "value": 3},
        {"op": "add", "path": "/l/0", "value": 0},
        {"op": "replace", "path": "/metadata/labels/a~1b", "value": "2"},
        {"op": "copy", "from": "/l", "path": "/m"},
        {"op": "move", "from": "/m", "path": "/n"},
        {"op": "remove", "path": "/l/1"},
        {"op": "test", "path": "/n", "value": [0, 1, 2, 3]},
    ])
    assert out == {"metadata": {"labels": {"a/b": "2"}}, "l": [0, 2, 3], "n": [0, 1, 2, 3]}
    assert doc["l"] == [1, 2]


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/a", "value": 2}],
    [{"op": "remove", "path": "/missing"}],
    [{"op": "replace", "path": "/missing", "value": 1}],
])
def test_json_patch_failures_are_422(ops):
    """A failing test op or a missing path → 422 and nothing applied."""
    with pytest.raises(ApiError) as e:
        p.json_patch({"a": 1}, ops)
    assert e.value.code == 422


def test_json_patch_negative_indices_count_from_the_end():
    """kube-apiserver applies JSON patches with gopkg.in/evanphx/json-patch.v4, whose `SupportNegativeIndices` is
    on by default (patch.go `partialArray.get/set/add/remove`): -1 is the last element for get, test, replace and
    remove, and for add (an array one longer) the end; below -len is an invalid index (422), as is an index that
    Go's strconv.Atoi does not read."""
    doc = {"l": [0, 1, 2]}
    assert p.json_patch(doc, [{"op": "add", "path": "/l/-1", "value": 9}]) == {"l": [0, 1, 2, 9]}
    assert p.json_patch(doc, [{"op": "add", "path": "/l/-4", "value": 9}]) == {"l": [9, 0, 1, 2]}
    assert p.json_patch(doc, [{"op": "remove", "path": "/l/-1"}]) == {"l": [0, 1]}
    assert p.json_patch(doc, [{"op": "replace", "path": "/l/-3", "value": 7}]) == {"l": [7, 1, 2]}
    assert p.json_patch(doc, [{"op": "test", "path": "/l/-2", "value": 1}]) == doc
    assert p.json_patch({"l": [{"a": 1}]}, [{"op": "add", "path": "/l/-1/b", "value": 2}]) == {"l": [{"a": 1, "b": 2}]}
    for op in ({"op": "add", "path": "/l/-5", "value": 9}, {"op": "add", "path": "/l/4", "value": 9},
               {"op": "remove", "path": "/l/-4"}, {"op": "remove", "path": "/l/3"},
               {"op": "replace", "path": "/l/-4", "value": 9}, {"op": "test", "path": "/l/-4", "value": 0},
               {"op": "remove", "path": "/l/1_0"}, {"op": "remove", "path": "/l/ 1"}):
        with pytest.raises(ApiError) as e:
            p.json_patch(doc, [op])
        assert e.value.code == 422, op
    assert doc == {"l": [0, 1, 2]}


# ---- through the clients ----------------------------------------------------------------------------

async def test_strategic_merge_patch_via_client(kube):
    """The clients send a dict body to patch_* as strategic merge patch: containers merge by name."""
    apps = kube.api("AppsV1Api")
    await apps.create_namespaced_deployment("default", deployment("d"))
    d = await apps.patch_namespaced_deployment("d", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "envoy"},
        {"name": "main", "env": [{"name": "A", "value": "1"}]}]}}}})
    cs = d.spec.template.spec.containers
    assert [c.name for c in cs] == ["main", "sidecar"]
    assert cs[0].image == "busybox:1.36" and cs[0].env[0].name == "A"
    assert d.metadata.generation == 2


async def test_json_patch_via_client(kube):
    """A list body is sent as application/json-patch+json."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("j", {"a": "1"}))
    c = await core.patch_namespaced_config_map("j", "default", [
        {"op": "add", "path": "/data/b", "value": "2"}, {"op": "remove", "path": "/data/a"}])
    assert c.data == {"b": "2"}
    status, err = await kube.error(core.patch_namespaced_config_map(
        "j", "default", [{"op": "test", "path": "/data/b", "value": "nope"}]))
    assert status == 422
    assert (await core.read_namespaced_config_map("j", "default")).data == {"b": "2"}


async def test_merge_patch_and_apply_via_content_type(kube):
    """application/merge-patch+json replaces lists; application/apply-patch+yaml (server-side apply,
    fieldManager required) creates the object if missing and otherwise merges into it, removing the fields the
    same manager applied before and no longer applies (field ownership, see test_api_apply.py)."""
    apps = kube.api("AppsV1Api")
    await apps.create_namespaced_deployment("default", deployment("m"))
    patch_body = {"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}}}
    d = await apps.patch_namespaced_deployment("m", "default", patch_body, _content_type=MERGE)
    assert [c.name for c in d.spec.template.spec.containers] == ["only"]

    core = kube.api("CoreV1Api")
    applied = configmap("ssa", {"a": "1"})
    status, err = await kube.error(core.patch_namespaced_config_map("ssa", "default", applied,
                                                                    _content_type=APPLY))
    c1 = await core.patch_namespaced_config_map("ssa", "default", applied, field_manager="skiff",
                                                _content_type=APPLY)
    c2 = await core.patch_namespaced_config_map("ssa", "default", configmap("ssa", {"b": "2"}),
                                                field_manager="skiff", _content_type=APPLY)
    assert status == 400 and "fieldManager" in err["message"]
    assert c1.data == {"a": "1"} and c2.data == {"b": "2"}
    assert c2.metadata.uid == c1.metadata.uid


async def test_patch_missing_object_is_404(kube):
    """PATCH of an object that does not exist → 404 (only apply creates)."""
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.patch_namespaced_config_map("ghost", "default", {"data": {}}))
    assert status == 404 and err["message"] == 'configmaps "ghost" not found'


async def test_patch_with_stale_resource_version_conflicts(kube):
    """A patch carrying metadata.resourceVersion is a precondition: stale → 409 Conflict."""
    core = kube.api("CoreV1Api")
    c = await core.create_namespaced_config_map("default", configmap("rv"))
    await core.patch_namespaced_config_map("rv", "default", {"data": {"k": "2"}})
    status, err = await kube.error(core.patch_namespaced_config_map(
        "rv", "default", {"metadata": {"resourceVersion": c.metadata.resource_version}, "data": {"k": "3"}}))
    assert status == 409 and err["reason"] == "Conflict"
