"""End to end under RBAC: the shared stack (devstack.testing `airflow_stack`) runs kubesim with
`--authz rbac` and Airflow's `kubernetes_default` is Skiff's ServiceAccount, so every e2e test (training,
failure e-mail, crash + reattach, kill, Sedna heal, the demo) runs under enforcement. These tests check that
it really is so and that the deferred training pipeline and a failing run were refused nothing."""
from __future__ import annotations

import httpx
import pytest
import yaml

from tests.rbac.scenarios import SKIFF_USER

pytestmark = pytest.mark.e2e


def _skiff_denials(stack) -> list[dict]:
    got = httpx.get(f"{stack.kubesim_url}/kubesim/denials", timeout=10).json()["denials"]
    return [d for d in got if d["user"] == SKIFF_USER]


def test_airflow_acts_as_skiffs_service_account_under_enforcement(team_stack):
    """kubernetes_default holds Skiff's ServiceAccount token (not the admin's), and kubesim enforces RBAC:
    a request without a token is refused."""
    stack = team_stack
    assert stack.rbac and stack.skiff_kubeconfig != stack.kubeconfig
    user = yaml.safe_load(stack.skiff_kubeconfig.read_text())["users"][0]
    assert user["name"] == "airflow-skiff" and user["user"]["token"] != "kubesim"
    assert str(stack.skiff_kubeconfig) in stack.env["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    assert httpx.get(f"{stack.kubesim_url}/api/v1/namespaces/recsys/pods", timeout=10).status_code == 403


def test_training_pipeline_and_failure_refused_nothing(team_stack):
    """The deferred example pipeline (trigger in the triggerer: watches, live logs) and a failing run (events,
    Job deletion, the alert) complete as without RBAC, and kubesim refused Skiff no request."""
    stack = team_stack
    run_id = stack.trigger("training_recommendation_daily")
    assert stack.wait_run("training_recommendation_daily", run_id, timeout=240) == "success"
    assert "line 12" in stack.task_log("training_recommendation_daily", run_id, "train")
    run_id = stack.trigger("training_failure_demo")
    assert stack.wait_run("training_failure_demo", run_id, timeout=180) == "failed"
    assert _skiff_denials(stack) == []
