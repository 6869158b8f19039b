"""The local stack: a real airflow standalone runs a DAG whose task reaches kubesim via kubernetes_default."""

import pytest
from kubernetes import client

pytestmark = pytest.mark.e2e


def test_a_task_under_standalone_reaches_kubesim(airflow_stack):
    run_id = airflow_stack.trigger("e2e_smoke")
    assert airflow_stack.wait_run("e2e_smoke", run_id, timeout=120) == "success"
    events = client.CoreV1Api(airflow_stack.k8s()).list_namespaced_event("default", label_selector="e2e=smoke")
    assert run_id in [e.message for e in events.items]
    assert "touch_cluster" in [ti["task_id"] for ti in airflow_stack.task_instances("e2e_smoke", run_id)]
    # the task log, read back through the REST API, holds the namespaces the task listed in kubesim
    assert "kube-system" in airflow_stack.task_log("e2e_smoke", run_id, "touch_cluster")
