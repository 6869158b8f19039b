"""kube-apiserver verbs and server-set metadata, through both clients."""
from __future__ import annotations

import re

import pytest

from tests.support.kubesim.fixtures import configmap, deployment, pod

pytestmark = pytest.mark.asyncio


async def test_create_get_list_replace_delete_pod(kube):
    """create → 201 with the object; get/list return it; replace updates it; delete removes it (get → 404)."""
    core = kube.api("CoreV1Api")
    created = await core.create_namespaced_pod("default", pod("web", labels={"app": "web"}))
    assert created.metadata.name == "web" and created.metadata.namespace == "default"
    got = await core.read_namespaced_pod("web", "default")
    assert got.metadata.uid == created.metadata.uid
    listed = await core.list_namespaced_pod("default")
    assert [p.metadata.name for p in listed.items] == ["web"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    got.metadata.labels["tier"] = "front"
    replaced = await core.replace_namespaced_pod("web", "default", got)
    assert replaced.metadata.labels == {"app": "web", "tier": "front"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    await core.delete_namespaced_pod("web", "default")
    status, body = await kube.error(core.read_namespaced_pod("web", "default"))
    assert status == 404 and body["message"] == 'pods "web" not found'


async def test_server_sets_uid_timestamp_resource_version_generation(kube):
    """uid (a UUID), creationTimestamp (RFC 3339), resourceVersion (a global increasing integer, as a
    string) and generation 1 are set by the server on create; client-sent values are ignored."""
    core = kube.api("CoreV1Api")
    body = configmap("a")
    body["metadata"].update(uid="mine", resourceVersion="", generation=7)
    a = await core.create_namespaced_config_map("default", body)
    b = await core.create_namespaced_config_map("default", configmap("b"))
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", a.metadata.uid)
    assert a.metadata.uid != b.metadata.uid
    assert a.metadata.creation_timestamp is not None
    assert a.metadata.generation == 1
    assert int(b.metadata.resource_version) > int(a.metadata.resource_version)


async def test_generate_name(kube):
    """generateName: the server appends 5 random characters of apimachinery's `alphanums` (util/rand/rand.go:
    no vowels, no 0, 1, 3), after cutting the prefix to 58 (apiserver/pkg/storage/names/generate.go)."""
    core = kube.api("CoreV1Api")
    names = {(await core.create_namespaced_pod("default", pod())).metadata.name for _ in range(12)}
    assert len(names) == 12
    assert all(re.fullmatch(r"p-[bcdfghjklmnpqrstvwxz2456789]{5}", n) for n in names), names
    long = configmap("x")
    del long["metadata"]["name"]
    long["metadata"]["generateName"] = "a" * 70 + "-"
    name = (await core.create_namespaced_config_map("default", long)).metadata.name
    assert len(name) == 63 and name.startswith("a" * 58)


async def test_name_required(kube):
    """No name and no generateName → 422 Invalid naming metadata.name."""
    core = kube.api("CoreV1Api")
    body = configmap("x")
    del body["metadata"]["name"]
    status, err = await kube.error(core.create_namespaced_config_map("default", body))
    assert status == 422 and err["reason"] == "Invalid"
    assert "metadata.name: Required value: name or generateName is required" in err["message"]


@pytest.mark.parametrize("kind,name", [("config_map", "Bad_Name"), ("namespace", "a.b"), ("service", "1abc")])
async def test_invalid_names(kube, kind, name):
    """Names must be DNS-1123 subdomains (most kinds), DNS-1123 labels (namespaces) or DNS-1035 labels
    (services) → otherwise 422 Invalid, naming the field and the value."""
    core = kube.api("CoreV1Api")
    if kind == "config_map":
        call = core.create_namespaced_config_map("default", configmap(name))
    elif kind == "namespace":
        call = core.create_namespace({"metadata": {"name": name}})
    else:
        call = core.create_namespaced_service("default", {"metadata": {"name": name},
                                                          "spec": {"ports": [{"port": 80}]}})
    status, err = await kube.error(call)
    assert status == 422 and err["reason"] == "Invalid"
    assert f'metadata.name: Invalid value: "{name}"' in err["message"]


async def test_already_exists(kube):
    """Creating an existing name → 409 AlreadyExists `pods "x" already exists`."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_pod("default", pod("dup"))
    status, err = await kube.error(core.create_namespaced_pod("default", pod("dup")))
    assert (status, err["reason"], err["message"]) == (409, "AlreadyExists", 'pods "dup" already exists')
    assert err["details"] == {"name": "dup", "kind": "pods"}


async def test_stale_resource_version_conflict(kube):
    """PUT with a resourceVersion that is no longer current → 409 Conflict with the real message."""
    core = kube.api("CoreV1Api")
    first = await core.create_namespaced_config_map("default", configmap("c"))
    fresh = await core.read_namespaced_config_map("c", "default")
    fresh.data = {"k": "v2"}
    await core.replace_namespaced_config_map("c", "default", fresh)
    first.data = {"k": "v3"}
    status, err = await kube.error(core.replace_namespaced_config_map("c", "default", first))
    assert status == 409 and err["reason"] == "Conflict"
    assert err["message"] == ('Operation cannot be fulfilled on configmaps "c": the object has been modified; '
                              "please apply your changes to the latest version and try again")
    assert (await core.read_namespaced_config_map("c", "default")).data == {"k": "v2"}


async def test_replace_missing_is_not_found(kube):
    """PUT of an object that does not exist → 404 NotFound."""
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.replace_namespaced_config_map("nope", "default", configmap("nope")))
    assert status == 404 and err["message"] == 'configmaps "nope" not found'


async def test_generation_bumps_on_spec_change_only(kube):
    """generation: 1 on create, +1 when spec changes; metadata-only and status changes leave it."""
    apps = kube.api("AppsV1Api")
    await apps.create_namespaced_deployment("default", deployment("d"))
    d = await apps.patch_namespaced_deployment("d", "default", {"metadata": {"labels": {"x": "y"}}})
    assert d.metadata.generation == 1
    d = await apps.patch_namespaced_deployment("d", "default", {"spec": {"replicas": 4}})
    assert d.metadata.generation == 2
    d = await apps.patch_namespaced_deployment_status("d", "default", {"status": {"replicas": 4}})
    assert d.metadata.generation == 2 and d.status.replicas == 4


async def test_generation_for_kinds_without_spec(kube):
    """For kinds without spec (ConfigMap), any change outside metadata bumps generation."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("g"))
    c = await core.patch_namespaced_config_map("g", "default", {"metadata": {"annotations": {"a": "b"}}})
    assert c.metadata.generation == 1
    c = await core.patch_namespaced_config_map("g", "default", {"data": {"k": "changed"}})
    assert c.metadata.generation == 2


async def test_status_only_through_status_subresource(kube):
    """For kinds with a status subresource, PUT/PATCH on the object ignore status; PUT/PATCH on /status
    change only status (spec and metadata changes there are ignored)."""
    batch = kube.api("BatchV1Api")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "m", "image": "busybox"}]}}}}
    await batch.create_namespaced_job("default", job)
    j = await batch.patch_namespaced_job("j", "default", {"status": {"succeeded": 5}})
    assert not j.status or not j.status.succeeded
    j = await batch.patch_namespaced_job_status("j", "default", {"status": {"succeeded": 1},
                                                                 "spec": {"parallelism": 9},
                                                                 "metadata": {"labels": {"z": "z"}}})
    assert j.status.succeeded == 1
    assert j.spec.parallelism != 9 and not (j.metadata.labels or {}).get("z")
    got = await batch.read_namespaced_job_status("j", "default")
    assert got.status.succeeded == 1


