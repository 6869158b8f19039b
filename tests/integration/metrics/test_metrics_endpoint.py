"""Skiff's endpoint app in process (FastAPI's TestClient) on kubesim: the token, and gauges equal to what the
cluster's ResourceQuotas count. (The api-server, an Airflow login and a real Prometheus: test_metrics_e2e.py.)"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from kubernetes import client

from kubesim.testing import wait_until
from operators.core.quantity import parse_quantity
from operators.exporter.endpoint import create_app

TOKEN = "t0ken-for-the-test"


@pytest.fixture
def teams(k8s, kube_conn, monkeypatch):
    from operators.k8s import Kube
    from operators.platform import load_platform
    from operators.teams import ensure_queues

    assert not ensure_queues(Kube(k8s), load_platform()).errors
    monkeypatch.setenv("AIRFLOW__SKIFF__METRICS_TOKEN", TOKEN)
    monkeypatch.setenv("AIRFLOW__SKIFF__METRICS_CACHE_SECONDS", "0")  # every scrape reads the cluster
    return k8s


def _samples(text: str, name: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) + 1:].rsplit("} ", 1)
            out[dict(p.split("=", 1) for p in labels.split(","))["team"].strip('"')] = float(value)
    return out


def test_with_the_token_the_gpu_gauges_equal_the_quotas_status_used(teams):
    core = client.CoreV1Api(teams)
    res = {"cpu": "250m", "memory": "128Mi", "nvidia.com/gpu": "1"}
    for ns, name in (("recsys", "a"), ("recsys", "b"), ("nlp", "c")):
        core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": {"containers": [
            {"name": "c", "image": "x", "resources": {"requests": res, "limits": res}}]}})

    def used() -> dict[str, float]:
        return {ns: float(parse_quantity(core.read_namespaced_resource_quota("skiff-quota", ns).status.used
                                         .get("requests.nvidia.com/gpu", "0"))) for ns in ("recsys", "nlp")}

    wait_until(lambda: used() == {"recsys": 2.0, "nlp": 1.0}, timeout=30, interval=0.2, what="quota status.used")
    app = TestClient(create_app())
    r = app.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert _samples(r.text, "skiff_team_gpu_requests") == used()
    assert _samples(r.text, "skiff_team_gpu_quota") == {"recsys": 2.0, "nlp": 1.0}
    # the pass read the cluster with a fixed number of list requests, counted on the endpoint's own client
    # (quotas, Jobs, StatefulSets, two Sedna kinds, two pod selectors)
    assert "skiff_exporter_cluster_requests_total 7.0" in r.text


def test_without_the_token_airflow_decides_and_refuses_the_anonymous(teams):
    """No bearer token (none, or the token sent as Basic): Airflow's get_user answers 401. A wrong bearer
    token goes to Airflow as a login token (403 in the api-server: test_metrics_e2e.py)."""
    app = TestClient(create_app(), raise_server_exceptions=False)
    for headers in ({}, {"Authorization": f"Basic {TOKEN}"}):
        r = app.get("/metrics", headers=headers)
        assert r.status_code == 401, (headers, r.status_code)
        assert "skiff_" not in r.text
