"""Extension points of the store (how cluster.py plugs in validation and quota): admission plugins run on
every write before anything is stored, as kube-apiserver's admission chain; subscribers see every commit."""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from tests.support.kubesim.fixtures import configmap


async def test_admission_may_mutate_the_object(kube, apisim):
    """A mutating admission plugin's changes are what gets stored (and returned)."""
    def add_label(req):
        if req.operation == "CREATE":
            req.obj["metadata"].setdefault("labels", {})["admitted"] = "yes"
    apisim.store.admission.append(add_label)
    out = await kube.api("CoreV1Api").create_namespaced_config_map("default", configmap("m"))
    assert out.metadata.labels == {"admitted": "yes"}


async def test_admission_refusal_stores_nothing(kube, apisim):
    """An admission plugin's ApiError (e.g. quota's 403 Forbidden) is the client's answer; nothing is written."""
    seen = []

    def refuse(req):
        seen.append((req.operation, req.rt.plural, req.namespace, req.dry_run))
        if req.operation == "CREATE":
            raise ApiError(403, 'configmaps "q" is forbidden: exceeded quota: q, requested: count/configmaps=1',
                           "Forbidden")
    apisim.store.admission.append(refuse)
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.create_namespaced_config_map("default", configmap("q")))
    assert status == 403 and err["reason"] == "Forbidden" and "exceeded quota" in err["message"]
    assert (await core.list_namespaced_config_map("default")).items == []
    assert seen == [("CREATE", "configmaps", "default", False)]


async def test_admission_bug_is_a_500_status(kube, apisim):
    """An unexpected exception inside kubesim answers 500 InternalError with a Status body (not a hang)."""
    def broken(req):
        raise RuntimeError("plugin bug")
    apisim.store.admission.append(broken)
    status, err = await kube.error(kube.api("CoreV1Api").create_namespaced_config_map("default", configmap("b")))
    assert status == 500 and err["reason"] == "InternalError" and "plugin bug" in err["message"]


async def test_admission_sees_updates_deletes_and_dry_run(kube, apisim):
    """UPDATE carries the old object and the subresource; DELETE has no new object; dryRun is flagged."""
    seen = []
    apisim.store.admission.append(lambda req: seen.append(
        (req.operation, req.subresource, req.dry_run, req.obj is None, (req.old or {}).get("data"))))
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("u", {"a": "1"}), dry_run="All")
    await core.create_namespaced_config_map("default", configmap("u", {"a": "1"}))
    await core.patch_namespaced_config_map("u", "default", {"data": {"a": "2"}})
    await core.delete_namespaced_config_map("u", "default")
    assert seen == [("CREATE", None, True, False, None), ("CREATE", None, False, False, None),
                    ("UPDATE", None, False, False, {"a": "1"}), ("DELETE", None, False, True, {"a": "2"})]


async def test_subscribers_see_every_commit(kube, apisim):
    """subscribe(fn): fn(event_type, rt, obj, old) after each committed change; old is the previous state on
    MODIFIED and the removed object's last state on DELETED."""
    seen = []
    apisim.store.subscribe(lambda t, rt, obj, old: seen.append(
        (t, rt.plural, obj["metadata"]["name"], (old or {}).get("data"))))
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("s", {"a": "1"}))
    await core.patch_namespaced_config_map("s", "default", {"data": {"a": "2"}})
    await core.delete_namespaced_config_map("s", "default")
    assert seen == [("ADDED", "configmaps", "s", None), ("MODIFIED", "configmaps", "s", {"a": "1"}),
                    ("DELETED", "configmaps", "s", {"a": "2"})]
