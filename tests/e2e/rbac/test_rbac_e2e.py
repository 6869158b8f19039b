"""End to end under RBAC: the shared stack (devstack.testing `airflow_stack`) runs kubesim with
`--authz rbac` and Airflow's `kubernetes_default` is Skiff's ServiceAccount, so every e2e test (training,
failure e-mail, crash + reattach, kill, Sedna heal, the demo) runs under enforcement. This test checks that it
really is so; that the deferred training pipeline and a failing run are refused nothing is checked where they run
(tests/e2e/training/test_training_e2e.py, on both profiles), not by running them once more."""
from __future__ import annotations

import httpx
import pytest
import yaml

from tests.support.rbac.scenarios import stack_skiff_denials

pytestmark = pytest.mark.e2e


def test_airflow_acts_as_skiffs_service_account_under_enforcement(team_stack):
    """kubernetes_default holds Skiff's ServiceAccount token (not the admin's), and kubesim enforces RBAC:
    a request without a token is refused."""
    stack = team_stack
    assert stack.rbac and stack.skiff_kubeconfig != stack.kubeconfig
    user = yaml.safe_load(stack.skiff_kubeconfig.read_text())["users"][0]
    assert user["name"] == "airflow-skiff" and user["user"]["token"] != "kubesim"
    assert str(stack.skiff_kubeconfig) in stack.env["AIRFLOW_CONN_KUBERNETES_DEFAULT"]
    assert httpx.get(f"{stack.kubesim_url}/api/v1/namespaces/recsys/pods", timeout=10).status_code == 403
    # what Skiff's ServiceAccount is refused is recorded (test_training_e2e reads that record): cluster-wide
    # Secrets are not Skiff's to list
    headers = {"Authorization": f"Bearer {user['user']['token']}"}
    assert httpx.get(f"{stack.kubesim_url}/api/v1/secrets", headers=headers, timeout=10).status_code == 403
    assert any(d["resource"] == "secrets" and d["verb"] == "list" for d in stack_skiff_denials(stack))
