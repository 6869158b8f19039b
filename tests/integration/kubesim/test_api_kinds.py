"""Every built-in kind kubesim serves is stored and read back with its fields, as on kube-apiserver; plus
the pytest fixtures other test suites use."""
from __future__ import annotations

import pytest

from tests.support.kubesim.fixtures import pod

TEMPLATE = {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}
JOB_TEMPLATE = {"metadata": {"labels": {"app": "x"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}

# (api class, create method, read method, namespaced, body, (field path, expected))
KINDS = [
    ("CoreV1Api", "service_account", True, {"metadata": {"name": "k"}}, ("metadata.name", "k")),
    ("CoreV1Api", "endpoints", True, {"metadata": {"name": "k"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]}, ("subsets.0.addresses.0.ip", "10.0.0.1")),
    ("CoreV1Api", "limit_range", True, {"metadata": {"name": "k"}, "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "1"}}]}}, ("spec.limits.0.type", "Container")),
    ("CoreV1Api", "resource_quota", True, {"metadata": {"name": "k"}, "spec": {"hard": {"pods": "3"}}},
     ("spec.hard.pods", "3")),
    ("CoreV1Api", "persistent_volume_claim", True, {"metadata": {"name": "k"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
     ("spec.access_modes.0", "ReadWriteOnce")),
    ("CoreV1Api", "secret", True, {"metadata": {"name": "k"}, "stringData": {"a": "b"}}, ("metadata.name", "k")),
    ("CoreV1Api", "node", False, {"metadata": {"name": "k", "labels": {"gpu": "true"}}},
     ("metadata.labels.gpu", "true")),
    ("AppsV1Api", "stateful_set", True, {"metadata": {"name": "k"}, "spec": {
        "serviceName": "k", "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}},
     ("spec.service_name", "k")),
    ("AppsV1Api", "daemon_set", True, {"metadata": {"name": "k"}, "spec": {
        "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}}, ("spec.selector.match_labels.app", "x")),
    ("AppsV1Api", "replica_set", True, {"metadata": {"name": "k"}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}}, ("spec.replicas", 0)),
    ("BatchV1Api", "cron_job", True, {"metadata": {"name": "k"}, "spec": {
        "schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}},
     ("spec.schedule", "*/5 * * * *")),
    ("AutoscalingV2Api", "horizontal_pod_autoscaler", True, {"metadata": {"name": "k"}, "spec": {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxReplicas": 4}},
     ("spec.max_replicas", 4)),
    ("EventsV1Api", "event", True, {"metadata": {"name": "k"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                                    "reason": "Tested", "action": "Test", "reportingController": "skiff",
                                    "reportingInstance": "skiff-1", "type": "Normal",
                                    "regarding": {"kind": "Pod", "name": "p", "namespace": "default"}},
     ("reason", "Tested")),
    ("RbacAuthorizationV1Api", "role", True, {"metadata": {"name": "k"}, "rules": []}, ("metadata.name", "k")),
    ("RbacAuthorizationV1Api", "role_binding", True, {"metadata": {"name": "k"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "k"}}, ("role_ref.name", "k")),
    ("RbacAuthorizationV1Api", "cluster_role_binding", False, {"metadata": {"name": "k"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "k"}}, ("role_ref.kind",
                                                                                      "ClusterRole")),
]


def field(obj, path: str):
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() else (obj.get(part) if isinstance(obj, dict) else getattr(obj, part))
    return obj


@pytest.mark.parametrize("api,kind,namespaced,body,check", KINDS, ids=[k[1] for k in KINDS])
async def test_builtin_kind_create_read_list_delete(kube, api, kind, namespaced, body, check):
    """Each built-in kind: create, read (fields round-trip), list, delete."""
    client = kube.api(api)
    if namespaced:
        created = await getattr(client, f"create_namespaced_{kind}")("default", body)
        got = await getattr(client, f"read_namespaced_{kind}")("k", "default")
        listed = await getattr(client, f"list_namespaced_{kind}")("default")
    else:
        created = await getattr(client, f"create_{kind}")(body)
        got = await getattr(client, f"read_{kind}")("k")
        listed = await getattr(client, f"list_{kind}")()
    assert got.metadata.uid == created.metadata.uid
    assert field(got, check[0]) == check[1]
    assert "k" in [i.metadata.name for i in listed.items]
    if namespaced:
        await getattr(client, f"delete_namespaced_{kind}")("k", "default")
        status, _ = await kube.error(getattr(client, f"read_namespaced_{kind}")("k", "default"))
    else:
        await getattr(client, f"delete_{kind}")("k")
        status, _ = await kube.error(getattr(client, f"read_{kind}")("k"))
    assert status == 404


async def test_system_namespaces_cannot_be_deleted(kube):
    """default, kube-system and kube-public may not be deleted → 403 Forbidden."""
    core = kube.api("CoreV1Api")
    for name in ("default", "kube-system", "kube-public"):
        status, err = await kube.error(core.delete_namespace(name))
        assert status == 403 and err["message"] == f'namespaces "{name}" is forbidden: this namespace may not be deleted'


def test_k8s_fixture(k8s, kubesim):
    """`k8s` is a kubernetes ApiClient on the per-test-reset `kubesim` server."""
    import kubernetes
    core = kubernetes.client.CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("fixture-pod"))
    assert core.read_namespaced_pod("fixture-pod", "default").metadata.name == "fixture-pod"
    assert k8s.configuration.host == kubesim.url


async def test_k8s_async_fixture_sees_a_fresh_cluster(k8s_async):
    """`k8s_async` is a kubernetes_asyncio ApiClient; the reset left no pod from the previous test."""
    import kubernetes_asyncio
    core = kubernetes_asyncio.client.CoreV1Api(k8s_async)
    assert [p.metadata.name for p in (await core.list_namespaced_pod("default")).items] == []
