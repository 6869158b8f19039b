"""Label and field selectors, as kube-apiserver parses and applies them on list (and watch: see
test_api_watch.py)."""
from __future__ import annotations

import pytest

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.selectors import parse_label_selector
from tests.support.kubesim.fixtures import configmap, pod

LABELS = {"a": {"env": "prod", "tier": "web"}, "b": {"env": "dev", "tier": "web"}, "c": {"env": "qa"}, "d": {}}


@pytest.mark.parametrize("selector,expected", [
    ("env=prod", ["a"]),
    ("env==prod", ["a"]),
    ("env!=prod", ["b", "c", "d"]),
    ("env in (prod,dev)", ["a", "b"]),
    ("env notin (prod)", ["b", "c", "d"]),
    ("tier", ["a", "b"]),
    ("!tier", ["c", "d"]),
    ("tier=web,env!=dev", ["a"]),
    ("env in (qa, dev),!tier", ["c"]),
    ("", ["a", "b", "c", "d"]),
])
async def test_label_selector_forms(kube, selector, expected):
    """Every label selector form: =, ==, !=, in, notin, exists, !exists; comma is AND."""
    core = kube.api("CoreV1Api")
    for name, labels in LABELS.items():
        await core.create_namespaced_config_map("default", configmap(name, labels=labels or None))
    items = (await core.list_namespaced_config_map("default", label_selector=selector)).items
    assert [c.metadata.name for c in items] == expected


@pytest.mark.parametrize("selector", ["env in (a", "env=(", "=x", "env in ()", "a b", "bad key!=x"])
async def test_label_selector_parse_errors_are_400(kube, selector):
    """An unparsable label selector → 400 BadRequest."""
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.list_namespaced_config_map("default", label_selector=selector))
    assert status == 400 and err["reason"] == "BadRequest"


def test_parse_label_selector_requirements():
    """The parser keeps operator and values of each requirement."""
    sel = parse_label_selector("a in (y, x),b!=c,!d,e")
    assert [(r.key, r.op, r.values) for r in sel.requirements] == [
        ("a", "in", ("x", "y")), ("b", "!=", ("c",)), ("d", "!", ()), ("e", "exists", ())]
    with pytest.raises(ApiError) as e:
        parse_label_selector("a in (x")
    assert e.value.code == 400


async def test_pod_field_selectors(kube):
    """pods support spec.nodeName, status.phase, spec.restartPolicy, spec.schedulerName,
    spec.serviceAccountName, status.podIP with =, == and !=; a missing field compares as ''."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_pod("default", pod("on-n1", nodeName="n1", restartPolicy="Never"))
    await core.create_namespaced_pod("default", pod("unbound", serviceAccountName="robot"))

    async def select(fs):
        return [p.metadata.name for p in (await core.list_namespaced_pod("default", field_selector=fs)).items]
    assert await select("spec.nodeName=n1") == ["on-n1"]
    assert await select("spec.nodeName==") == ["unbound"]
    assert await select("spec.nodeName!=n1") == ["unbound"]
    assert await select("spec.restartPolicy=Never,metadata.name=on-n1") == ["on-n1"]
    assert await select("spec.serviceAccountName=robot") == ["unbound"]
    assert await select("metadata.namespace=default,status.podIP=") == ["on-n1", "unbound"]
    assert await select("spec.schedulerName=other") == []
    assert await select("status.phase!=Running") == ["on-n1", "unbound"]


async def test_other_kinds_field_selectors(kube):
    """secrets: type; events: involvedObject.*, reason, type, source; namespaces: status.phase;
    nodes: spec.unschedulable; jobs: status.successful."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_secret("default", {"metadata": {"name": "s1"}, "type": "Opaque"})
    await core.create_namespaced_secret("default", {"metadata": {"name": "s2"}, "type": "kubernetes.io/tls",
                                                    "data": {"tls.crt": "", "tls.key": ""}})
    items = (await core.list_namespaced_secret("default", field_selector="type=kubernetes.io/tls")).items
    assert [s.metadata.name for s in items] == ["s2"]
    await core.create_namespaced_event("default", {
        "metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"},
        "reason": "Scheduled", "type": "Normal", "source": {"component": "default-scheduler"}})
    await core.create_namespaced_event("default", {
        "metadata": {"name": "e2"}, "involvedObject": {"kind": "Pod", "name": "p2", "namespace": "default"},
        "reason": "Failed", "type": "Warning", "source": {"component": "kubelet"}})
    for fs, expected in [("involvedObject.name=p1", ["e1"]), ("reason=Failed,type=Warning", ["e2"]),
                         ("source=kubelet", ["e2"]), ("involvedObject.kind=Pod", ["e1", "e2"])]:
        items = (await core.list_namespaced_event("default", field_selector=fs)).items
        assert [e.metadata.name for e in items] == expected, fs
    phases = (await core.list_namespace(field_selector="status.phase=Active")).items
    assert "default" in [n.metadata.name for n in phases]
    await core.create_node({"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True}})
    nodes = (await core.list_node(field_selector="spec.unschedulable=true")).items
    assert [n.metadata.name for n in nodes] == ["cordoned"]
    batch = kube.api("BatchV1Api")
    jobs = (await batch.list_namespaced_job("default", field_selector="status.successful=0")).items
    assert jobs == []


async def test_unsupported_field_selector_is_400(kube):
    """A field the server does not index → 400 `field label not supported: x`."""
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.list_namespaced_pod("default", field_selector="spec.hostname=x"))
    assert status == 400 and err["message"] == "field label not supported: spec.hostname"
    status, err = await kube.error(core.list_namespaced_config_map("default", field_selector="data.k=v"))
    assert status == 400 and err["message"] == "field label not supported: data.k"