async def test_namespace_mismatch_is_bad_request(kube):
    """metadata.namespace in the body must match the namespace in the URL → 400 BadRequest."""
    core = kube.api("CoreV1Api")
    body = configmap("m")
    body["metadata"]["namespace"] = "kube-system"
    status, err = await kube.error(core.create_namespaced_config_map("default", body))
    assert status == 400 and err["reason"] == "BadRequest"
    assert "does not match the namespace" in err["message"]


async def test_kind_mismatch_is_bad_request(kube):
    """The kind/apiVersion in the body must match the URL's resource → 400 BadRequest."""
    core = kube.api("CoreV1Api")
    body = configmap("m")
    body["kind"] = "Secret"
    status, err = await kube.error(core.create_namespaced_config_map("default", body))
    assert status == 400 and "Secret" in err["message"]


async def test_default_namespaces_and_missing_namespace(kube):
    """default, kube-system and kube-public exist at start; creating in a missing namespace → 404
    `namespaces "x" not found`."""
    core = kube.api("CoreV1Api")
    names = {n.metadata.name for n in (await core.list_namespace()).items}
    assert {"default", "kube-system", "kube-public"} <= names
    status, err = await kube.error(core.create_namespaced_pod("nowhere", pod("p")))
    assert status == 404 and err["message"] == 'namespaces "nowhere" not found'


