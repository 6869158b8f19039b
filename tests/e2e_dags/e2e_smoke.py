"""E2E smoke DAG: a task reaches the cluster through ``kubernetes_default`` and leaves a ConfigMap there."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task


@task
def touch_cluster(run_id: str | None = None) -> list[str]:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    core = KubernetesHook().core_v1_client
    cm = {"metadata": {"generateName": "e2e-smoke-", "labels": {"e2e": "smoke"}}, "data": {"run_id": run_id}}
    core.create_namespaced_config_map("default", cm)
    return [ns.metadata.name for ns in core.list_namespace().items]


with DAG("e2e_smoke", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    touch_cluster()
