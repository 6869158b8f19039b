"""E2E smoke DAG: a task reaches the cluster through ``kubernetes_default`` and leaves an Event there."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task


@task
def touch_cluster(run_id: str | None = None) -> list[str]:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    core = KubernetesHook().core_v1_client
    # an Event and a namespace list: writes and reads Skiff's own RBAC allows (the stack enforces it)
    event = {"metadata": {"generateName": "e2e-smoke-", "labels": {"e2e": "smoke"}},
             "involvedObject": {"kind": "Namespace", "name": "default", "apiVersion": "v1"},
             "reason": "Smoke", "message": str(run_id), "type": "Normal", "source": {"component": "skiff"}}
    core.create_namespaced_event("default", event)
    return [ns.metadata.name for ns in core.list_namespace().items]


with DAG("e2e_smoke", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    touch_cluster()
