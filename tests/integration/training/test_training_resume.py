"""Crash safety and the deferrable path: reattach after a worker crash, adopt by labels, no rerun, new try."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.sdk.exceptions import TaskDeferred
from kubernetes import client

from kubesim.testing import wait_until
from operators import TrainingJobFailed
from operators.training.naming import LABEL_JOB
from tests.support.training.training_support import (
    NAMESPACE,
    JsonFileTaskStateStore,
    make_context,
    operator,
    sim,
)

SUPPORT = Path(__file__).resolve().parents[3] / "tests/support/training/training_support.py"


def jobs(k8s) -> list:
    return client.BatchV1Api(k8s).list_namespaced_job(NAMESPACE).items


def running_pod(k8s) -> bool:
    for job in jobs(k8s):
        for pod in client.CoreV1Api(k8s).list_namespaced_pod(
                NAMESPACE, label_selector=f"{LABEL_JOB}={job.metadata.name}").items:
            if pod.status.phase == "Running":
                return True
    return False


def crash_worker_after_submit(k8s, tmp_path, *, store: Path | None, seconds: float) -> None:
    """Run try 1 in a worker process, SIGKILL it once its Job's pod runs (no cleanup, like an OOM-killed worker)."""
    spec = {"try": 1, "seconds": seconds, "store": str(store) if store else None}
    proc = subprocess.Popen([sys.executable, str(SUPPORT), json.dumps(spec)], env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: running_pod(k8s) or proc.poll() is not None, timeout=60)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        if store:
            wait_until(store.exists, timeout=10)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)


@pytest.mark.parametrize("with_store", [True, False], ids=["task_state_store", "label-lookup-only"])
def test_retry_after_worker_crash_reattaches_to_the_same_job(k8s, team, tmp_path, with_store):
    store = tmp_path / "state.json" if with_store else None
    crash_worker_after_submit(k8s, tmp_path, store=store, seconds=4)
    (job,) = jobs(k8s)
    uid = job.metadata.uid
    # try 2 on another worker: same task instance, the Job of try 1 is still running
    result = operator(pod_annotations=sim(4)).execute(
        make_context("train", 2, JsonFileTaskStateStore(store) if store else None))
    assert result["uid"] == uid
    (job,) = jobs(k8s)  # still exactly one Job: nothing was created for try 2
    assert job.metadata.uid == uid and job.status.succeeded == 1


def test_job_that_succeeded_while_the_worker_was_dead_is_not_rerun(k8s, team, tmp_path):
    store = tmp_path / "state.json"
    crash_worker_after_submit(k8s, tmp_path, store=store, seconds=1.5)
    wait_until(lambda: jobs(k8s)[0].status.succeeded == 1, timeout=20)  # finished with nobody watching
    (job,) = jobs(k8s)
    again = operator(pod_annotations=sim(0.3)).execute(make_context("train", 2, JsonFileTaskStateStore(store)))
    assert again["uid"] == job.metadata.uid and len(jobs(k8s)) == 1


@pytest.fixture
def clear_on_success(monkeypatch):
    """Skiff's deployments (devstack, deploy/helm/values.yaml) set Airflow's ``[state_store] clear_on_success``."""
    monkeypatch.setenv("AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS", "True")


def test_clearing_a_successful_task_trains_again_and_a_failed_try_is_replaced(k8s, team, tmp_path, clear_on_success):
    store = JsonFileTaskStateStore(tmp_path / "state.json")
    first = operator(pod_annotations=sim(0.3)).execute(make_context("train", 1, store))
    store.clear()  # Airflow stored SUCCESS (and with it cleared the task's keys); then the user cleared the task
    rerun = operator(pod_annotations=sim(0.3)).execute(make_context("train", 2, store))
    assert rerun["uid"] != first["uid"] and rerun["name"].endswith("-t2")

    store2 = JsonFileTaskStateStore(tmp_path / "state2.json")
    with pytest.raises(TrainingJobFailed, match="exit code 1"):
        operator("flaky", pod_annotations=sim(0.3, exit_code=1)).execute(make_context("flaky", 1, store2))
    retried = operator("flaky", pod_annotations=sim(0.3)).execute(make_context("flaky", 2, store2))
    flaky = sorted(j.metadata.name for j in jobs(k8s) if "flaky" in j.metadata.name)
    assert len(flaky) == 2 and flaky[1].endswith("-t2") and retried["name"] == flaky[1]


def test_a_crash_after_the_success_was_reported_but_before_airflow_stored_it_does_not_train_again(
        k8s, team, tmp_path, clear_on_success):
    """Issue 18 class 8: try 1 saw its Job succeed and annotated it reported, then its worker died before the
    API server stored SUCCESS, so the task's keys were not cleared: try 2 must finish on that Job."""
    store = JsonFileTaskStateStore(tmp_path / "state.json")
    first = operator(pod_annotations=sim(0.3)).execute(make_context("train", 1, store))  # no store.clear(): crashed
    (job,) = jobs(k8s)
    assert job.metadata.annotations["skiff.io/success-reported-by-try"] == "1"
    again = operator(pod_annotations=sim(0.3)).execute(make_context("train", 2, store))
    assert again["uid"] == first["uid"] and len(jobs(k8s)) == 1


