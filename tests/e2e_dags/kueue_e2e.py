"""Test-only DAGs for the Kueue end-to-end tests (tests/e2e/training/test_training_kueue_e2e.py), on a stack whose
platform file says ``queueing: kueue``: two teams in one cohort, each 4 GPUs and 8 CPUs of nominal quota.

``kueue_e2e_nlp_borrow``: team nlp's two scheduled steps of 4 GPUs each (its own 4, then recsys' idle 4).
``kueue_e2e_recsys_online``: recsys' online step of 4 GPUs, which reclaims them.
``kueue_e2e_nlp_within_quota``: nlp's scheduled step on its own 8 CPUs. ``kueue_e2e_recsys_cpu``: recsys' scheduled
step on its own 8 CPUs (reclaims what a borrower took). ``kueue_e2e_nlp_page``: two nlp steps borrowing GPUs and a
third that waits in Kueue's queue, for the page.

Durations come from the run's conf (``seconds``) so the test sizes them; the steps run on kubesim
(``kubesim.io/duration``).
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from operators import TrainingJobOperator

SECONDS = "{{ dag_run.conf.get('seconds', 30) }}"
NLP = dict(image="registry.local/nlp/train:1", entry_path="train.py", owner="carol", namespace="nlp",
           cpu=1, memory=1, retries=0)
RECSYS = dict(image="registry.local/recsys/train:1", entry_path="train.py", owner="alice", namespace="recsys",
              cpu=1, memory=1, retries=0)


def _dag(dag_id: str) -> DAG:
    return DAG(dag_id, schedule=None, start_date=datetime(2026, 11, 1), catchup=False, tags=["skiff-e2e"],
               max_active_tasks=8)


def _sim(seconds: str = SECONDS) -> dict[str, str]:
    return {"kubesim.io/duration": seconds, "kubesim.io/log-lines": "3"}


with _dag("kueue_e2e_nlp_borrow"):
    for task_id in ("b1", "b2"):
        TrainingJobOperator(task_id=task_id, gpu=4, pod_annotations=_sim(), **NLP)

with _dag("kueue_e2e_recsys_online"):
    TrainingJobOperator(task_id="a1", gpu=4, online=True, pod_annotations=_sim(), **RECSYS)

with _dag("kueue_e2e_nlp_within_quota"):
    TrainingJobOperator(task_id="scheduled", pod_annotations=_sim(), **{**NLP, "cpu": 8})

with _dag("kueue_e2e_recsys_cpu"):
    TrainingJobOperator(task_id="reclaim", pod_annotations=_sim(), **{**RECSYS, "cpu": 8})

with _dag("kueue_e2e_nlp_page"):
    for task_id in ("p1", "p2", "p3"):
        TrainingJobOperator(task_id=task_id, gpu=4, pod_annotations=_sim(), **NLP)
