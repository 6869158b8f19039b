"""A training step that runs out of memory: shows the failure reason and the alert e-mail.

The demo's train.py (``/root/recsys``, see training_recommendation_daily) with a hidden layer of 65,536 units and
batches of 4,096 rows needs about 6 GiB of activations; the step is given 1 GiB, so the kernel's OOM killer ends
it. The task fails with ``OOMKilled ... memory limit of 1Gi`` plus the last log lines, and the owner gets
``[Skiff] training_failure_demo.train_too_big failed: OOMKilled...``.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator, skiff_default_args

with DAG(
    dag_id="training_failure_demo",
    description="A step that exceeds its memory limit, to show Skiff's failure alert",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    # no retries: the point is the alert, straight away
    default_args=skiff_default_args(team="recsys", owner_email="alice@example.com", retries=0),
    tags=["skiff", "training", "demo"],
    doc_md=__doc__,
):
    too_big = TrainingJobOperator(
        task_id="train_too_big",
        image="registry.local/recsys/train:1.4",
        work_dir="/root/recsys",
        exec_command="python -u",
        entry_path="recsys/train.py",
        run_args=["--hidden", "65536", "--batch-size", "4096", "--epochs", "1", "--samples", "8192",
                  "--model-out", "/root/models/too-big"],
        cpu=1,
        memory=1,
        execution_timeout=timedelta(minutes=30),
    )

# ---- not part of the DAG a team copies: on kubesim's scripted nodes (the test stacks'; training_recommendation_daily
# says why) the pod runs 3 s, logs, then dies the way the kernel's OOM killer ends a container. On the demo's process
# nodes and a real cluster the kernel really kills it.
if os.environ.get("SKIFF_KUBESIM_SCRIPTED_NODES") == "1":
    too_big.pod_annotations = {"kubesim.io/duration": "3", "kubesim.io/log-lines": "60", "kubesim.io/exit-code": "137",
                               "kubesim.io/reason": "OOMKilled"}