def test_without_clear_on_success_a_reported_job_is_not_reused(k8s, team, tmp_path, monkeypatch):
    """With the option off a stored id no longer tells a crash from a clear: the annotation decides (the
    documented fallback, which re-trains after such a crash rather than skip a re-run the user asked for)."""
    monkeypatch.setenv("AIRFLOW__STATE_STORE__CLEAR_ON_SUCCESS", "False")
    store = JsonFileTaskStateStore(tmp_path / "state.json")
    first = operator(pod_annotations=sim(0.3)).execute(make_context("train", 1, store))
    again = operator(pod_annotations=sim(0.3)).execute(make_context("train", 2, store))
    assert again["uid"] != first["uid"] and len(jobs(k8s)) == 2


async def _run_deferred(op, context):
    """What the worker + triggerer do: execute -> defer -> trigger.run() -> execute_complete."""
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(context)
    trigger = deferred.value.trigger
    classpath, kwargs = trigger.serialize()
    assert classpath == "operators.training.trigger.TrainingJobTrigger"
    rebuilt = type(trigger)(**kwargs)  # the triggerer rebuilds it from the serialized kwargs
    events = [event async for event in rebuilt.run()]
    assert len(events) == 1
    return deferred.value, events[0].payload


async def test_deferrable_success_and_failure(k8s, team, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW__SKIFF__DEFER_RESUME_GUARD_SECONDS", "0")
    from structlog.testing import capture_logs

    op = operator("deferred", deferrable=True, pod_annotations=sim(0.5, lines=6))
    ctx = make_context("deferred", 1, JsonFileTaskStateStore(tmp_path / "s.json"))
    deferred, payload = await _run_deferred(op, ctx)
    assert deferred.method_name == "execute_complete"
    assert payload["status"] == "success" and payload["log_tail"] == [f"line {i}" for i in range(1, 7)]
    with capture_logs() as logs:
        assert op.execute_complete(ctx, payload)["uid"] == jobs(k8s)[0].metadata.uid
    # the streamed lines are not repeated whole (issue 36: "Last 21 log lines"): only the very end, folded
    said = [entry["event"] for entry in logs]
    assert said[1:4] == ["line 4", "line 5", "line 6"] and "line 3" not in said, said
    assert said[0].startswith("::group::The pods' last 3 log lines"), said

    bad = operator("deferred-oom", deferrable=True, pod_annotations=sim(0.3, exit_code=137, reason="OOMKilled"))
    ctx = make_context("deferred-oom", 1, JsonFileTaskStateStore(tmp_path / "s2.json"))
    _, payload = await _run_deferred(bad, ctx)
    with capture_logs() as logs, pytest.raises(TrainingJobFailed, match="OOMKilled"):
        bad.execute_complete(ctx, payload)
    # the reason on a line of its own, before the traceback (issue 36: it sat at the traceback's end)
    failed = [e for e in logs if e["log_level"] == "error"]
    assert failed and failed[0]["event"].startswith("Training Job ") and ": OOMKilled" in failed[0]["event"], logs


async def test_an_early_event_is_held_until_not_before(k8s, team, tmp_path, monkeypatch):
    import time

    monkeypatch.setenv("AIRFLOW__SKIFF__DEFER_RESUME_GUARD_SECONDS", "3")
    op = operator("guarded", deferrable=True, pod_annotations=sim(0.1))
    deferred, payload = await _run_deferred(op, make_context("guarded", 1, JsonFileTaskStateStore(tmp_path / "g.json")))
    handed_back = time.time()
    assert payload["status"] == "success"
    # measured against the trigger's own guard, not the test's start: seen before it ended, handed back after
    assert payload["noticed_at"] < deferred.trigger.not_before <= handed_back


def test_trigger_timeout_deletes_the_job_and_fails_the_try(k8s, team, tmp_path):
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import TaskDeferralTimeout

    op = operator("timeout", deferrable=True, pod_annotations=sim(120))
    ctx = make_context("timeout", 1, JsonFileTaskStateStore(tmp_path / "t.json"))
    with pytest.raises(TaskDeferred):
        op.execute(ctx)
    (job,) = jobs(k8s)
    # a trigger that crashed leaves the Job running (the retry reattaches to it) ...
    from airflow.sdk.exceptions import TaskDeferralError

    with pytest.raises(TaskDeferralError):
        operator("timeout", deferrable=True).resume_execution(TRIGGER_FAIL_REPR, {"error": "boom"}, ctx)
    assert [j.metadata.deletion_timestamp for j in jobs(k8s)] == [None]
    # ... the triggerer giving up at the defer timeout (execution_timeout): Airflow resumes the task with __fail__
    with pytest.raises(TaskDeferralTimeout):
        operator("timeout", deferrable=True).resume_execution(
            TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, ctx)
    wait_until(lambda: all(j.metadata.deletion_timestamp for j in jobs(k8s)), timeout=10)
