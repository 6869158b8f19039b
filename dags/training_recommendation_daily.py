"""Daily recommendation model: preprocess (CPU) -> train (GPU, online pool) -> evaluate (CPU).

Written the way an algorithm team writes it: one line of defaults (team queue ``recsys``, retries with
exponential back-off, failure e-mails to the owner), then one ``TrainingJobOperator`` per step.  Each step
runs ``python -u /root/<entry_path> <run_args>`` from the owner's PVC (``alice-home``, mounted at /root).

``SIM`` annotations script the step on kubesim (how long it runs, what it logs); a real cluster ignores them.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator, skiff_default_args


def SIM(seconds: float, lines: int) -> dict[str, str]:  # noqa: N802 - reads as a constant at the call site
    return {"kubesim.io/duration": str(seconds), "kubesim.io/log-lines": str(lines)}


with DAG(
    dag_id="training_recommendation_daily",
    description="Daily retraining of the recommendation model",
    schedule="0 3 * * *",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    # a scheduled pipeline queues for the team's quota (an overlapping run may hold the GPU) instead of failing
    default_args=skiff_default_args(team="recsys", owner_email="alice@example.com", quota_wait=timedelta(hours=2),
                                    pool="skiff-recsys"),  # the team's pool (platform file): queue in Airflow
    params={"epochs": 3},
    tags=["skiff", "training", "recsys"],
    doc_md=__doc__,
):
    preprocess = TrainingJobOperator(
        task_id="preprocess",
        image="registry.local/recsys/preprocess:1.4",
        work_dir="/root/recsys",
        entry_path="recsys/preprocess.py",
        run_args=["--date", "{{ dag_run.run_after | ds }}", "--out", "/root/features/{{ dag_run.run_after | ds }}"],
        cpu=1,
        memory=2,
        execution_timeout=timedelta(hours=1),
        pod_annotations=SIM(4, 8),
    )

    train = TrainingJobOperator(
        task_id="train",
        image="registry.local/recsys/train-gpu:1.4",
        work_dir="/root/recsys",
        exec_command="python -u",
        entry_path="recsys/train.py",
        run_args=["--features", "/root/features/{{ dag_run.run_after | ds }}", "--epochs", "{{ params.epochs }}",
                  "--model-out", "/root/models/{{ dag_run.run_after | ds }}"],
        env={"RUN_ID": "{{ run_id }}", "CUDA_VISIBLE_DEVICES": "0"},
        cpu=1,
        memory=2,
        gpu=1,
        online=True,  # production retraining: prefer the online pool, fall back to ordinary GPU nodes
        execution_timeout=timedelta(hours=6),
        pod_annotations=SIM(8, 12),
    )

    evaluate = TrainingJobOperator(
        task_id="evaluate",
        image="registry.local/recsys/preprocess:1.4",
        work_dir="/root/recsys",
        entry_path="recsys/evaluate.py",
        run_args=["--model", "/root/models/{{ dag_run.run_after | ds }}", "--min-auc", "0.70"],
        cpu=1,
        memory=2,
        execution_timeout=timedelta(minutes=30),
        pod_annotations=SIM(3, 5),
    )

    preprocess >> train >> evaluate
