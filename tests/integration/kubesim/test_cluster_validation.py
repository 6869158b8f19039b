"""kubesim's admission: defaulting and validation as kube-apiserver does them, through the `kubernetes` client."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

import kubernetes
import pytest
import yaml
from kubernetes.client import ApiextensionsV1Api, AppsV1Api, BatchV1Api, CoreV1Api, CustomObjectsApi

REPO = Path(__file__).resolve().parents[3]


def error_of(call, *args, **kwargs) -> tuple[int, dict]:
    with pytest.raises(kubernetes.client.exceptions.ApiException) as info:
        call(*args, **kwargs)
    return info.value.status, json.loads(info.value.body)


def pod(name="p", containers=None, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": containers or [{"name": "c", "image": "busybox:1.36"}], **spec}}


def job(name="j", containers=None, restart="Never", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": restart,
                                           "containers": containers or [{"name": "c", "image": "busybox"}]}},
                     **spec}}


def test_missing_image_is_invalid_naming_the_field(k8s):
    """The real server: `Job.batch "x" is invalid: spec.template.spec.containers[0].image: Required value`."""
    status, body = error_of(BatchV1Api(k8s).create_namespaced_job, "default",
                            job("x", containers=[{"name": "c"}]))
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == 'Job.batch "x" is invalid: spec.template.spec.containers[0].image: Required value'
    assert body["details"]["causes"] == [{"reason": "FieldValueRequired", "message": "Required value",
                                          "field": "spec.template.spec.containers[0].image"}]
    assert BatchV1Api(k8s).list_namespaced_job("default").items == []   # nothing written


def test_schema_type_error_names_field_and_value(k8s):
    """The OpenAPI schema (1.31) is enforced: a string containerPort is refused naming the path."""
    bad = pod(containers=[{"name": "c", "image": "busybox", "ports": [{"containerPort": "http"}]}])
    status, body = error_of(CoreV1Api(k8s).create_namespaced_pod, "default", bad)
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.containers[0].ports[0].containerPort"
    assert '"string"' in body["message"] and "integer" in body["message"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1K", "1_000", " 1"])
def test_quantities_the_python_client_parses_but_the_api_server_does_not_are_422(k8s, value):
    """k8s.io/apimachinery/pkg/api/resource/quantity.go `ParseQuantity` reads a sign, digits with one `.`, and a
    suffix it knows (Ki..Ei, n u m k M..E, or an exponent): `NaN` and `Infinity` (Decimal's words), `1_000`
    (Python's digit separator), a space, and `K` (only `Ki` and `k` exist) are refused naming the field, before
    anything is written (kubesim once raised decimal.InvalidOperation on NaN, a 500)."""
    core = CoreV1Api(k8s)
    status, body = error_of(core.create_namespaced_pod, "default", pod("q", containers=[
        {"name": "c", "image": "busybox", "resources": {"requests": {"memory": value}}}]))
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.containers[0].resources.requests[memory]"
    assert "quantities must match the regular expression" in body["message"]
    assert core.list_namespaced_pod("default").items == []


def test_container_name_must_be_dns1123_label(k8s):
    """Container names are RFC 1123 labels; the message carries the value and the real regex text."""
    status, body = error_of(CoreV1Api(k8s).create_namespaced_pod, "default",
                            pod(containers=[{"name": "Main_C", "image": "busybox"}]))
    assert status == 422
    assert body["message"].startswith('Pod "p" is invalid: spec.containers[0].name: Invalid value: "Main_C": '
                                      "a lowercase RFC 1123 label")


def test_quantities_must_parse_and_requests_not_exceed_limits(k8s):
    """`500m`, `2Gi`, `1e3` parse; `lots` does not; requests above limits are refused."""
    core = CoreV1Api(k8s)
    ok = pod("ok", containers=[{"name": "c", "image": "busybox", "resources": {
        "requests": {"cpu": "500m", "memory": "1e3"}, "limits": {"cpu": "1", "memory": "2Gi"}}}])
    assert core.create_namespaced_pod("default", ok).metadata.name == "ok"
    status, body = error_of(core.create_namespaced_pod, "default", pod(containers=[
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "lots"}}}]))
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.containers[0].resources.requests[cpu]"
    assert 'Invalid value: "lots": quantities must match the regular expression' in body["message"]
    status, body = error_of(core.create_namespaced_pod, "default", pod(containers=[
        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]))
    assert status == 422
    assert body["message"] == ('Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
                               "must be less than or equal to cpu limit of 1")


def test_extended_resource_limits_must_equal_requests(k8s):
    """nvidia.com/gpu cannot be overcommitted: requests must equal limits (and be whole numbers)."""
    status, body = error_of(CoreV1Api(k8s).create_namespaced_pod, "default", pod(containers=[
        {"name": "c", "image": "busybox", "resources": {"requests": {"nvidia.com/gpu": "1"},
                                                        "limits": {"nvidia.com/gpu": "2"}}}]))
    assert status == 422
    assert "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit" \
        in body["message"]


def test_job_restart_policy_must_be_never_or_onfailure(k8s):
    """A Job's pod template defaults to restartPolicy Always, which a Job refuses (the real message)."""
    body = job("x")
    del body["spec"]["template"]["spec"]["restartPolicy"]
    status, err = error_of(BatchV1Api(k8s).create_namespaced_job, "default", body)
    assert status == 422
    assert err["message"] == ('Job.batch "x" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
                              '"Always": supported values: "OnFailure", "Never"')


def test_pod_defaults(k8s):
    """API defaulting clients rely on: restartPolicy, dnsPolicy, schedulerName, grace period, pull policy."""
    core = CoreV1Api(k8s)
    p = core.create_namespaced_pod("default", pod(containers=[
        {"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox:1.36"},
        {"name": "c", "image": "reg.io/x:latest", "resources": {"limits": {"cpu": "1"}}}]))
    assert p.spec.restart_policy == "Always" and p.spec.dns_policy == "ClusterFirst"
    assert p.spec.scheduler_name == "default-scheduler" and p.spec.termination_grace_period_seconds == 30
    assert [c.image_pull_policy for c in p.spec.containers] == ["Always", "IfNotPresent", "Always"]
    assert p.spec.containers[0].termination_message_path == "/dev/termination-log"
    assert p.spec.containers[2].resources.requests == {"cpu": "1"}      # requests default to limits


def test_job_defaults_selector_and_labels(k8s):
    """Job: backoffLimit 6, completions/parallelism 1, a controller-uid selector and the job-name labels."""
    j = BatchV1Api(k8s).create_namespaced_job("default", job("train"))
    uid = j.metadata.uid
    assert (j.spec.backoff_limit, j.spec.completions, j.spec.parallelism) == (6, 1, 1)
    assert j.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert j.spec.template.metadata.labels == {
        "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "train",
        "controller-uid": uid, "job-name": "train"}


def test_deployment_and_statefulset_defaults(k8s):
    """Deployment: replicas 1, RollingUpdate 25%/25%, revisionHistoryLimit 10; StatefulSet: OrderedReady."""
    apps = AppsV1Api(k8s)
    tmpl = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
    d = apps.create_namespaced_deployment("default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "template": tmpl}})
    assert d.spec.replicas == 1 and d.spec.revision_history_limit == 10
    assert d.spec.strategy.type == "RollingUpdate"
    assert (d.spec.strategy.rolling_update.max_surge, d.spec.strategy.rolling_update.max_unavailable) == ("25%", "25%")
    s = apps.create_namespaced_stateful_set("default", {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
        "spec": {"selector": {"matchLabels": {"app": "w"}}, "serviceName": "s", "template": tmpl}})
    assert s.spec.pod_management_policy == "OrderedReady" and s.spec.update_strategy.type == "RollingUpdate"


def test_apps_selector_must_match_template_labels(k8s):
    """apps/v1: `selector` does not match template `labels` → 422."""
    status, body = error_of(AppsV1Api(k8s).create_namespaced_deployment, "default", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
        "spec": {"selector": {"matchLabels": {"app": "x"}},
                 "template": {"metadata": {"labels": {"app": "w"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    assert status == 422 and "spec.template.metadata.labels" in body["message"]
    assert "`selector` does not match template `labels`" in body["message"]


def test_service_cluster_ip_allocated_unique_and_immutable(k8s):
    """Services get a unique clusterIP from 10.96.0.0/16 (None when headless); it cannot change."""
    core = CoreV1Api(k8s)

    def svc(name, **spec):
        return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}}
    a = core.create_namespaced_service("default", svc("a"))
    b = core.create_namespaced_service("default", svc("b"))
    h = core.create_namespaced_service("default", svc("h", clusterIP="None"))
    assert a.spec.cluster_ip.startswith("10.96.") and a.spec.cluster_ip != b.spec.cluster_ip
    assert a.spec.type == "ClusterIP" and a.spec.session_affinity == "None"
    assert a.spec.ports[0].target_port == 80 and a.spec.ports[0].protocol == "TCP"
    assert h.spec.cluster_ip == "None" and h.spec.cluster_ips == ["None"]
    n = core.create_namespaced_service("default", svc("n", type="NodePort"))
    assert 30000 <= n.spec.ports[0].node_port <= 32767 and n.spec.external_traffic_policy == "Cluster"
    a.spec.cluster_ip = "10.96.200.200"
    a.spec.cluster_ips = ["10.96.200.200"]
    status, body = error_of(core.replace_namespaced_service, "a", "default", a)
    assert status == 422 and "spec.clusterIP" in body["message"] and "field is immutable" in body["message"]


def test_pod_spec_immutable_except_image(k8s):
    """Pod updates may change only images, activeDeadlineSeconds and tolerations (additions)."""
    core = CoreV1Api(k8s)
    core.create_namespaced_pod("default", pod("p", schedulerName="none"))   # no scheduler touches it
    p = core.read_namespaced_pod("p", "default")
    p.spec.containers[0].image = "busybox:1.37"
    p = core.replace_namespaced_pod("p", "default", p)
    assert p.spec.containers[0].image == "busybox:1.37"
    p.spec.containers[0].command = ["sh"]
    status, body = error_of(core.replace_namespaced_pod, "p", "default", p)
    assert status == 422 and body["message"].startswith('Pod "p" is invalid: spec: Forbidden: pod updates may '
                                                        "not change fields other than")


def test_job_template_and_selector_immutable(k8s):
    """A Job's spec.selector and spec.template cannot change after create."""
    batch = BatchV1Api(k8s)
    batch.create_namespaced_job("default", job("x", suspend=True))
    status, body = error_of(batch.patch_namespaced_job, "x", "default",
                            {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.template"
    assert "field is immutable" in body["message"]
    status, body = error_of(batch.patch_namespaced_job, "x", "default",
                            {"spec": {"selector": {"matchLabels": {"a": "b"}}}})
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.selector"


# ---- custom resources: the Sedna CRDs (the project's copies) -------------------------------------------

@lru_cache(maxsize=1)
def sedna_crds() -> tuple[dict, ...]:
    crds = files("k8s_templates").joinpath("sedna", "crds")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(doc for name in ("sedna.io_models.yaml", "sedna.io_datasets.yaml",
                                  "sedna.io_federatedlearningjobs.yaml", "sedna.io_jointinferenceservices.yaml")
                 for doc in yaml.load_all(crds.joinpath(name).read_text(), Loader=loader) if doc)


def install_sedna_crds(k8s) -> None:
    ext = ApiextensionsV1Api(k8s)
    for doc in sedna_crds():
        # the CRD models are deep: skip their deserialization, it is not what is tested here
        ext.create_custom_resource_definition(doc, _preload_content=False)


def test_custom_resource_pruned_and_validated_against_crd_schema(k8s):
    """CRs are validated against their CRD's openAPIV3Schema (required fields, types) and unknown fields
    are pruned, as a real server does for structural schemas."""
    install_sedna_crds(k8s)
    co = CustomObjectsApi(k8s)
    model = {"apiVersion": "sedna.io/v1alpha1", "kind": "Model", "metadata": {"name": "m"},
             "spec": {"url": "s3://models/m", "format": "pb", "bogus": 1}, "extra": {"x": 1}}
    created = co.create_namespaced_custom_object("sedna.io", "v1alpha1", "default", "models", model)
    assert created["spec"] == {"url": "s3://models/m", "format": "pb"} and "extra" not in created
    status, body = error_of(co.create_namespaced_custom_object, "sedna.io", "v1alpha1", "default", "models",
                            {"apiVersion": "sedna.io/v1alpha1", "kind": "Model", "metadata": {"name": "n"},
                             "spec": {"url": 7}})
    assert status == 422
    fields = {c["field"] for c in body["details"]["causes"]}
    assert fields == {"spec.format", "spec.url"}
    assert body["message"].startswith('Model.sedna.io "n" is invalid: [')


def test_custom_resource_embedded_pod_template_kept(k8s):
    """A FederatedLearningJob's pod templates (preserved/embedded fields) survive pruning intact."""
    install_sedna_crds(k8s)
    co = CustomObjectsApi(k8s)
    template = {"spec": {"containers": [{"name": "agg", "image": "sedna/agg:v0.3", "env": [
        {"name": "exit_round", "value": "3"}], "resources": {"limits": {"memory": "2Gi"}}}]}}
    body = {"apiVersion": "sedna.io/v1alpha1", "kind": "FederatedLearningJob", "metadata": {"name": "fl"},
            "spec": {"aggregationWorker": {"model": {"name": "m"}, "template": template},
                     "trainingWorkers": [{"dataset": {"name": "d"}, "template": template}]}}
    created = co.create_namespaced_custom_object("sedna.io", "v1alpha1", "default", "federatedlearningjobs", body)
    assert created["spec"]["aggregationWorker"]["template"] == template
    assert created["spec"]["trainingWorkers"][0]["template"] == template


def test_every_builtin_kind_has_a_self_contained_schema():
    """Each built-in kind kubesim serves is validated against its 1.31 schema, with every `$ref` resolved
    ahead of time (a dangling reference would otherwise fail only on the request that reaches it)."""
    from kubesim.apiserver.admission.builtin_schema import SCHEMAS
    from kubesim.apiserver.registry.kinds import BUILTINS

    def refs(node, seen):
        if id(node) in seen:
            return []
        seen.add(id(node))
        if isinstance(node, dict):
            own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
            return own + [r for v in node.values() for r in refs(v, seen)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v, seen)]
        return []
    checked = 0
    for rt in BUILTINS:
        v = SCHEMAS.validator(rt.api_version, rt.kind)
        if v is not None:
            assert refs(v.schema, set()) == [], rt.kind
            checked += 1
    assert checked >= 25


def test_crd_schema_extensions_int_or_string_nullable_embedded(k8s):
    """x-kubernetes-int-or-string accepts 3 and "50%" but not true; nullable allows null; an embedded
    resource needs apiVersion/kind and keeps them; x-kubernetes-preserve-unknown-fields keeps unknown
    fields below it while unknown fields elsewhere are pruned."""
    ApiextensionsV1Api(k8s).create_custom_resource_definition({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {
                         "surge": {"x-kubernetes-int-or-string": True},
                         "note": {"type": "string", "nullable": True},
                         "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                         "child": {"type": "object", "x-kubernetes-embedded-resource": True,
                                   "x-kubernetes-preserve-unknown-fields": True}}}}}}}]}},
        _preload_content=False)
    co = CustomObjectsApi(k8s)

    def gadget(name, **spec):
        return {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}
    child = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}
    a = co.create_namespaced_custom_object("example.com", "v1", "default", "gadgets", gadget(
        "a", surge=3, note=None, free={"any": {"thing": 1}}, child=child, dropped=1))
    assert a["spec"] == {"surge": 3, "note": None, "free": {"any": {"thing": 1}}, "child": child}
    b = co.create_namespaced_custom_object("example.com", "v1", "default", "gadgets", gadget("b", surge="50%"))
    assert b["spec"]["surge"] == "50%"
    status, body = error_of(co.create_namespaced_custom_object, "example.com", "v1", "default", "gadgets",
                            gadget("c", surge=True))
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.surge"
    status, body = error_of(co.create_namespaced_custom_object, "example.com", "v1", "default", "gadgets",
                            gadget("d", child={"data": {}}))
    assert status == 422
    assert {c["field"] for c in body["details"]["causes"]} == {"spec.child.apiVersion", "spec.child.kind"}


