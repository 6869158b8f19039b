"""The local stack: a real airflow standalone runs a DAG whose task reaches kubesim via kubernetes_default."""

import psutil
import pytest
from kubernetes import client

from devstack.stack import LOG_SERVER_SETTINGS, log_server_warning
from kubesim.testing import wait_until

pytestmark = pytest.mark.e2e


def test_a_task_under_standalone_reaches_kubesim(airflow_stack):
    run_id = airflow_stack.trigger("e2e_smoke")
    assert airflow_stack.wait_run("e2e_smoke", run_id, timeout=120) == "success"
    events = client.CoreV1Api(airflow_stack.k8s()).list_namespaced_event("default", label_selector="e2e=smoke")
    assert run_id in [e.message for e in events.items]
    assert "touch_cluster" in [ti["task_id"] for ti in airflow_stack.task_instances("e2e_smoke", run_id)]
    # the task log, read back through the REST API, holds the namespaces the task listed in kubesim
    assert "kube-system" in airflow_stack.task_log("e2e_smoke", run_id, "touch_cluster")


def test_the_stack_is_on_its_own_postgresql_and_its_log_servers_on_free_ports(airflow_stack):
    """issue 29: SQLite froze the stacks; the log servers took 8793/8794, which a second stack could not bind."""
    env = airflow_stack.env
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert airflow_stack.api("GET", "/api/v2/monitor/health")["metadatabase"]["status"] == "healthy"
    ports = {int(env[k]) for k in LOG_SERVER_SETTINGS}
    assert len(ports) == 2 and not ports & {8793, 8794}
    # the scheduler's and the triggerer's log servers really listen there (the stack never needed 8793/8794), on
    # every interface: Airflow offers no setting for the host, and the stack says so (a change in Airflow that
    # binds loopback fails this line, and the warning should then go)
    listening = wait_until(lambda: ports <= {c.laddr.port for c in _listening()} and _listening(), 120, 1,
                           what="both log servers listening")
    assert {c.laddr.ip for c in listening if c.laddr.port in ports} <= {"::", "0.0.0.0"}
    assert log_server_warning(env) in (airflow_stack.workdir / "logs" / "stack.log").read_text()
    assert airflow_stack.watchdog is not None and airflow_stack.watchdog.restarts == []  # nothing died


def _listening() -> list:
    return [c for c in psutil.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
