"""The reconcile DAGs: import cleanly without a DB or cluster, are scheduled by the Sedna watch asset OR a
cron resync with one active run, and a run reconciles the cluster through KubernetesHook."""

from __future__ import annotations

from pathlib import Path

import pytest

from operators.sedna.kube import DEPLOYMENTS
from operators.sedna.trigger import SednaWatchTrigger
from tests.support.sedna.sedna_helpers import NS, new_fl, new_ji, pods_of

DAGS = Path(__file__).resolve().parents[3] / "dags"
IDS = {"reconcile_federated_learning": "FederatedLearningJob", "reconcile_joint_inference": "JointInferenceService"}


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def test_dags_import_and_are_wired(bag):
    assert not {k: v for k, v in bag.import_errors.items() if "reconcile_" in k}
    from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable

    for dag_id, kind in IDS.items():
        dag = bag.dags[dag_id]
        assert dag.max_active_runs == 1 and not dag.catchup
        assert [t.task_id for t in dag.tasks] == ["reconcile"]
        timetable = dag.timetable
        assert type(timetable).__name__ == AssetOrTimeSchedule.__name__
        assert type(timetable.timetable).__name__ == CronTriggerTimetable.__name__
        asset = timetable.asset_condition
        assert isinstance(asset, Asset) and asset.uri.startswith("x-sedna://sedna.io/")
        (watcher,) = asset.watchers
        trigger = watcher.trigger
        assert isinstance(trigger, SednaWatchTrigger) and trigger.kind == kind


@pytest.mark.usefixtures("airflow_db")
def test_a_run_reconciles_through_the_kubernetes_hook(k8s, kube, kube_conn, bag):
    new_fl(kube)
    new_ji(kube)
    for dag_id in IDS:
        run = bag.dags[dag_id].test()
        assert run.state == "success", dag_id
    assert len(pods_of(kube)) == 3
    assert len(kube.list(DEPLOYMENTS, NS, "jointinferenceservice.sedna.io/name")) == 2


@pytest.mark.usefixtures("airflow_db")
def test_a_run_that_hits_an_api_error_fails_after_reconciling_the_rest(k8s, kube, kube_conn, bag):
    kube.create(DEPLOYMENTS, NS, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "helmet-detection-inference-example-deployment-edge"},
        "spec": {"selector": {"matchLabels": {"app": "theirs"}},
                 "template": {"metadata": {"labels": {"app": "theirs"}},
                              "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    new_ji(kube)
    run = bag.dags["reconcile_joint_inference"].test()
    assert run.state == "failed"
    # the rest was reconciled all the same
    assert kube.get(DEPLOYMENTS, NS, "helmet-detection-inference-example-deployment-cloud") is not None
