"""Test-only DAGs for the training e2e tests (real scheduler, triggerer and task_state_store).

``training_e2e_crash``: each task's worker process dies (SIGKILL, no cleanup) on try 1, once after the Job id
was saved in task_state_store and once in the gap between creating the Job and saving its id; try 2 must
reattach to the same Job; and once right after the Job succeeded and was marked reported, before Airflow stored
the success: try 2 must finish on that Job without training again (issue 18, class 8).  ``training_e2e_kill``: a long Job, for killing the deferred task from the API.
``training_e2e_failover``: deferred Jobs of two lengths, for killing the triggerer that watches them (some end
while no triggerer watches, some after another triggerer took over).
"""

from __future__ import annotations

import os
import signal
from datetime import datetime, timedelta

from airflow.sdk import DAG

from operators import TrainingJobOperator


class CrashAfterSave(TrainingJobOperator):
    def poll_until_complete(self, external_id, context):
        if context["ti"].try_number == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # the Job exists and its id is in task_state_store
        return super().poll_until_complete(external_id, context)


class CrashBeforeSave(TrainingJobOperator):
    def submit_job(self, context):
        ref = super().submit_job(context)
        if context["ti"].try_number == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # created, but the mixin never gets to save its id
        return ref


class CrashAfterSuccess(TrainingJobOperator):
    def get_job_result(self, external_id, context):
        result = super().get_job_result(external_id, context)  # the Job succeeded and is annotated reported
        if context["ti"].try_number == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # before the task runner tells the API server SUCCESS
        return result


COMMON = dict(image="registry.local/e2e:1", entry_path="train.py", owner="alice", namespace="recsys",
              cpu=0.5, memory=0.5, retries=1, retry_delay=timedelta(seconds=1))

with DAG("training_e2e_crash", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         tags=["skiff-e2e"]):
    CrashAfterSave(task_id="crash_after_save", pod_annotations={"kubesim.io/duration": "12"}, **COMMON)
    CrashBeforeSave(task_id="crash_before_save", deferrable=False,
                    pod_annotations={"kubesim.io/duration": "12"}, **COMMON)
    CrashAfterSuccess(task_id="crash_after_success", pod_annotations={"kubesim.io/duration": "3"}, **COMMON)

with DAG("training_e2e_kill", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         tags=["skiff-e2e"]):
    TrainingJobOperator(task_id="long_training", pod_annotations={"kubesim.io/duration": "600",
                                                                 "kubesim.io/log-lines": "600"}, **COMMON)

with DAG("training_e2e_failover", schedule=None, start_date=datetime(2026, 11, 1), catchup=False,
         tags=["skiff-e2e"]):
    for i, seconds in enumerate((20, 20, 75, 75)):
        TrainingJobOperator(task_id=f"deferred_{i}_{seconds}s",
                            pod_annotations={"kubesim.io/duration": str(seconds), "kubesim.io/log-lines": "20"},
                            **{**COMMON, "retries": 0})
