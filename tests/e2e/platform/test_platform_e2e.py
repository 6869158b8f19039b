"""platform_sync under a real airflow standalone (scheduler, triggerer, API server) with the example file:
the teams' pools sized from the quota, and a DAG run that finds the cluster already in sync."""

import pytest

pytestmark = pytest.mark.e2e


def test_platform_sync_dag_keeps_the_example_file_applied(team_stack):
    stack = team_stack
    pools = {p["name"]: p for p in stack.api("GET", "/api/v2/pools")["pools"]}
    # no jobs count in the example: cpu quota / default container cpu (1)
    assert (pools["skiff-recsys"]["slots"], pools["skiff-nlp"]["slots"]) == (8, 4)
    assert pools["skiff-recsys"]["include_deferred"] is True

    dag = stack.wait_dag("platform_sync")
    assert dag["is_paused"] is False                    # created unpaused: the file is applied without a click
    run_id = stack.trigger("platform_sync")
    assert stack.wait_run("platform_sync", run_id, timeout=120) == "success", stack.task_log(
        "platform_sync", run_id, "sync")
    report = stack.api("GET", f"/api/v2/dags/platform_sync/dagRuns/{run_id}/taskInstances/sync/xcomEntries/"
                              "return_value")["value"]
    assert report["applied"] == [] and report["errors"] == [] and report["orphaned"] == []
    assert report["pools"]["unchanged"] == ["skiff-nlp", "skiff-recsys"]
