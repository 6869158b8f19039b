"""Server-side printing (printers.py): `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` answers a
meta.k8s.io/v1 Table with kube-apiserver's columns (pkg/printers/internalversion/printers.go)."""
from __future__ import annotations

import json
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest

from kubesim.apiserver.endpoints.printers_kinds import CELLS, human_duration
from tests.support.kubesim.fixtures import configmap, pod

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def table(sim, path: str, accept: str = TABLE) -> dict:
    req = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("seconds, text", [(-5, "<invalid>"), (59, "59s"), (119, "119s"), (125, "2m5s"),
                                           (600, "10m"), (3 * 3600 + 600, "3h10m"), (10 * 3600, "10h"),
                                           (50 * 3600, "2d2h"), (30 * 86400, "30d"), (800 * 86400, "2y70d")])
def test_human_duration_is_apimachinerys(seconds, text):
    assert human_duration(seconds) == text


def test_pod_cells_show_the_containers_state():
    """printPod: the status is the waiting/terminated reason of the last container, restarts with their age."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    stamp = (now - timedelta(seconds=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
    p = {"metadata": {"name": "p", "creationTimestamp": stamp},
         "spec": {"nodeName": "cpu-1", "containers": [{"name": "a"}, {"name": "b"}]},
         "status": {"phase": "Running", "podIP": "10.1.0.5", "containerStatuses": [
             {"name": "a", "ready": True, "restartCount": 0, "state": {"running": {}}},
             {"name": "b", "ready": False, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
              "lastState": {"terminated": {"exitCode": 1, "finishedAt": stamp}}}]}}
    assert CELLS[("", "pods")](p, now) == ["p", "1/2", "CrashLoopBackOff", "3 (90s ago)", "90s", "10.1.0.5",
                                           "cpu-1", "<none>", "<none>"]


def test_list_and_get_as_table(apisim):
    from kubernetes.client import CoreV1Api
    core = CoreV1Api(apisim.api_client())
    core.create_namespaced_config_map("default", configmap("two", data={"a": "1", "b": "2"}))
    core.create_namespaced_pod("default", pod("p"))
    t = table(apisim, "/api/v1/namespaces/default/configmaps")
    assert (t["kind"], t["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert t["columnDefinitions"][0]["format"] == "name" and t["columnDefinitions"][0]["description"].startswith(
        "Name must be unique within a namespace")   # the ObjectMeta description, from the schema
    row = next(r for r in t["rows"] if r["cells"][0] == "two")
    assert row["cells"][1] == 2
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["name"] == "two"
    assert t["metadata"]["resourceVersion"]
    pods = table(apisim, "/api/v1/namespaces/default/pods/p?includeObject=Object")
    assert [(c["name"], c["priority"]) for c in pods["columnDefinitions"]] == [
        ("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1), ("Node", 1),
        ("Nominated Node", 1), ("Readiness Gates", 1)]
    assert pods["rows"][0]["cells"][:4] == ["p", "0/1", "Pending", "0"]
    assert pods["rows"][0]["object"]["kind"] == "Pod"
    assert "rows" not in table(apisim, "/api/v1/namespaces/default/pods/p", "application/json")   # plain JSON


def test_kinds_without_a_printer_get_the_default_table(apisim):
    t = table(apisim, "/apis/rbac.authorization.k8s.io/v1/clusterroles")
    assert [(c["name"], c["type"]) for c in t["columnDefinitions"]] == [("Name", "string"), ("Created At", "date")]


def test_a_watch_asked_as_tables_streams_one_row_tables(apisim):
    """kubectl get -w: each event's object is a Table of that one object."""
    from kubernetes.client import CoreV1Api
    CoreV1Api(apisim.api_client()).create_namespaced_config_map("default", configmap("w", data={"a": "1"}))
    req = urllib.request.Request(apisim.url + "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
                                 headers={"Accept": TABLE})
    with urllib.request.urlopen(req, timeout=30) as resp:
        events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    first = next(e for e in events if e["object"]["rows"][0]["cells"][0] == "w")
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Table"
    assert [c["name"] for c in first["object"]["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert first["object"]["rows"][0]["cells"][1] == 1


def test_hpa_cells_are_printers_gos():
    """printHorizontalPodAutoscaler / formatHPAMetrics: Kind/name, "<resource>: current/target" (no metrics server
    in kubesim: <unknown>), at most two metrics then "+ N more...", <unset> without minReplicas."""
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    mem = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}
    pods = {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}
    hpa = {"metadata": {"name": "ji", "creationTimestamp": "2026-12-01T11:59:00Z"},
           "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "edge"}, "maxReplicas": 4, "metrics": [cpu]},
           "status": {"currentReplicas": 2}}
    cell = CELLS[("autoscaling", "horizontalpodautoscalers")]
    assert cell(hpa, now) == ["ji", "Deployment/edge", "cpu: <unknown>/80%", "<unset>", 4, 2, "60s"]
    hpa["spec"].update(minReplicas=1, metrics=[cpu, mem, pods])
    hpa["status"]["currentMetrics"] = [{"type": "Resource", "resource": {"name": "cpu", "current": {
        "averageUtilization": 35, "averageValue": "120m"}}}]
    assert cell(hpa, now)[2:4] == ["cpu: 35%/80%, memory: <unknown>/1Gi + 1 more...", "1"]
    hpa["spec"]["metrics"] = []
    assert cell(hpa, now)[2] == "<none>"


def test_hpas_are_listed_with_kube_apiservers_columns(apisim):
    from kubernetes.client import AutoscalingV2Api
    AutoscalingV2Api(apisim.api_client()).create_namespaced_horizontal_pod_autoscaler("default", {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "minReplicas": 2,
                 "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {
                     "type": "Utilization", "averageUtilization": 70}}}]}})
    t = table(apisim, "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers")
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Reference", "Targets", "MinPods", "MaxPods",
                                                            "Replicas", "Age"]
    assert t["columnDefinitions"][1]["description"], t["columnDefinitions"][1]   # from the schema
    assert t["rows"][0]["cells"][:5] == ["h", "Deployment/web", "memory: <unknown>/70%", "2", 3]
