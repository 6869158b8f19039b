"""Daily recommendation model: preprocess (CPU) -> train (GPU, online pool) -> evaluate (CPU).

Written the way an algorithm team writes it: one line of defaults (team queue ``recsys``, retries with
exponential back-off, failure e-mails to the owner), then one ``TrainingJobOperator`` per step.  Each step
runs ``python -u /root/<entry_path> <run_args>`` from the owner's PVC (``alice-home``, mounted at /root): the
scripts in ``/root/recsys`` (on the demo, ``make demo`` puts them there: devstack/demo_home/recsys) make the
day's features, train a small model (numpy) with a checkpoint each epoch in ``$SKIFF_CHECKPOINT_DIR``, and check
it; each step reads what the previous one wrote on the volume. TensorBoard (alice's development instance) shows
``/root/tensorboard``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator, skiff_default_args

DAY = "{{ dag_run.run_after | ds }}"

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
) as dag:
    preprocess = TrainingJobOperator(
        task_id="preprocess",
        image="registry.local/recsys/preprocess:1.4",
        work_dir="/root/recsys",
        exec_command="python -u",
        entry_path="recsys/preprocess.py",
        run_args=["--date", DAY, "--out", f"/root/features/{DAY}"],
        cpu=1,
        memory=2,
        execution_timeout=timedelta(hours=1),
    )

    train = TrainingJobOperator(
        task_id="train",
        image="registry.local/recsys/train-gpu:1.4",
        work_dir="/root/recsys",
        exec_command="python -u",
        entry_path="recsys/train.py",
        run_args=["--features", f"/root/features/{DAY}", "--epochs", "{{ params.epochs }}",
                  "--model-out", f"/root/models/{DAY}", "--tensorboard", f"/root/tensorboard/recsys/{DAY}",
                  # the demo's model trains in a second: slowed to about a minute, to be watched and to be seen
                  # by Prometheus (a step shorter than the metrics' resolution and a scrape or two never is)
                  "--throttle", "0.25"],
        env={"RUN_ID": "{{ run_id }}", "CUDA_VISIBLE_DEVICES": "0"},
        cpu=1,
        memory=2,
        gpu=1,
        online=True,  # production retraining: prefer the online pool, fall back to ordinary GPU nodes
        execution_timeout=timedelta(hours=6),
        termination_grace_period=timedelta(seconds=60),  # time to save a checkpoint when preempted or stopped
    )

    evaluate = TrainingJobOperator(
        task_id="evaluate",
        image="registry.local/recsys/preprocess:1.4",
        work_dir="/root/recsys",
        exec_command="python -u",
        entry_path="recsys/evaluate.py",
        run_args=["--model", f"/root/models/{DAY}", "--min-auc", "0.70"],
        cpu=1,
        memory=2,
        execution_timeout=timedelta(minutes=30),
    )

    preprocess >> train >> evaluate

# ---- not part of the pipeline a team copies: kubesim's scripted nodes (the test stacks') run no process, so there a
# pod's `kubesim.io/*` annotations script its outcome (how long, which lines). devstack sets
# SKIFF_KUBESIM_SCRIPTED_NODES only for such stacks; on the demo's process nodes (kubesim/kubelet/procrt) and on a real
# cluster the steps run the scripts above for real.
if os.environ.get("SKIFF_KUBESIM_SCRIPTED_NODES") == "1":
    for _task, (_seconds, _lines) in {"preprocess": (4, 8), "train": (8, 12), "evaluate": (3, 5)}.items():
        dag.task_dict[_task].pod_annotations = {"kubesim.io/duration": str(_seconds),
                                                "kubesim.io/log-lines": str(_lines)}
