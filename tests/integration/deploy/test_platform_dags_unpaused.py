"""Skiff's platform DAGs run on a fresh deployment without anyone unpausing them.

Airflow's ``[core] dags_are_paused_at_creation`` defaults to true (and deploy/helm/values.yaml keeps it), so a
platform DAG must say ``is_paused_upon_creation=False`` itself. Platform DAGs are those tagged ``reconcile``,
``platform`` or ``dev-instance`` (the DAGs users trigger for their development instances, and the culler);
the end-to-end test tests/e2e/sedna/test_sedna_e2e.py shows the effect on a running Airflow.
"""

from __future__ import annotations

from pathlib import Path

from airflow.dag_processing.dagbag import DagBag

DAGS = Path(__file__).resolve().parents[3] / "dags"
PLATFORM_TAGS = {"reconcile", "platform", "dev-instance"}


def test_platform_dags_start_unpaused_and_team_dags_keep_the_default():
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    platform = {d: dag for d, dag in bag.dags.items() if PLATFORM_TAGS & set(dag.tags or ())}
    assert {"reconcile_federated_learning", "reconcile_joint_inference", "platform_sync", "usage_report",
            "dev_instance_cull", "dev_instance_create"} <= set(platform)
    assert {d: dag.is_paused_upon_creation for d, dag in platform.items()} == {d: False for d in platform}
    others = [dag for d, dag in bag.dags.items() if d not in platform]
    assert others and all(dag.is_paused_upon_creation is None for dag in others)
