"""End to end under a real Airflow (standalone, and the production profile marked ``prod``): alice, logged in,
triggers dev_instance_create through the REST API; the scheduler runs it, the instance becomes Ready on kubesim
and belongs to alice; Skiff's plugin endpoint shows it (and its password) to alice only; bob cannot stop it; alice,
recsys's admin in the platform file, stops bob's."""

from __future__ import annotations

import httpx
import pytest

from devstack.testing import profile_params
from kubesim.testing import wait_until
from operators.devinstances import inventory
from operators.k8s import Kube
from tests.support.devinstances.devinstance_support import NS, sts_of, wait_ready

pytestmark = pytest.mark.e2e


@pytest.fixture(params=profile_params())
def stack(request):
    """Each profile's stack with the example platform file applied (the prod one marked ``prod``)."""
    return request.getfixturevalue("team_stack" if request.param == "standalone" else "prod_team_stack")


def test_a_logged_in_user_creates_an_instance_that_becomes_ready(stack):
    k8s = stack.k8s()
    run_id = stack.trigger("dev_instance_create", {"name": "e2e", "team": NS, "cpu": 1, "memory": 2}, user="alice")
    assert stack.wait_run("dev_instance_create", run_id, timeout=150) == "success"
    run = stack.api("GET", f"/api/v2/dags/dev_instance_create/dagRuns/{run_id}")
    assert run["triggering_user_name"] == "alice"
    wait_until(lambda: (sts_of(k8s, "alice", "e2e").status.ready_replicas or 0) >= 1, 30, what="instance Ready")
    assert sts_of(k8s, "alice", "e2e").metadata.annotations["skiff.io/owner"] == "alice"
    log = stack.task_log("dev_instance_create", run_id, "create")
    (view,) = [v for v in inventory.list_instances(Kube(k8s), "alice", _settings()) if v.name == "e2e"]
    assert view.state == "Running" and view.ssh in log
    password = inventory.password(Kube(k8s), "alice", NS, "e2e", caller="alice")
    assert password not in log
    # Skiff's plugin endpoint (behind Airflow's login) shows it to alice, with its password, and to nobody else
    mine = {(i["owner"], i["name"]): i for i in stack.api("GET", "/skiff/api/instances", user="alice")["instances"]}
    assert mine[("alice", "e2e")]["state"] == "Running" and mine[("alice", "e2e")]["ssh"] == view.ssh
    assert stack.api("GET", f"/skiff/api/instances/{NS}/e2e/password", user="alice")["password"] == password
    assert ("alice", "e2e") not in {(i["owner"], i["name"]) for i in stack.api(
        "GET", "/skiff/api/instances", user="bob")["instances"]}
    assert "password" not in stack.api("GET", f"/skiff/api/instances/{NS}/e2e/password", ok=(404,), user="bob")
    anonymous = httpx.get(f"{stack.airflow_url}/skiff/api/instances/{NS}/e2e/password", timeout=30)
    assert anonymous.status_code == 401 and password not in anonymous.text
    # bob, logged in, may not stop alice's instance by naming her as owner
    bob_run = stack.trigger("dev_instance_stop", {"name": "e2e", "team": NS, "owner": "alice"}, user="bob")
    assert stack.wait_run("dev_instance_stop", bob_run, timeout=150) == "failed"
    assert "'bob' may only act on their own development instances" in stack.task_log(
        "dev_instance_stop", bob_run, "stop")
    assert sts_of(k8s, "alice", "e2e").spec.replicas == 1
    # alice is recsys's admin: she stops a member's instance for him (the run names him as owner)
    from operators.devinstances import lifecycle
    from operators.devinstances.operator import request_from_params
    from operators.platform import load_platform

    req = request_from_params(load_platform(), "bob", {"name": "e2e-b", "team": NS, "cpu": 1, "memory": 1})
    lifecycle.create(Kube(k8s), req, _settings())
    try:
        wait_ready(k8s, "bob", "e2e-b", timeout=30)
        admin_run = stack.trigger("dev_instance_stop", {"name": "e2e-b", "team": NS, "owner": "bob"}, user="alice")
        assert stack.wait_run("dev_instance_stop", admin_run, timeout=150) == "success", stack.task_log(
            "dev_instance_stop", admin_run, "stop")
        assert sts_of(k8s, "bob", "e2e-b").spec.replicas == 0
    finally:
        lifecycle.delete(Kube(k8s), "bob", NS, "e2e-b", _settings())


def _settings():
    from operators.devinstances.settings import Settings

    return Settings()
