"""The production profile (``devstack.prod``) is what it claims, and survives losing a triggerer.

Scenarios shared with the standalone profile (pipeline, alert, crash + reattach, Sedna heal) are parametrized in
their own test modules; these are the profile's own.
"""

from __future__ import annotations

import pytest
import redis
from kubernetes import client

from kubesim.testing import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.prod]
FAILOVER = "training_e2e_failover"


def test_tasks_run_on_celery_with_postgres_metadata_and_two_schedulers_and_triggerers(prod_stack):
    stack = prod_stack
    run_id = stack.trigger("e2e_smoke")
    assert stack.wait_run("e2e_smoke", run_id, timeout=120) == "success"
    # the metadata DB is the session's PostgreSQL database, not SQLite
    assert stack.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert stack.query("SELECT state FROM task_instance WHERE dag_id = 'e2e_smoke' AND run_id = %s",
                       run_id) == [("success",)]
    assert not list(stack.home.glob("*.db"))
    # the task went through Celery: the broker's queue exists in the session's Redis db and the worker
    # stored the Celery task's result in the result backend (the metadata DB)
    broker = redis.Redis.from_url(stack.redis.url)
    try:
        assert any(k.startswith(b"_kombu.binding.") for k in broker.keys("*"))
    finally:
        broker.close()
    assert stack.query("SELECT count(*) FROM celery_taskmeta WHERE status = 'SUCCESS'")[0][0] >= 1
    alive = dict(stack.query(
        "SELECT job_type, count(*) FROM job WHERE state = 'running' AND end_date IS NULL "
        "AND latest_heartbeat > now() - interval '30 seconds' GROUP BY job_type"))
    assert alive.get("SchedulerJob") == 2 and alive.get("TriggererJob") == 2, alive


def _deferred(stack, run_id: str) -> dict[str, int | None]:
    """task id -> the TriggererJob holding its trigger, for the run's deferred tasks."""
    return dict(stack.query(
        "SELECT ti.task_id, t.triggerer_id FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
        "WHERE ti.dag_id = %s AND ti.run_id = %s AND ti.state = 'deferred'", FAILOVER, run_id))


def test_killed_triggerer_hands_its_deferred_jobs_to_the_other(prod_team_stack):
    stack = prod_team_stack
    run_id = stack.trigger(FAILOVER)
    held = wait_until(lambda: (d := _deferred(stack, run_id)) and len(d) == 4 and None not in d.values() and d,
                      timeout=120, interval=0.2, what="all four tasks deferred and their triggers running")
    victim_id = max(set(held.values()), key=list(held.values()).count)
    victim = next(n for n, i in stack.triggerer_jobs.items() if i == victim_id)
    survivor_id = next(i for n, i in stack.triggerer_jobs.items() if n != victim)
    stack.kill(victim)  # SIGKILL: no clean shutdown, its triggers stay assigned to a dead Job
    try:
        assert stack.wait_run(FAILOVER, run_id, timeout=240) == "success"  # no lost completion
        tis = stack.task_instances(FAILOVER, run_id)
        assert {ti["state"] for ti in tis} == {"success"} and {ti["try_number"] for ti in tis} == {1}
        jobs = client.BatchV1Api(stack.k8s()).list_namespaced_job("recsys").items
        for ti in tis:  # exactly one Job per task try: the survivor reattached, created nothing
            mine = [j.metadata.name for j in jobs if j.metadata.labels.get("skiff.io/task-id") == ti["task_id"]
                    and j.metadata.annotations.get("skiff.io/run-id") == run_id]
            assert len(mine) == 1 and mine[0].endswith("-t1"), mine
            # the survivor ran the trigger of every task the victim held: its trigger log is there
            logs = list(stack.home.glob(f"logs/dag_id={FAILOVER}/run_id={run_id}/task_id={ti['task_id']}/"
                                        f"attempt=1.log.trigger.{survivor_id}.log"))
            if held[ti["task_id"]] == victim_id:
                assert logs, f"{ti['task_id']}: no trigger log written by the surviving triggerer"
    finally:
        stack.start_triggerer(victim)  # the rest of the session keeps two triggerers
        for job in client.BatchV1Api(stack.k8s()).list_namespaced_job("recsys").items:
            if job.metadata.annotations.get("skiff.io/run-id") == run_id:  # room in recsys' Job quota
                client.BatchV1Api(stack.k8s()).delete_namespaced_job(
                    job.metadata.name, "recsys", propagation_policy="Background")


def test_a_component_that_dies_unasked_is_restarted_and_said(prod_stack):
    """issue 29, no component dies unnoticed: nothing restarts this profile's processes (Kubernetes restarts the
    chart's pods), so the stack's watchdog does and says so. A scheduler killed from outside (SIGKILL to its
    process group, as the OOM killer would, not through ``stack.kill``) is back as a new process, the restart is
    in ``logs/watchdog.log``, and two SchedulerJobs heartbeat again."""
    import os
    import signal

    stack = prod_stack
    victim = stack.procs["scheduler-2"]
    os.killpg(victim.pid, signal.SIGKILL)
    back = wait_until(lambda: (p := stack.procs["scheduler-2"]) is not victim and p.poll() is None and p, 60, 0.5,
                      what="scheduler-2 restarted")
    said = (stack.workdir / "logs" / "watchdog.log").read_text()
    assert f"the scheduler-2 exited (code -9): restarted it as pid {back.pid}" in said, said
    wait_until(lambda: stack.query(
        "SELECT count(*) FROM job WHERE job_type = 'SchedulerJob' AND state = 'running' "
        "AND latest_heartbeat > now() - interval '10 seconds'")[0][0] >= 2, 180, 1, what="two schedulers heartbeating")
    run_id = stack.trigger("e2e_smoke")
    assert stack.wait_run("e2e_smoke", run_id, timeout=300) == "success"
