"""``make demo KUEUE=1`` (``python -m devstack demo --kueue``), without starting Airflow: its platform file (the
example switched to ``queueing: kueue``) loads and platform_sync applies it on kubesim with Kueue; the Kueue demo's
DAGs parse; and their two steps, run through the operator's execute() on kubesim's scripted nodes, do what the demo
shows: nlp's 3-GPU step borrows recsys' 2 idle GPUs, recsys' online 1-GPU step makes Kueue preempt it, and it is
admitted again and succeeds on the same Job, its log saying "preempted" and "resumed". (The same path on real
processes - SIGTERM, checkpoint, same model - is test_training_preemption_on_processes.py; the full demo with
Airflow is not run here.)"""
from __future__ import annotations

import importlib.util
import threading

from kubernetes import client

from devstack.airflow_env import REPO, kubernetes_connection_uri
from devstack.demo_setup import kueue_example_text
from kubesim.testing import sync_api_client, wait_until
from operators.k8s import Kube
from operators.platform import parse_platform
from operators.platform.sync import sync_cluster
from operators.rbac import apply_manifests, platform_team_manifests
from tests.support.training.kueue_support import logged
from tests.support.training.training_support import make_context, sim

DEMO_DAGS = REPO / "devstack" / "demo_dags" / "kueue_demo.py"


def demo_dags():
    spec = importlib.util.spec_from_file_location("kueue_demo_dags", DEMO_DAGS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from airflow.sdk import DAG
    return {d.dag_id: d for d in vars(module).values() if isinstance(d, DAG)}


def step(dag, seconds: float):
    """The DAG's train step, as the worker runs it on kubesim's scripted nodes (its arguments rendered)."""
    op = dag.task_dict["train"]
    op.deferrable, op.pod_annotations = False, sim(seconds)
    op.run_args = ["--epochs", "1", "--model-out", "/root/models/x"]
    return op


def test_the_kueue_demo_platform_applies_and_its_borrower_is_preempted_and_resumes(kubesim_kueue, tmp_path,
                                                                                 monkeypatch):
    text = kueue_example_text()
    path = tmp_path / "platform.yaml"
    path.write_text(text)
    platform = parse_platform(text, str(path))
    assert platform.queueing == "kueue"
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(path))
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT",
                       kubernetes_connection_uri(kubesim_kueue.write_kubeconfig(tmp_path / "kubeconfig")))
    api = sync_api_client(kubesim_kueue.url)
    apply_manifests(Kube(api), platform_team_manifests(platform))     # the cluster admin's step
    report = sync_cluster(Kube(api), platform)
    assert report.errors == []
    cqs = client.CustomObjectsApi(api).list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")
    gpus = {cq["metadata"]["name"]: {f["name"]: r["nominalQuota"] for f in cq["spec"]["resourceGroups"][0]["flavors"]
                                     for r in f["resources"] if r["name"] == "nvidia.com/gpu"}
            for cq in cqs["items"]}
    assert gpus["recsys"]["gpu"] in (2, "2") and gpus["nlp"]["gpu"] in (1, "1")   # what the demo says

    dags = demo_dags()
    borrower, online = step(dags["kueue_demo_nlp_borrow"], 20), step(dags["kueue_demo_recsys_online"], 1)
    lines = logged(borrower)
    result = {}
    thread = threading.Thread(target=lambda: result.update(out=borrower.execute(make_context("train", dag_id="b"))),
                              daemon=True)
    thread.start()
    batch = client.BatchV1Api(api)
    job = wait_until(lambda: next((j for j in batch.list_namespaced_job("nlp").items
                                   if not j.spec.suspend and (j.status.active or 0) > 0), None), timeout=60,
                     what="nlp's 3-GPU step admitted (2 GPUs borrowed) and running")
    from types import SimpleNamespace

    from devstack.demo_kueue import _gpu_shares
    def borrowing() -> str | None:
        text = _gpu_shares(SimpleNamespace(k8s=lambda: api))
        return text if "nlp: 3 of 1 used, 2 borrowed" in text else None
    shares = wait_until(borrowing, timeout=30, what="the borrowing counted")
    assert "recsys: 0 of 2 used, 0 borrowed, 2 lent" in shares      # the line the demo prints, as the page's cards
    assert online.execute(make_context("train", dag_id="o"))["namespace"] == "recsys"
    thread.join(120)
    assert not thread.is_alive() and result["out"]["name"] == job.metadata.name     # the same Job, resumed
    assert lines.has(f"Job nlp/{job.metadata.name} was preempted by Kueue at")
    assert lines.has(f"Job nlp/{job.metadata.name} resumed: Kueue admitted it again after 1 preemption(s)")
    assert lines.has(f"Job nlp/{job.metadata.name} succeeded after 1 preemption(s) by Kueue")
    api.close()
