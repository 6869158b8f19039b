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
# A try running on the worker when the harness SIGKILLs it is lost (Airflow fails it on heartbeat timeout), and
# the worker is killed up to once a minute: a task that must succeed gets enough retries to outlive the kills it
# can meet (one 10-minute soak lost ok_11 with 2: its three tries were each on the worker at a kill). Expected
# failures fail whatever their retries; more tries would only add failing Jobs.
RETRIES = {"ok": 4, "exit": 2, "oom": 2, "quota": 4}

with DAG("soak_training", schedule=None, start_date=datetime(2026, 11, 1), catchup=False, max_active_runs=8,
         tags=["skiff-soak"]):
    for i in range(TASKS):
        kind = ORDER[i % len(ORDER)]
        annotations, extra = OUTCOMES[kind]
        TrainingJobOperator(task_id=f"{kind}_{i}", image="registry.local/soak:1", entry_path="train.py",
                            owner="alice", namespace="recsys", pod_annotations=annotations,
                            retries=RETRIES[kind], retry_delay=timedelta(seconds=2), **{"cpu": 0.5, "memory": 0.5, **extra})
