"""Data-parallel training of the recommendation model: the same model trained on 1 worker, then on 2 workers at
once (one step, two pods), then compared: the speed-up and the same validation AUC.

``workers=2`` makes the step one Indexed Job of two pods started together, each told its rank and rank 0's
address (SKIFF_RANK, SKIFF_MASTER_ADDR..., docs/user-guide.md); the exchange of gradients is the script's own
code (``/root/recsys/train_dp.py``: each rank computes the gradient of its half of every batch, rank 0 adds them
up over TCP and sends the sum back). ``--throttle`` stands in for a real model's accelerator time per batch,
which the workers share; numpy on the demo's tiny model is too fast to gain from two pods by itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator, skiff_default_args

DAY = "{{ dag_run.run_after | ds }}"
TRAIN = ["--epochs", "2", "--samples", "20000", "--throttle", "0.02"]

with DAG(
    dag_id="training_data_parallel",
    description="The recommendation model on 1 and on 2 workers: speed-up and accuracy",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    default_args=skiff_default_args(team="recsys", owner_email="alice@example.com", quota_wait=timedelta(hours=1),
                                    pool="skiff-recsys"),
    tags=["skiff", "training", "recsys", "distributed"],
    doc_md=__doc__,
) as dag:
    one = TrainingJobOperator(
        task_id="train_one_worker", image="registry.local/recsys/train:1.4", work_dir="/root/recsys",
        exec_command="python -u", entry_path="recsys/train_dp.py",
        run_args=[*TRAIN, "--model-out", f"/root/models/dp/{DAY}/one"], cpu=1, memory=1,
        execution_timeout=timedelta(hours=1))
    two = TrainingJobOperator(
        task_id="train_two_workers", image="registry.local/recsys/train:1.4", work_dir="/root/recsys",
        exec_command="python -u", entry_path="recsys/train_dp.py",
        run_args=[*TRAIN, "--model-out", f"/root/models/dp/{DAY}/two"], cpu=1, memory=1, workers=2,
        execution_timeout=timedelta(hours=1))
    compare = TrainingJobOperator(
        task_id="compare", image="registry.local/recsys/preprocess:1.4", work_dir="/root/recsys",
        exec_command="python -u", entry_path="recsys/compare.py",
        run_args=["--one", f"/root/models/dp/{DAY}/one", "--many", f"/root/models/dp/{DAY}/two"], cpu=0.5,
        memory=0.5, execution_timeout=timedelta(minutes=10))

    one >> two >> compare