async def test_namespace_deletion_terminates_and_deletes_contents(kube, apisim):
    """Deleting a namespace sets phase Terminating, deletes its objects, then removes the namespace; new
    objects may not be created in a Terminating namespace (403 Forbidden)."""
    core = kube.api("CoreV1Api")
    await core.create_namespace({"metadata": {"name": "team-a"}})
    await core.create_namespaced_config_map("team-a", configmap("c1"))
    held = configmap("held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await core.create_namespaced_config_map("team-a", held)
    ns = await core.delete_namespace("team-a")
    got = await core.read_namespace("team-a")
    assert got.status.phase == "Terminating" and got.metadata.deletion_timestamp is not None
    assert [c.metadata.name for c in (await core.list_namespaced_config_map("team-a")).items] == ["held"]
    status, err = await kube.error(core.create_namespaced_config_map("team-a", configmap("late")))
    assert status == 403 and "being terminated" in err["message"]
    await core.patch_namespaced_config_map("held", "team-a", {"metadata": {"finalizers": None}})
    status, _ = await kube.error(core.read_namespace("team-a"))
    assert status == 404
    assert ns is not None


async def test_dry_run_stores_nothing(kube):
    """dryRun=All: the request is validated and the would-be object returned, but nothing is stored."""
    core = kube.api("CoreV1Api")
    out = await core.create_namespaced_config_map("default", configmap("dry"), dry_run="All")
    assert out.metadata.name == "dry"
    assert (await core.list_namespaced_config_map("default")).items == []
    await core.create_namespaced_config_map("default", configmap("real"))
    await core.patch_namespaced_config_map("real", "default", {"data": {"k": "dry"}}, dry_run="All")
    assert (await core.read_namespaced_config_map("real", "default")).data == {"k": "v"}
    await core.delete_namespaced_config_map("real", "default", dry_run="All")
    assert (await core.read_namespaced_config_map("real", "default")).metadata.name == "real"


async def test_deletion_with_finalizers(kube):
    """An object with finalizers is not removed by DELETE: it gets deletionTimestamp (and
    deletionGracePeriodSeconds) and stays until its finalizers are removed."""
    core = kube.api("CoreV1Api")
    body = configmap("f")
    body["metadata"]["finalizers"] = ["example.com/a"]
    await core.create_namespaced_config_map("default", body)
    await core.delete_namespaced_config_map("f", "default")
    got = await core.read_namespaced_config_map("f", "default")
    assert got.metadata.deletion_timestamp is not None
    assert got.metadata.deletion_grace_period_seconds == 0
    assert got.metadata.finalizers == ["example.com/a"]
    # a strategic merge of [] into a merge-strategy list keeps it (as the real server): null removes
    await core.patch_namespaced_config_map("f", "default", {"metadata": {"finalizers": None}})
    status, _ = await kube.error(core.read_namespaced_config_map("f", "default"))
    assert status == 404


async def test_grace_period_from_query_or_body(kube):
    """gracePeriodSeconds may come as a query parameter or in DeleteOptions; it is recorded as
    deletionGracePeriodSeconds on an object kept by finalizers."""
    core = kube.api("CoreV1Api")
    for name, kwargs in [("q", {"grace_period_seconds": 7}), ("b", {"body": {"gracePeriodSeconds": 7}})]:
        body = configmap(name)
        body["metadata"]["finalizers"] = ["example.com/hold"]
        await core.create_namespaced_config_map("default", body)
        await core.delete_namespaced_config_map(name, "default", **kwargs)
        got = await core.read_namespaced_config_map(name, "default")
        assert got.metadata.deletion_grace_period_seconds == 7, name


async def test_delete_preconditions(kube):
    """DeleteOptions.preconditions (uid, resourceVersion) that do not match → 409 Conflict, not deleted."""
    core = kube.api("CoreV1Api")
    c = await core.create_namespaced_config_map("default", configmap("pc"))
    status, err = await kube.error(core.delete_namespaced_config_map(
        "pc", "default", body={"preconditions": {"uid": "not-the-uid"}}))
    assert status == 409 and "Precondition failed: UID in precondition: not-the-uid" in err["message"]
    status, err = await kube.error(core.delete_namespaced_config_map(
        "pc", "default", body={"preconditions": {"resourceVersion": "1"}}))
    assert status == 409 and "Precondition failed: ResourceVersion" in err["message"]
    await core.delete_namespaced_config_map("pc", "default", body={"preconditions": {"uid": c.metadata.uid}})
    status, _ = await kube.error(core.read_namespaced_config_map("pc", "default"))
    assert status == 404


async def test_propagation_policies_set_finalizers(kube):
    """propagationPolicy=Foreground adds the foregroundDeletion finalizer and Orphan the orphan finalizer
    (the garbage collector removes them later); the DELETE response shows the object being deleted."""
    core = kube.api("CoreV1Api")
    for name, policy, finalizer in [("fg", "Foreground", "foregroundDeletion"), ("or", "Orphan", "orphan")]:
        await core.create_namespaced_pod("default", pod(name))
        out = await core.delete_namespaced_pod(name, "default", body={"propagationPolicy": policy})
        assert out.metadata.deletion_timestamp is not None
        assert finalizer in out.metadata.finalizers


async def test_job_delete_without_policy_orphans(kube):
    """batch/v1 Jobs default to orphaning their pods: a DELETE with no propagationPolicy adds the orphan
    finalizer (the garbage collector then orphans the pods and removes it); Background does not."""
    batch = kube.api("BatchV1Api")
    for name in ("default-policy", "background"):
        await batch.create_namespaced_job("default", {
            "metadata": {"name": name}, "spec": {"template": {"spec": {
                "restartPolicy": "Never", "containers": [{"name": "m", "image": "busybox"}]}}}})
    await batch.delete_namespaced_job("default-policy", "default")
    kept = await batch.read_namespaced_job("default-policy", "default")
    assert kept.metadata.finalizers == ["orphan"] and kept.metadata.deletion_timestamp is not None
    await batch.delete_namespaced_job("background", "default", propagation_policy="Background")
    status, _ = await kube.error(batch.read_namespaced_job("background", "default"))
    assert status == 404


async def test_delete_collection_with_selector(kube):
    """deletecollection deletes exactly the objects matching the label selector."""
    core = kube.api("CoreV1Api")
    for i, team in enumerate(["a", "a", "b"]):
        await core.create_namespaced_config_map("default", configmap(f"c{i}", labels={"team": team}))
    await core.delete_collection_namespaced_config_map("default", label_selector="team=a")
    left = (await core.list_namespaced_config_map("default")).items
    assert [c.metadata.name for c in left] == ["c2"]


async def test_list_pagination(kube):
    """limit/continue: pages of at most `limit` items, a continue token while more remain, and every
    object exactly once."""
    core = kube.api("CoreV1Api")
    for i in range(7):
        await core.create_namespaced_config_map("default", configmap(f"c{i}"))
    seen, token, pages = [], None, 0
    while True:
        page = await core.list_namespaced_config_map("default", limit=3, _continue=token)
        pages += 1
        assert len(page.items) <= 3
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert pages == 3 and sorted(seen) == [f"c{i}" for i in range(7)]


async def test_pagination_serves_a_consistent_snapshot(kube):
    """Later pages come from the first page's snapshot: objects deleted, created or changed meanwhile do not
    show their changes, and every page reports the first page's resourceVersion."""
    core = kube.api("CoreV1Api")
    for i in range(5):
        await core.create_namespaced_config_map("default", configmap(f"c{i}", {"v": "old"}))
    first = await core.list_namespaced_config_map("default", limit=2)
    await core.delete_namespaced_config_map("c3", "default")
    await core.create_namespaced_config_map("default", configmap("c25"))
    await core.patch_namespaced_config_map("c4", "default", {"data": {"v": "new"}})
    rest = await core.list_namespaced_config_map("default", limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["c2", "c3", "c4"]
    assert rest.items[2].data == {"v": "old"}
    assert rest.metadata.resource_version == first.metadata.resource_version
    now = await core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in now.items] == ["c0", "c1", "c2", "c25", "c4"]


async def test_exact_list_reads_an_older_version(kube):
    """resourceVersionMatch=Exact lists the state at that resourceVersion (within the kept history)."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("a", {"v": "1"}))
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.patch_namespaced_config_map("a", "default", {"data": {"v": "2"}})
    await core.create_namespaced_config_map("default", configmap("b"))
    then = await core.list_namespaced_config_map("default", resource_version=rv, resource_version_match="Exact")
    assert [(c.metadata.name, c.data) for c in then.items] == [("a", {"v": "1"})]
    assert then.metadata.resource_version == rv


async def test_list_all_namespaces_and_cluster_scoped(kube):
    """Namespaced kinds list across namespaces at /api/v1/pods; cluster-scoped kinds have no namespace."""
    core = kube.api("CoreV1Api")
    await core.create_namespace({"metadata": {"name": "other"}})
    await core.create_namespaced_config_map("default", configmap("x"))
    await core.create_namespaced_config_map("other", configmap("x"))
    items = (await core.list_config_map_for_all_namespaces()).items
    assert sorted(c.metadata.namespace for c in items) == ["default", "other"]
    pv = await core.create_persistent_volume({"metadata": {"name": "pv1"}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp"}}})
    assert pv.metadata.namespace is None


async def test_scale_subresource(kube):
    """apps/v1 /scale reads and writes spec.replicas as an autoscaling/v1 Scale."""
    apps = kube.api("AppsV1Api")
    await apps.create_namespaced_deployment("default", deployment("s", replicas=2))
    scale = await apps.read_namespaced_deployment_scale("s", "default")
    assert scale.spec.replicas == 2 and scale.status.selector == "app=s"
    await apps.patch_namespaced_deployment_scale("s", "default", {"spec": {"replicas": 5}})
    assert (await apps.read_namespaced_deployment("s", "default")).spec.replicas == 5


async def test_rbac_and_leases_are_stored(kube):
    """rbac.authorization.k8s.io/v1 and coordination.k8s.io/v1 objects are stored (RBAC names may hold
    colons, as system roles do)."""
    rbac = kube.api("RbacAuthorizationV1Api")
    await rbac.create_cluster_role({"metadata": {"name": "system:skiff:reader"},
                                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    assert (await rbac.read_cluster_role("system:skiff:reader")).rules[0].verbs == ["get"]
    coord = kube.api("CoordinationV1Api")
    await coord.create_namespaced_lease("default", {"metadata": {"name": "leader"},
                                                    "spec": {"holderIdentity": "me"}})
    assert (await coord.read_namespaced_lease("leader", "default")).spec.holder_identity == "me"


@pytest.mark.parametrize("labels,bad", [({"Bad Key": "v"}, "Bad Key"), ({"k": "-bad-"}, "-bad-"),
                                        ({"x" * 64: "v"}, "x" * 64), ({"UPPER.example/k": "v"}, "UPPER.example/k")])
async def test_label_keys_and_values_validated(kube, labels, bad):
    """ObjectMeta validation for every kind: label keys are qualified names (optional DNS prefix), values at
    most 63 alphanumeric/-/_/. characters → otherwise 422 naming metadata.labels and the value."""
    core = kube.api("CoreV1Api")
    status, err = await kube.error(core.create_namespaced_config_map("default", configmap("l", labels=labels)))
    assert status == 422 and f'metadata.labels: Invalid value: "{bad}"' in err["message"]
    await core.create_namespaced_config_map("default", configmap("ok", labels={"example.com/k": "V_1.x"}))
    status, err = await kube.error(core.patch_namespaced_config_map("ok", "default",
                                                                    {"metadata": {"labels": labels}}))
    assert status == 422


async def test_pod_binding_subresource(kube):
    """POST pods/<name>/binding sets spec.nodeName and PodScheduled=True; binding a bound pod → 409."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_pod("default", pod("b"))
    target = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
              "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    # the server answers with a Status, which the clients cannot read as a V1Binding: take it raw
    resp = await core.create_namespaced_pod_binding("b", "default", target, _preload_content=False)
    assert resp.status == 201
    resp.close()
    got = await core.read_namespaced_pod("b", "default")
    assert got.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in got.status.conditions] == [("PodScheduled", "True")]
    status, err = await kube.error(core.create_namespaced_pod_binding("b", "default", target))
    assert status == 409 and 'already assigned to node "node-1"' in err["message"]


