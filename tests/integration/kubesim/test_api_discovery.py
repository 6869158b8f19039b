"""Discovery and the non-resource endpoints, as kube-apiserver serves them."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, json.loads(resp.read())


async def test_version(kube):
    """/version reports the server's gitVersion."""
    v = await kube.api("VersionApi").get_code()
    assert v.git_version == "v1.31.0-kubesim" and (v.major, v.minor) == ("1", "31")


async def test_core_discovery(kube):
    """/api lists v1; /api/v1 is an APIResourceList with verbs, namespaced, kind, shortNames and
    subresources as `pods/status`, `pods/log`."""
    core = kube.api("CoreApi")
    assert (await core.get_api_versions()).versions == ["v1"]
    resources = {r.name: r for r in (await kube.api("CoreV1Api").get_api_resources()).resources}
    assert {"pods", "pods/status", "pods/log", "namespaces", "nodes", "events", "configmaps", "secrets",
            "services", "persistentvolumeclaims", "persistentvolumes", "resourcequotas", "limitranges",
            "serviceaccounts", "endpoints"} <= set(resources)
    pods = resources["pods"]
    assert pods.namespaced and pods.kind == "Pod" and "po" in pods.short_names
    assert set(pods.verbs) == {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    assert not resources["nodes"].namespaced and not resources["namespaces"].namespaced


async def test_group_discovery(kube):
    """/apis lists every group with its versions and preferred version; /apis/<g>/<v> lists resources,
    apps/v1 deployments with status and scale subresources."""
    groups = {g.name: g for g in (await kube.api("ApisApi").get_api_versions()).groups}
    for name, version in [("apps", "v1"), ("batch", "v1"), ("autoscaling", "v2"), ("events.k8s.io", "v1"),
                          ("rbac.authorization.k8s.io", "v1"), ("coordination.k8s.io", "v1"),
                          ("apiextensions.k8s.io", "v1")]:
        assert groups[name].preferred_version.version == version
    apps = {r.name: r for r in (await kube.api("AppsV1Api").get_api_resources()).resources}
    assert {"deployments", "deployments/status", "deployments/scale", "replicasets", "statefulsets",
            "daemonsets"} <= set(apps)
    assert apps["deployments/scale"].kind == "Scale" and apps["deployments/scale"].group == "autoscaling"
    batch = {r.name for r in (await kube.api("BatchV1Api").get_api_resources()).resources}
    assert {"jobs", "jobs/status", "cronjobs"} <= batch


@pytest.mark.parametrize("group, resources", [
    ("authorization.k8s.io", {"localsubjectaccessreviews": True, "selfsubjectaccessreviews": False,
                              "selfsubjectrulesreviews": False, "subjectaccessreviews": False}),
    ("authentication.k8s.io", {"selfsubjectreviews": False, "tokenreviews": False})])
def test_review_groups_are_discovered(apisim, group, resources):
    """The review kinds (access_review.py) are in /apis, /apis/<g> and /apis/<g>/v1 as the real server lists
    them (pkg/registry/authorization/rest/storage_authorization.go, pkg/registry/authentication/rest/
    storage_authentication.go): create-only, only LocalSubjectAccessReview namespaced. Nothing to GET."""
    groups = {g["name"]: g for g in get_json(apisim.url + "/apis")[1]["groups"]}
    assert groups[group]["preferredVersion"]["groupVersion"] == f"{group}/v1"
    assert get_json(apisim.url + f"/apis/{group}")[1]["versions"] == [{"groupVersion": f"{group}/v1",
                                                                       "version": "v1"}]
    listed = get_json(apisim.url + f"/apis/{group}/v1")[1]["resources"]
    assert {r["name"]: r["namespaced"] for r in listed} == resources
    assert all(r["verbs"] == ["create"] for r in listed)
    assert {r["singularName"] for r in listed} == {n[:-1] for n in resources}
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(apisim.url + f"/apis/{group}/v1/{next(iter(resources))}", timeout=10)
    assert e.value.code == 405


def test_dynamic_client_uses_discovery(apisim):
    """The `kubernetes` DynamicClient discovers resources from /api and /apis and then does CRUD."""
    from kubernetes import dynamic
    dc = dynamic.DynamicClient(apisim.api_client())
    jobs = dc.resources.get(api_version="batch/v1", kind="Job")
    assert jobs.namespaced and jobs.name == "jobs"
    cms = dc.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dyn"}, "data": {"a": "1"}},
               namespace="default")
    assert cms.get(name="dyn", namespace="default").data.a == "1"
    assert [i.metadata.name for i in cms.get(namespace="default").items] == ["dyn"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
def test_health_endpoints(apisim, path):
    """/healthz, /readyz and /livez answer 200 `ok`."""
    with urllib.request.urlopen(apisim.url + path, timeout=10) as resp:
        assert resp.status == 200 and resp.read() == b"ok"


def test_unknown_paths_are_404_status(apisim):
    """An unknown group, resource or path → 404 with a Status body."""
    for path in ["/apis/nope.example.com/v1", "/api/v1/widgets", "/apis/apps/v1/namespaces/default/pods"]:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(apisim.url + path, timeout=10)
        body = json.loads(e.value.read())
        assert e.value.code == 404 and body["kind"] == "Status" and body["reason"] == "NotFound", path


async def test_method_not_allowed(kube):
    """POST to an all-namespaces collection of a namespaced kind → 405 MethodNotAllowed."""
    req = urllib.request.Request(f"{kube.sync_client.configuration.host}/api/v1/pods", method="POST",
                                 data=b"{}", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405 and json.loads(e.value.read())["reason"] == "MethodNotAllowed"
