"""Benchmark-only DAG (benchmarks/e2e_watch.py): the provider's ``KubernetesJobOperator(deferrable=True)`` side of
``bench_deferred_many``, written the way a user writes it (the operator's own arguments; it takes no dict
manifest): ``SKIFF_BENCH_DEFERRED_TASKS`` tasks whose Jobs run ``SKIFF_BENCH_JOB_SECONDS`` in kubesim, the same
pod size and the same log lines as the Skiff DAG's.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator
from airflow.sdk import DAG
from kubernetes.client import models as k8s

TASKS = int(os.environ.get("SKIFF_BENCH_DEFERRED_TASKS", "200"))
SECONDS = os.environ.get("SKIFF_BENCH_JOB_SECONDS", "360")
NAMESPACE = "bench-provider"

with DAG("bench_deferred_provider", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         max_active_tasks=TASKS, tags=["skiff-bench"]):
    for i in range(TASKS):
        # wait_until_job_complete: without it deferrable=True does not wait at all (the operator only warns)
        KubernetesJobOperator(task_id=f"job_{i:03d}", namespace=NAMESPACE, image="registry.local/bench:1",
                              cmds=["python", "train.py"], wait_until_job_complete=True, deferrable=True,
                              backoff_limit=0, retries=0,
                              container_resources=k8s.V1ResourceRequirements(
                                  requests={"cpu": "100m", "memory": "128Mi"},
                                  limits={"cpu": "100m", "memory": "128Mi"}),
                              annotations={"kubesim.io/duration": SECONDS, "kubesim.io/log-lines": "5"})
