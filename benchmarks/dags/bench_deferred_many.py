"""Benchmark-only DAG (benchmarks/prod_profile.py): many deferred training tasks at once.

``SKIFF_BENCH_DEFERRED_TASKS`` tasks (default 200), each a TrainingJobOperator whose Job runs
``SKIFF_BENCH_JOB_SECONDS`` (default 360) in kubesim, long enough for all of them to be deferred together.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from operators import TrainingJobOperator

TASKS = int(os.environ.get("SKIFF_BENCH_DEFERRED_TASKS", "200"))
SECONDS = os.environ.get("SKIFF_BENCH_JOB_SECONDS", "360")

with DAG("bench_deferred_many", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         max_active_tasks=TASKS, tags=["skiff-bench"]):
    for i in range(TASKS):
        TrainingJobOperator(task_id=f"train_{i:03d}", image="registry.local/bench:1", entry_path="train.py",
                            owner="bench", namespace="bench", cpu=0.1, memory=0.125, retries=0,
                            pod_annotations={"kubesim.io/duration": SECONDS, "kubesim.io/log-lines": "5"})