def test_bad_script_annotation_is_invalid(k8s):
    """kubesim's scripting annotations are validated like fields: a bad value is refused naming it."""
    body = job("x")
    body["spec"]["template"]["metadata"] = {"annotations": {"kubesim.io/duration": "soon"}}
    status, err = error_of(BatchV1Api(k8s).create_namespaced_job, "default", body)
    assert status == 422
    assert err["message"] == ('Job.batch "x" is invalid: spec.template.metadata.annotations[kubesim.io/duration]: '
                              'Invalid value: "soon": must be a non-negative number of seconds')


def test_unknown_fields_of_builtin_kinds_are_dropped(k8s):
    """Fields a built-in type does not have are not stored (the real server drops them and warns)."""
    body = pod("p", schedulerName="none")
    body["spec"]["containers"][0]["imagePullPolicyy"] = "Never"
    body["spec"]["bogus"] = {"x": 1}
    body["metadata"]["labels"] = {"keep": "me"}
    CoreV1Api(k8s).create_namespaced_pod("default", body)
    raw = json.loads(CoreV1Api(k8s).read_namespaced_pod("p", "default", _preload_content=False).data)
    assert "bogus" not in raw["spec"] and "imagePullPolicyy" not in raw["spec"]["containers"][0]
    assert raw["metadata"]["labels"] == {"keep": "me"} and raw["spec"]["containers"][0]["image"] == "busybox:1.36"


