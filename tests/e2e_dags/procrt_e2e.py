"""Test-only DAG for tests/e2e/training/test_training_procrt_e2e.py: on the demo's process nodes (kubesim/kubelet/procrt) the
argv Skiff builds (``bash -ic 'cd -- "$1" && shift && exec "$@"' ...``) really runs; this step prints two lines
and exits 3, so its task must fail with exit code 3 and its own output."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator, skiff_default_args

with DAG(
    dag_id="procrt_e2e_exit3",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    default_args=skiff_default_args(team="recsys", owner_email="alice@example.com", retries=0),
    tags=["skiff", "test"],
):
    TrainingJobOperator(
        task_id="exit3",
        image="registry.local/recsys/train:1.4",
        work_dir="/root",
        exec_command=["bash", "-c", "echo first real line; echo \"second from $(hostname)\"; exit 3"],
        entry_path=None,
        cpu=1,
        memory=1,
        execution_timeout=timedelta(minutes=10),
    )
