"""The Kueue part of the demo (``make demo KUEUE=1``: ``python -m devstack demo --kueue``), loaded only then.

The platform file is the example switched to ``queueing: kueue`` (``devstack.demo_setup.kueue_platform_text``):
the gpu flavor holds recsys' 2 GPUs and nlp's 1, in one cohort.

``kueue_demo_nlp_borrow``: carol's (nlp) scheduled training on 3 GPUs: its own 1 and recsys' 2 idle ones,
borrowed. It trains the demo's model from carol's home with a checkpoint each epoch (``$SKIFF_CHECKPOINT_DIR``).
``kueue_demo_recsys_online``: alice's (recsys) online step on 1 GPU: the cohort has none free, so Kueue reclaims
recsys' lent GPUs by preempting nlp's borrower (``reclaimWithinCohort: Any``); nlp's process gets SIGTERM, saves,
is suspended, and when recsys' step ends Kueue admits it again and it resumes from its checkpoint. The online step
takes about 25 s (2 epochs, throttled like a real one: it did not finish in 1 s either), so the borrower is seen
waiting, suspended: its row on the page says "preempted, waiting for GPUs".
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator

TRAIN = dict(work_dir="/root/recsys", exec_command="python -u", entry_path="recsys/train.py", cpu=1, memory=2,
             retries=0, execution_timeout=timedelta(hours=1), termination_grace_period=timedelta(seconds=60))

with DAG("kueue_demo_nlp_borrow", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         params={"epochs": 8, "throttle": 0.15}, tags=["skiff", "kueue-demo", "nlp"], doc_md=__doc__) as nlp_borrow:
    TrainingJobOperator(task_id="train", image="registry.local/nlp/train-gpu:1", owner="carol", namespace="nlp",
                        gpu=3, run_args=["--epochs", "{{ params.epochs }}", "--model-out", "/root/models/{{ run_id }}",
                                         "--throttle", "{{ params.throttle }}"], **TRAIN)

with DAG("kueue_demo_recsys_online", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         params={"epochs": 2, "throttle": 0.15}, tags=["skiff", "kueue-demo", "recsys"],
         doc_md=__doc__) as recsys_online:
    TrainingJobOperator(task_id="train", image="registry.local/recsys/train-gpu:1.4", owner="alice",
                        namespace="recsys", gpu=1, online=True,
                        run_args=["--epochs", "{{ params.epochs }}", "--model-out", "/root/models/{{ run_id }}",
                                  "--throttle", "{{ params.throttle }}"], **TRAIN)