@pytest.mark.parametrize("kind,api_version,obj", [
    ("Pod", "v1", {"spec": {"containers": [{"name": "c", "image": 3, "ports": [{"containerPort": "x"}]}],
                            "restartPolicy": ["Never"]}}),
    ("Pod", "v1", {"spec": {"containers": [{"image": "x", "resources": {"limits": {"cpu": True}}}],
                            "nodeSelector": {"a": 1}}}),
    ("Job", "batch/v1", {"spec": {"backoffLimit": "6", "template": {"spec": {"containers": [{}]}}}}),
    ("Service", "v1", {"spec": {"ports": [{"port": 1.5, "targetPort": {"x": 1}}], "type": 7}}),
    ("Deployment", "apps/v1", {"spec": {"replicas": 1.0, "selector": "app=x", "template": {}}}),
    ("ConfigMap", "v1", {"data": {"k": 1}, "binaryData": [], "immutable": "yes"}),
])
def test_fast_schema_walk_agrees_with_jsonschema(kind, api_version, obj):
    """The direct schema walk used on every request reports exactly what the generic JSON-schema
    validator reports on the same 1.31 schema (fields and messages)."""
    from kubesim.apimachinery.fielderrors import Causes
    from kubesim.apiserver.admission.builtin_schema import SCHEMAS, builtin_errors
    from kubesim.apiserver.admission.builtin_schema import schema_errors as _schema_errors
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, **obj}
    v = SCHEMAS.validator(api_version, kind)
    slow, fast = Causes(), Causes()
    _schema_errors(v, obj, slow)
    builtin_errors(obj, v.schema, [], fast)
    assert fast and sorted(fast) == sorted(slow)


