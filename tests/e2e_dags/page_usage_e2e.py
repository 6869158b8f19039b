"""Test-only DAG for tests/e2e/ui/test_platform_page_in_browser.py: one training step of alice's in recsys that runs
about two minutes using steady 500m of CPU and 300 MiB (kubesim's scripted usage), so the page shows its use now
and its peak while it runs, then its final peak."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from operators import TrainingJobOperator

USAGE = {"kubesim.io/cpu-usage": "500m", "kubesim.io/memory-usage": "300Mi"}

with DAG("page_usage_e2e", schedule=None, start_date=datetime(2026, 11, 1), catchup=False, tags=["skiff-e2e"]):
    TrainingJobOperator(task_id="steady", image="registry.local/e2e:1", entry_path="train.py", owner="alice",
                        namespace="recsys", cpu=1, memory=1, retries=0,
                        pod_annotations={"kubesim.io/duration": "120", "kubesim.io/log-lines": "3", **USAGE})
