"""Rules kubesim keeps in one place each — pod QoS class, config keys, apps/v1 selectors, node affinity terms,
container port names, RFC 3339 times —
checked against what kube-apiserver and the kubelet do."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kubernetes.client import AppsV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from kubesim.apimachinery.clock import parse_time
from kubesim.apimachinery.qos import qos_class
from kubesim.controllers.scheduler import match_term
from kubesim.testing import wait_until


def spec(*resources: dict, init: dict | None = None) -> dict:
    out = {"containers": [{"name": f"c{i}", "image": "busybox:1.36", "resources": r}
                          for i, r in enumerate(resources)]}
    if init is not None:
        out["initContainers"] = [{"name": "init", "image": "busybox:1.36", "resources": init}]
    return out


GUARANTEED = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1024Mi"}}


@pytest.mark.parametrize("pod_spec,want", [
    (spec({}), "BestEffort"),
    (spec({"requests": {"cpu": "0"}}), "BestEffort"),                       # zero amounts do not count
    (spec({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}), "BestEffort"),
    (spec(GUARANTEED), "Guaranteed"),                                       # 1 == 1000m, 1Gi == 1024Mi
    (spec({"limits": {"cpu": "2", "memory": "1Gi"}}), "Guaranteed"),        # requests default to limits
    (spec({"limits": {"cpu": "2"}}), "Burstable"),                          # no memory limit
    (spec({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}), "Burstable"),
    (spec(GUARANTEED, {}), "Burstable"),                                    # one container without limits
    (spec(GUARANTEED, init={"requests": {"cpu": "100m"}}), "Burstable"),    # init containers count
])
def test_qos_class_follows_get_pod_qos(pod_spec, want):
    """Kubernetes' GetPodQOS: positive cpu/memory requests and limits over all containers; Guaranteed when
    every container limits both and requests equal limits by value; BestEffort when nothing is set."""
    assert qos_class(pod_spec) == want


def test_qos_class_is_the_same_at_create_and_once_running(k8s):
    """The apiserver records qosClass at create and the kubelet keeps it: cpu `1` requested with a `1000m`
    limit (equal quantities) is Guaranteed both before and after the kubelet writes the pod's status."""
    core = CoreV1Api(k8s)
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g", "annotations": {"kubesim.io/duration": "30"}},
            "spec": {"restartPolicy": "Never", **spec(GUARANTEED)}}
    assert core.create_namespaced_pod("default", body).status.qos_class == "Guaranteed"
    running = wait_until(lambda: (p := core.read_namespaced_pod("g", "default")).status.phase == "Running" and p,
                         what="pod g Running")
    assert running.status.container_statuses and running.status.qos_class == "Guaranteed"


def test_secret_and_configmap_keys_must_be_config_keys(k8s):
    """data keys become file names: `a/b` or `a b` → 422 naming `data[<key>]`; nothing is created."""
    core = CoreV1Api(k8s)
    with pytest.raises(ApiException) as info:
        core.create_namespaced_secret("default", {"metadata": {"name": "s"}, "stringData": {"a/b": "v"}})
    assert info.value.status == 422 and "data[a/b]" in info.value.body and "valid config key" in info.value.body
    with pytest.raises(ApiException) as info:
        core.create_namespaced_config_map("default", {"metadata": {"name": "c"}, "data": {"a b": "v"}})
    assert info.value.status == 422 and "data[a b]" in info.value.body
    assert core.list_namespaced_secret("default").items == [] and core.list_namespaced_config_map(
        "default", field_selector="metadata.name=c").items == []


def deployment(selector: dict) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 0, "selector": selector, "template": {
                "metadata": {"labels": {"app": "d", "tier": "web"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}}


def test_deployment_selector_with_match_expressions(k8s):
    """A selector's matchExpressions must select the template's labels; an unknown operator → 422."""
    apps = AppsV1Api(k8s)
    ok = apps.create_namespaced_deployment("default", deployment(
        {"matchLabels": {"app": "d"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}))
    assert ok.metadata.name == "d"
    apps.delete_namespaced_deployment("d", "default")
    for selector, field in [({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["web"]}]},
                             "spec.template.metadata.labels"),
                            ({"matchExpressions": [{"key": "tier", "operator": "Like", "values": ["web"]}]},
                             "spec.selector.matchExpressions[0].operator")]:
        with pytest.raises(ApiException) as info:
            apps.create_namespaced_deployment("default", deployment(selector))
        assert info.value.status == 422 and field in info.value.body


def test_node_affinity_terms_go_through_the_one_label_matcher():
    """matchExpressions / matchFields of a NodeSelectorTerm are a label selector (selectors.Requirement, with
    Gt/Lt on integers), as nodeaffinity builds one; an invalid requirement makes its term match no node."""
    node = {"metadata": {"name": "n1", "labels": {"mem": "64", "zone": "a"}}}

    def term(*exprs, fields=()):
        return {"matchExpressions": list(exprs), "matchFields": list(fields)}
    assert match_term(term({"key": "mem", "operator": "Gt", "values": ["10"]}), node)
    assert not match_term(term({"key": "mem", "operator": "Lt", "values": ["10"]}), node)
    assert not match_term(term({"key": "zone", "operator": "Gt", "values": ["1"]}), node)  # not an integer
    assert match_term(term({"key": "zone", "operator": "NotIn", "values": ["b"]},
                           {"key": "gpu", "operator": "DoesNotExist"}), node)
    assert match_term(term(fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}]), node)
    assert not match_term(term(fields=[{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]), node)
    for bad in ({"operator": "Like", "values": ["a"]}, {"operator": "NotIn", "values": []},
                {"operator": "Gt", "values": ["1", "2"]}, {"operator": "Lt", "values": ["x"]},
                {"operator": "Exists", "values": ["a"]}):
        assert not match_term(term({"key": "zone", **bad}), node), bad


@pytest.mark.parametrize("name,message", [
    ("metrics-http-long", "must be no more than 15 characters"),
    ("Http", "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"),
    ("8080", "must contain at least one letter (a-z)"),
    ("web--ui", "must not contain consecutive hyphens"),
    ("-web", "must not begin or end with a hyphen"),
])
def test_container_port_names_are_iana_service_names(k8s, name, message):
    """A container port's name follows IsValidPortName (names.port_name_error): 422 naming field and value."""
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ports"},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                                     "ports": [{"containerPort": 80, "name": name}]}]}}
    with pytest.raises(ApiException) as info:
        CoreV1Api(k8s).create_namespaced_pod("default", body)
    assert info.value.status == 422
    assert f'spec.containers[0].ports[0].name: Invalid value: \\"{name}\\": {message}' in info.value.body


def test_parse_time_reads_rfc3339_as_the_api_writes_it():
    """Seconds (`Z`), nanoseconds (the kubelet's log stamps) and offsets all parse to aware UTC times."""
    assert parse_time("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parse_time("2026-01-02T03:04:05.123456789Z") == datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert parse_time("2026-01-02T05:04:05+02:00") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with pytest.raises(ValueError):
        parse_time("yesterday")