def _valid_pod() -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {
        "containers": [{"name": "c", "image": "i", "env": [{"name": "E", "value": "1"}],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "1", "memory": 2}},
                        "volumeMounts": [{"name": "v", "mountPath": "/d"}]}],
        "volumes": [{"name": "v", "hostPath": {"path": "/d", "type": "Directory"}}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}},
        "restartPolicy": "OnFailure", "hostNetwork": True, "terminationGracePeriodSeconds": 30.0}}


# one change each: a wrong type (leaf, object, array, integer as a fraction), a missing required field, an
# enum value, an int-or-string / quantity of the wrong kind, an unknown field (not an error: dropped)
_POD_EDITS = [
    (("spec", "containers", 0, "image"), 3), (("spec", "containers", 0, "env"), {"E": "1"}),
    (("spec", "volumes"), {"v": 1}), (("spec", "terminationGracePeriodSeconds"), 1.5),
    (("spec", "containers", 0, "ports", 0, "containerPort"), True), (("spec", "containers", 0, "name"), None),
    (("spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms",
      0, "matchExpressions", 0, "key"), ["k"]),
    (("spec", "containers", 0, "resources", "limits", "cpu"), [1]), (("spec", "hostNetwork"), "yes"),
    (("spec", "containers", 0, "volumeMounts", 0, "mountPath"), {}), (("metadata", "labels", "a"), 1),
    (("kind",), "Pods"), (("spec", "unknownField"), {"x": 1}),
]