async def test_pod_eviction_subresource(kube):
    """POST pods/<name>/eviction deletes the pod (no PodDisruptionBudgets are simulated)."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_pod("default", pod("ev"))
    await core.create_namespaced_pod_eviction("ev", "default", {
        "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "ev", "namespace": "default"}})
    status, _ = await kube.error(core.read_namespaced_pod("ev", "default"))
    assert status == 404


@pytest.mark.parametrize("resources,qos", [
    (None, "BestEffort"),
    ({"requests": {"cpu": "500m"}}, "Burstable"),
    ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}}, "Guaranteed"),
    ({"limits": {"cpu": "2", "memory": "2Gi"}}, "Guaranteed"),
    ({"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}, "Burstable"),
])
async def test_new_pod_status_is_pending_with_qos_class(kube, resources, qos):
    """A new pod's status is set by the server (the client's is ignored): phase Pending and its QoS class."""
    body = pod("q")
    if resources:
        body["spec"]["containers"][0]["resources"] = resources
    body["status"] = {"phase": "Running"}
    created = await kube.api("CoreV1Api").create_namespaced_pod("default", body)
    assert (created.status.phase, created.status.qos_class) == ("Pending", qos)


async def test_create_ignores_status_of_kinds_with_status_subresource(kube):
    """A create cannot set status for kinds with a status subresource (controllers own it); Nodes may."""
    job = {"metadata": {"name": "j"}, "status": {"succeeded": 3},
           "spec": {"template": {"spec": {"restartPolicy": "Never",
                                          "containers": [{"name": "m", "image": "busybox"}]}}}}
    created = await kube.api("BatchV1Api").create_namespaced_job("default", job)
    assert not created.status or not created.status.succeeded
    node = await kube.api("CoreV1Api").create_node({"metadata": {"name": "n1"},
                                                    "status": {"capacity": {"cpu": "4"}}})
    assert node.status.capacity == {"cpu": "4"}


@pytest.mark.parametrize("ctype", ["application/vnd.kubernetes.protobuf", "application/cbor"])
async def test_a_body_in_a_binary_media_type_is_refused_naming_those_accepted(apisim, ctype):
    """apiserver's NegotiateInputSerializerForMediaType: 415 UnsupportedMediaType, "the body of the request was in
    an unknown format - accepted media types include: ..." (kube-apiserver reads protobuf for built-in kinds, and
    CBOR where enabled; kubesim reads neither: it says so instead of failing to decode the bytes as JSON)."""
    import json
    import urllib.error
    import urllib.request

    body = b"k8s\x00\n\x1a\n\x1erbac.authorization.k8s.io/v1\x12\x0bRoleBinding"   # a protobuf envelope's start
    req = urllib.request.Request(apisim.url + "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
                                 data=body, method="POST", headers={"Content-Type": ctype})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=30)
    status = json.loads(err.value.read())
    assert err.value.code == 415 and status["reason"] == "UnsupportedMediaType", status
    assert status["message"] == ("the body of the request was in an unknown format - accepted media types include: "
                                 "application/json, application/yaml"), status
