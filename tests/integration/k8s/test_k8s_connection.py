"""The connection id: the caller's, else ``[skiff] kubernetes_conn_id``, else ``kubernetes_default``; requests
go through the provider's hooks with whatever that Airflow connection says (here: a kubeconfig for kubesim)."""

from __future__ import annotations

import sys

from devstack.airflow_env import kubernetes_connection_uri
from operators.k8s import DEFAULT_CONN_ID
from operators.k8s.connection import api_client, conn_id
from operators.k8s.resource import Resource

NAMESPACES = Resource("v1", "namespaces")


def test_conn_id_default_config_and_explicit(monkeypatch):
    monkeypatch.delenv("AIRFLOW__SKIFF__KUBERNETES_CONN_ID", raising=False)
    assert conn_id() == DEFAULT_CONN_ID == "kubernetes_default"
    monkeypatch.setenv("AIRFLOW__SKIFF__KUBERNETES_CONN_ID", "team_cluster")
    assert conn_id() == "team_cluster"
    assert conn_id("explicit") == "explicit"


def test_requests_use_the_configured_connection(kubesim, kubeconfig, monkeypatch):
    from operators.k8s.rest import Kube

    monkeypatch.setenv("AIRFLOW_CONN_TEAM_CLUSTER", kubernetes_connection_uri(kubeconfig))
    monkeypatch.setenv("AIRFLOW__SKIFF__KUBERNETES_CONN_ID", "team_cluster")
    names = {ns["metadata"]["name"] for ns in Kube(api_client()).list(NAMESPACES)}
    assert "kube-system" in names


def test_the_sedna_watch_takes_the_configured_connection(monkeypatch):
    monkeypatch.setenv("AIRFLOW__SKIFF__KUBERNETES_CONN_ID", "team_cluster")
    from operators.sedna.dags import sedna_asset
    from operators.sedna.desired import FL_KIND

    (watcher,) = sedna_asset(FL_KIND).watchers
    assert watcher.trigger.serialize()[1]["kubernetes_conn_id"] == "team_cluster"


def test_importing_operators_loads_no_kubernetes_client():
    """DAG files import ``operators``; the clients load only where a task or trigger runs (parse cost)."""
    import subprocess

    code = ("import sys, operators, operators.k8s, operators.sedna.dags; from operators import TrainingJobOperator; "
            "print(sorted(m for m in ('kubernetes', 'kubernetes_asyncio', 'aiohttp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_parsing_every_dag_file_loads_no_kubernetes_client():
    """What keeps each DAG file's cold parse cheap (BENCHMARKS.md, dag_parse): the DAG processor's parse of
    every file in dags/ imports none of the clients; they load where a task or trigger runs."""
    from benchmarks.dag_parse import ROOT, parse_once

    out = parse_once(ROOT, ROOT / "dags")
    assert out["errors"] == [] and out["dags"] >= len(list((ROOT / "dags").glob("*.py"))), out
    assert out["clients"] == [], out