@pytest.mark.parametrize("path,value", [((), None), *_POD_EDITS])
def test_compiled_schema_check_agrees_with_the_walk(path, value):
    """The compiled check admission runs first (kubesim.apiserver.admission.builtin_schema.schema_ok) passes exactly the objects on which
    the direct walk finds no cause (the walk then names them)."""
    from kubesim.apimachinery.fielderrors import Causes
    from kubesim.apiserver.admission.builtin_schema import SCHEMAS, builtin_errors, schema_ok
    obj = _valid_pod()
    if path:
        node = obj
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    v = SCHEMAS.validator("v1", "Pod")
    causes = Causes()
    builtin_errors(obj, v.schema, [], causes)
    assert schema_ok(v.schema)(obj) is (not causes)
    assert bool(causes) is (path not in ((), ("spec", "unknownField")))


def test_custom_resource_errors_are_the_whole_objects_and_remembered():
    """A CR is validated per top-level field with the field's errors kept by content: the causes (fields,
    messages, order) are those of validating the whole object, on the first write and on a repeated one."""
    import copy

    from kubesim.apimachinery.fielderrors import Causes
    from kubesim.apiserver.admission.builtin_schema import schema_errors as _schema_errors
    from kubesim.apiserver.admission.crschema import CustomValidator
    crd = yaml.safe_load((REPO / "k8s_templates/sedna/crds/sedna.io_federatedlearningjobs.yaml").read_text())
    schema_json = json.dumps(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], sort_keys=True)
    validator = CustomValidator(schema_json)
    assert validator.parts is not None  # the Sedna CRDs take the per-field path
    good = yaml.safe_load((REPO / "tests/support/sedna/samples/federatedlearningjob_v1alpha2.yaml").read_text())
    bad_spec = copy.deepcopy(good)
    bad_spec["spec"]["trainingWorkers"][0]["template"]["spec"]["containers"][0]["image"] = 3
    bad_spec["spec"]["aggregationWorker"]["model"] = "m"
    bad_status = {**copy.deepcopy(good), "status": {"phase": 7, "startTime": [], "conditions": [{"x": 1}]}}
    both = {**copy.deepcopy(bad_spec), "status": bad_status["status"], "extra": 1}
    for obj in (good, bad_spec, bad_status, both, good, bad_spec, both):
        whole, split = Causes(), Causes()
        _schema_errors(validator.whole, obj, whole)
        validator.errors(obj, split)
        assert split == whole
        assert bool(split) is (obj is not good)


