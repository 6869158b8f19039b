"""Two teams in one Kueue cohort on kubesim (with Kueue installed), for the queued-training tests.

``recsys`` (team A, may use the online pool) and ``nlp`` (team B) each have 4 GPUs and 8 CPUs of nominal quota;
the cluster admin's Kueue objects and Skiff's sync are applied as in production; ``kubernetes_default`` and
``[skiff] platform_file`` point at them.
"""

from __future__ import annotations

import logging

import pytest
from kubernetes import client

from devstack.airflow_env import kubernetes_connection_uri
from kubesim.testing import sync_api_client
from operators.k8s import Kube
from operators.platform import parse_platform
from operators.platform.sync import sync_cluster
from operators.rbac import apply_manifests, platform_team_manifests

PLATFORM = """\
version: 1
queueing: kueue
users: {default_pvc_size: 1Gi}
limit_range: {default_cpu: "1", default_memory: 1Gi}
teams:
  - name: recsys
    allow_online: true
    quota: {cpu: "8", memory: 32Gi, gpu: 4, storage: 20Gi}
    kueue:
      flavors:
        online: {cpu: "8", memory: 32Gi}
        gpu: {cpu: "8", memory: 32Gi, gpu: 4}
        default: {cpu: "8", memory: 32Gi}
      dev: {default: {cpu: "1", memory: 2Gi}}
    members:
      - {user: alice, email: alice@example.com, role: admin}
  - name: nlp
    quota: {cpu: "8", memory: 32Gi, gpu: 4, storage: 20Gi}
    kueue:
      flavors:
        gpu: {cpu: "8", memory: 32Gi, gpu: 4}
        default: {cpu: "8", memory: 32Gi}
      dev: {default: {cpu: "1", memory: 2Gi}}
    members:
      - {user: carol, email: carol@example.com, role: admin}
images:
  - {name: tf2-cpu, image: "registry.example.com/nb:tf2", default: true}
  - {name: tf2-gpu, image: "registry.example.com/nb:tf2-gpu", gpu: true}
"""
G, V = "kueue.x-k8s.io", "v1beta2"


@pytest.fixture
def kueue_teams(kubesim_kueue, tmp_path, monkeypatch):
    """The API client of a fresh kubesim with Kueue where both teams are set up; the platform file in force."""
    path = tmp_path / "platform.yaml"
    path.write_text(PLATFORM)
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(path))
    kubeconfig = kubesim_kueue.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", kubernetes_connection_uri(kubeconfig))
    api = sync_api_client(kubesim_kueue.url)
    platform = parse_platform(PLATFORM, str(path))
    apply_manifests(Kube(api), platform_team_manifests(platform))
    report = sync_cluster(Kube(api), platform)
    assert report.errors == [], report.errors
    yield api
    api.close()


def workload_of(api, namespace: str, job: str) -> dict | None:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(G, V, namespace, "workloads")["items"]
    return next((w for w in items if any(r["name"] == job for r in w["metadata"].get("ownerReferences") or [])), None)


def condition(obj: dict | None, type_: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


class Lines(logging.Handler):
    """The lines an operator logs (its task log), kept in order."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def logged(op) -> Lines:
    """Give ``op`` a plain logger whose lines are kept (its task log, as the worker would write it)."""
    lines = Lines()
    logger = logging.getLogger(f"skiff.test.{op.task_id}.{id(op)}")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    op._cached_logger = logger   # what BaseOperator.log returns (airflow.sdk dagnode GenericDAGNode.log)
    return lines
