"""Test-only DAG for tests/e2e/metrics/test_metrics_e2e.py: one training step that succeeds and one that the
kernel's OOM killer ends (kubesim's scripted outcome), so the StatsD counters of both outcomes are sent."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from operators import TrainingJobOperator

COMMON = dict(image="registry.local/e2e:1", entry_path="train.py", owner="alice", namespace="recsys",
              cpu=0.5, memory=0.5, retries=0)

with DAG("metrics_e2e", schedule=None, start_date=datetime(2026, 11, 1), catchup=False, tags=["skiff-e2e"]):
    TrainingJobOperator(task_id="succeeds", pod_annotations={"kubesim.io/duration": "2"}, **COMMON)
    TrainingJobOperator(task_id="oom_killed", pod_annotations={
        "kubesim.io/duration": "2", "kubesim.io/exit-code": "137", "kubesim.io/reason": "OOMKilled"}, **COMMON)
