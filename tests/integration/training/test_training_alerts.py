"""Failure alerts arrive at a real SMTP server with the reason in the subject; a DAG run succeeds with dag.test()."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from operators import SkiffAlert, TrainingJobFailed, skiff_default_args
from tests.support.training.training_support import NAMESPACE, make_context, operator, sim

DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_failure_email_names_the_reason_and_carries_the_log_tail(k8s, team, smtp_sink):
    ctx = make_context("train_too_big", 1)
    ctx["ti"].log_url = "http://localhost:8080/dags/training_tests/runs/r/tasks/train_too_big?try_number=1"
    with pytest.raises(TrainingJobFailed) as err:
        operator("train_too_big", pod_annotations=sim(0.3, lines=60, exit_code=137, reason="OOMKilled")).execute(ctx)
    ctx["exception"] = err.value
    alert = skiff_default_args(team=NAMESPACE, owner_email="alice@example.com")["on_failure_callback"]
    assert isinstance(alert, SkiffAlert)
    alert(ctx)
    msg = smtp_sink.wait_for(lambda m: "train_too_big" in m["Subject"], timeout=10)
    assert msg["Subject"].startswith("[Skiff] training_tests.train_too_big failed: OOMKilled")
    assert msg["To"] == "alice@example.com"
    body = msg.get_body(("html", "plain")).get_content()
    assert "line 60" in body and "line 11" in body and "line 10<" not in body  # the last 50 lines
    assert "Try</th><td>1" in body and ctx["ti"].log_url in body


def test_the_example_pipeline_succeeds_with_dag_test(k8s, team, airflow_db, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SKIFF__DEFER_RESUME_GUARD_SECONDS", "0")  # dag.test() has no defer race
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS / "training_recommendation_daily.py")).dags["training_recommendation_daily"]
    run = dag.test()  # deferrable tasks: dag.test() runs the trigger in-process
    assert run.state == "success"
    jobs = client.BatchV1Api(k8s).list_namespaced_job(NAMESPACE).items
    assert sorted(j.metadata.labels["skiff.io/task-id"] for j in jobs) == ["evaluate", "preprocess", "train"]
    assert all(j.status.succeeded == 1 for j in jobs)
    train = next(j for j in jobs if j.metadata.labels["skiff.io/task-id"] == "train")
    pods = client.CoreV1Api(k8s).list_namespaced_pod(NAMESPACE, label_selector=f"skiff.io/job-name={train.metadata.name}")
    assert pods.items[0].spec.node_name.startswith("gpu-")  # no GPU node is in the online pool: fallback
