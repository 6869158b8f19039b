"""End to end under a real Airflow (scheduler, triggerer, dag-processor, api-server) and kubesim.

The pipeline, alert and crash scenarios run on both profiles: ``airflow standalone`` with SQLite, and the
production profile (PostgreSQL, CeleryExecutor on Redis, two schedulers, two triggerers; marked ``prod``). Both
run kubesim enforcing RBAC with Airflow as Skiff's ServiceAccount (tests/e2e/rbac/test_rbac_e2e.py): the deferred
pipeline and the failing run must be refused nothing.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from devstack.testing import profile_params
from kubesim.testing import wait_until
from tests.support.rbac.scenarios import stack_skiff_denials

pytestmark = [pytest.mark.e2e]
NAMESPACE = "recsys"


@pytest.fixture(scope="module", params=profile_params())
def stack(request):
    """The session's stack of each profile, with the demo team's ``recsys`` queue and alice's default PVC."""
    return request.getfixturevalue("team_stack" if request.param == "standalone" else "prod_team_stack")


def _jobs(stack, task_id: str) -> list:
    return [j for j in client.BatchV1Api(stack.k8s()).list_namespaced_job(NAMESPACE).items
            if j.metadata.labels.get("skiff.io/task-id") == task_id]


# Both profiles once failed here (the pod lines went into another task's log): the triggerer routes a trigger's
# log lines by contextvars, and the log streams were started from the shared informer's task, which carries the
# context of the trigger that started it. tests/integration/training/test_training_shared_watch.py pins the cause.
@pytest.mark.parametrize("stack", ["standalone", pytest.param("prod", marks=pytest.mark.prod)], indirect=True)
def test_example_pipeline_succeeds_deferred_with_pod_logs_in_the_task_log(stack):
    denied = len(stack_skiff_denials(stack))
    run_id = stack.trigger("training_recommendation_daily")
    assert stack.wait_run("training_recommendation_daily", run_id, timeout=240) == "success"
    log = stack.task_log("training_recommendation_daily", run_id, "train")
    # streamed live by the trigger into its own log file (a source of the task log), prefixed with the pod
    assert ".log.trigger." in log and "] line 1\n" in log, log[-3000:]
    # and the very end of the pod's log, always: the worker writes the event's last lines (the triggerer may drop
    # the last lines of a trigger that fires right after them), not the whole tail again (issue 36)
    assert "The pods' last 3 log lines" in log and "\nline 12\n" in log and "Last 12 log lines" not in log
    assert "Job recsys/" in log and "succeeded" in log
    assert stack_skiff_denials(stack)[denied:] == []  # watches, live logs, Jobs: nothing refused under RBAC


def test_failure_sends_the_alert_with_the_reason(stack):
    denied = len(stack_skiff_denials(stack))
    run_id = stack.trigger("training_failure_demo")
    assert stack.wait_run("training_failure_demo", run_id, timeout=180) == "failed"
    subject = "[Skiff] training_failure_demo.train_too_big failed: OOMKilled"
    mail = wait_until(lambda: next((m for m in stack.mails() if m["Subject"].startswith(subject)), None), 60, 0.5,
                      what="alert")
    body = mail.get_body(("html", "plain")).get_content()
    assert "line 60" in body and "train_too_big" in body and "/dags/training_failure_demo/" in body
    assert stack_skiff_denials(stack)[denied:] == []  # events, Job deletion, the alert: nothing refused under RBAC


def test_worker_crash_then_retry_reattaches_to_the_same_job(stack):
    run_id = stack.trigger("training_e2e_crash")
    assert stack.wait_run("training_e2e_crash", run_id, timeout=240) == "success"
    tis = {ti["task_id"]: ti for ti in stack.task_instances("training_e2e_crash", run_id)}
    for task_id in ("crash_after_save", "crash_before_save"):
        assert tis[task_id]["try_number"] == 2  # try 1 really died
        jobs = [j for j in _jobs(stack, task_id) if j.metadata.annotations["skiff.io/run-id"] == run_id]
        assert len(jobs) == 1, [j.metadata.name for j in jobs]  # try 2 created nothing
        assert jobs[0].metadata.name.endswith("-t1") and jobs[0].status.succeeded == 1
    # killed after its Job succeeded and was marked reported, before Airflow stored SUCCESS: the retry
    # finished on that Job (it found the id still stored: [state_store] clear_on_success) and trained nothing
    assert tis["crash_after_success"]["try_number"] == 2
    (job,) = [j for j in _jobs(stack, "crash_after_success") if j.metadata.annotations["skiff.io/run-id"] == run_id]
    assert job.metadata.name.endswith("-t1") and job.metadata.annotations["skiff.io/success-reported-by-try"] == "2"


def test_killing_the_deferred_task_deletes_the_job(team_stack):
    stack = team_stack
    run_id = stack.trigger("training_e2e_kill")
    k8s = stack.k8s()

    def running_job():
        for job in _jobs(stack, "long_training"):
            if (job.status.active or 0) > 0:
                return job
        return None

    job = wait_until(running_job, 120, 0.5, what="the long Job running")
    # on_kill reaches a trigger a triggerer runs; a kill before any triggerer picked it up cannot (Airflow)
    wait_until(lambda: next((ti for ti in stack.task_instances("training_e2e_kill", run_id)
                             if ti["state"] == "deferred" and ti.get("triggerer_job")), None), 120, 0.5,
               what="the task deferred and its trigger running")
    stack.api("PATCH", f"/api/v2/dags/training_e2e_kill/dagRuns/{run_id}/taskInstances/long_training",
              {"new_state": "failed"})

    def gone():
        try:
            client.BatchV1Api(k8s).read_namespaced_job(job.metadata.name, NAMESPACE)
        except ApiException as exc:
            return exc.status == 404
        return False

    # the triggerer sees the kill at its next trigger sync; under load (4 busy loops) that took over 60 s
    wait_until(gone, 180, 0.5, what="the Job deleted by the trigger's on_kill")