def test_crd_without_schema_is_invalid(k8s):
    """apiextensions.k8s.io/v1 requires a structural schema per version."""
    status, body = error_of(ApiextensionsV1Api(k8s).create_custom_resource_definition, {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": True, "storage": True}]}})
    assert status == 422
    assert body["details"]["causes"][0]["field"] == "spec.versions[0].schema.openAPIV3Schema"


def _drop_walk(obj, schema, depth=0):
    """The direct walk kubesim.apiserver.admission.builtin_schema.drop_unknown_fields compiles (the reference it must agree with)."""
    if depth > 64 or not isinstance(schema, dict):
        return
    if isinstance(obj, dict):
        props, additional = schema.get("properties"), schema.get("additionalProperties")
        if props is not None:
            for k in list(obj):
                if k in props:
                    _drop_walk(obj[k], props[k], depth + 1)
                elif additional is None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                    del obj[k]
        elif isinstance(additional, dict):
            for v in obj.values():
                _drop_walk(v, additional, depth + 1)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            _drop_walk(item, schema["items"], depth + 1)


@pytest.mark.parametrize("kind,api_version", [("Pod", "v1"), ("Deployment", "apps/v1"), ("Service", "v1")])
def test_dropping_unknown_fields_agrees_with_the_walk(kind, api_version):
    import copy

    from kubesim.apiserver.admission.builtin_schema import SCHEMAS, drop_unknown_fields
    pod = _valid_pod()
    pod["spec"]["containers"][0].update(bogus=1, resources={"limits": {"cpu": "1"}, "nope": {}})
    pod["spec"]["affinity"]["nodeAffinity"]["x"] = [1]
    pod["metadata"].update(labels={"a": "b"}, annotations={"k": "v"}, junk={"y": 2})
    pod["spec"]["containers"][0]["env"][0]["valueFrom"] = {"fieldRef": {"fieldPath": "p", "z": 1}, "w": 2}
    obj = {"Pod": pod, "Deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                      "spec": {"template": {k: pod[k] for k in ("metadata", "spec")}, "q": 1}},
           "Service": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "extra": 1},
                       "spec": {"ports": [{"port": 1, "nope": 2}], "selector": {"a": "b"}, "zz": 0}}}[kind]
    schema = SCHEMAS.validator(api_version, kind).schema
    compiled, walked = copy.deepcopy(obj), copy.deepcopy(obj)
    drop_unknown_fields(compiled, schema)
    _drop_walk(walked, schema)
    assert compiled == walked and compiled != obj
