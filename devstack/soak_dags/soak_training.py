"""The soak's training DAG (``devstack/soak.py``): TASKS TrainingJobOperator tasks whose pods kubesim scripts
(``kubesim.io/*`` annotations) to one of four outcomes, named by the task id's prefix so the auditor knows
what each should end as: ``ok_`` (succeeds), ``exit_`` (exit code 3: fails), ``oom_`` (OOMKilled: fails),
``quota_`` (asks 3 cpu of recsys's 8, so some wait for quota, then succeed)."""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator

TASKS = 25
OUTCOMES = {  # prefix -> (pod annotations, extra operator arguments)
    "ok": ({"kubesim.io/duration": "8", "kubesim.io/log-lines": "5"}, {}),
    "exit": ({"kubesim.io/duration": "3", "kubesim.io/exit-code": "3"}, {}),
    "oom": ({"kubesim.io/duration": "3", "kubesim.io/exit-code": "137", "kubesim.io/reason": "OOMKilled"}, {}),
    "quota": ({"kubesim.io/duration": "10"}, {"cpu": 3, "quota_wait": None}),
}
ORDER = ["ok", "ok", "exit", "oom", "quota"]
EXPECTED = {"ok": "success", "exit": "failed", "oom": "failed", "quota": "success"}

with DAG("soak_training", schedule=None, start_date=datetime(2026, 11, 1), catchup=False, max_active_runs=8,
         tags=["skiff-soak"]):
    for i in range(TASKS):
        kind = ORDER[i % len(ORDER)]
        annotations, extra = OUTCOMES[kind]
        TrainingJobOperator(task_id=f"{kind}_{i}", image="registry.local/soak:1", entry_path="train.py",
                            owner="alice", namespace="recsys", pod_annotations=annotations,
                            retries=2, retry_delay=timedelta(seconds=2), **{"cpu": 0.5, "memory": 0.5, **extra})
