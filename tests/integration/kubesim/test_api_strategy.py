"""What kube-apiserver does to Secrets and Services on every write, through both clients."""
from __future__ import annotations

import base64

import pytest

pytestmark = pytest.mark.asyncio


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(name: str, **fields) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **fields}


def service(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}


async def test_secret_string_data_is_merged_into_data_and_never_returned(kube):
    """The real server converts `stringData` into base64 `data` entries on create (a `stringData` key wins
    over the same `data` key); create, read, list and the stored object carry `data` only."""
    core = kube.api("CoreV1Api")
    created = await core.create_namespaced_secret("default", secret(
        "db", data={"user": b64("old"), "host": b64("db.local")}, stringData={"user": "admin", "password": "s3cr3t"}))
    want = {"user": b64("admin"), "password": b64("s3cr3t"), "host": b64("db.local")}
    assert created.data == want and created.string_data is None
    got = await core.read_namespaced_secret("db", "default")
    assert got.data == want and got.string_data is None
    listed = await core.list_namespaced_secret("default")
    assert [(s.data, s.string_data) for s in listed.items] == [(want, None)]
    stored = kube.sim.store.get(kube.sim.store.registry.lookup("", "v1", "secrets"), "default", "db")
    assert "stringData" not in stored and stored["data"] == want


async def test_secret_type_defaults_to_opaque(kube):
    """A Secret created without `type` is `Opaque`; a given type is kept."""
    core = kube.api("CoreV1Api")
    assert (await core.create_namespaced_secret("default", secret("a", stringData={"k": "v"}))).type == "Opaque"
    tls = await core.create_namespaced_secret("default", secret(
        "b", type="kubernetes.io/basic-auth", stringData={"username": "u", "password": "p"}))
    assert tls.type == "kubernetes.io/basic-auth"


async def test_secret_string_data_on_replace_and_patch(kube):
    """`stringData` in a PUT or in a patch is folded into `data` the same way; other keys stay."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_secret("default", secret("s", stringData={"a": "1"}))
    current = await core.read_namespaced_secret("s", "default")
    body = secret("s", data=current.data, stringData={"b": "2"})
    body["metadata"]["resourceVersion"] = current.metadata.resource_version
    replaced = await core.replace_namespaced_secret("s", "default", body)
    assert replaced.data == {"a": b64("1"), "b": b64("2")} and replaced.string_data is None
    patched = await core.patch_namespaced_secret("s", "default", {"stringData": {"a": "new", "c": "3"}})
    assert patched.data == {"a": b64("new"), "b": b64("2"), "c": b64("3")} and patched.string_data is None
    assert patched.type == "Opaque"


async def test_secret_data_must_be_base64(kube):
    """A `data` value that is not base64 → 400 BadRequest naming the key; nothing is created."""
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.create_namespaced_secret("default", secret("bad", data={"k": "not base64!"})))
    assert status == 400 and "data[k]" in err["message"] and "Secret" in err["message"]
    status, _ = await kube.error(core.read_namespaced_secret("bad", "default"))
    assert status == 404


async def test_created_service_has_empty_load_balancer_status(kube):
    """A new Service is returned with `status: {loadBalancer: {}}` (a client-sent status is dropped), and
    keeps it through a replace."""
    core = kube.api("CoreV1Api")
    body = service("web")
    body["status"] = {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}
    created = await core.create_namespaced_service("default", body)
    assert created.status.load_balancer is not None and created.status.load_balancer.ingress is None
    rt = kube.sim.store.registry.lookup("", "v1", "services")
    assert kube.sim.store.get(rt, "default", "web")["status"] == {"loadBalancer": {}}
    created.metadata.labels = {"tier": "front"}
    replaced = await core.replace_namespaced_service("web", "default", created)
    assert kube.sim.store.get(rt, "default", "web")["status"] == {"loadBalancer": {}}
    assert replaced.metadata.labels == {"tier": "front"}
