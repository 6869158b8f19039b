"""End to end under a real Airflow (standalone, and the production profile marked ``prod``): the AssetWatcher's
trigger (in a triggerer) sees a pod deleted in kubesim and the reconcile DAG, run by the scheduler with no
manual trigger, brings it back. Nobody unpauses the DAG: Airflow's ``dags_are_paused_at_creation`` is left at
its default (true), as on a fresh deployment, and the platform DAG starts unpaused on its own."""

from __future__ import annotations

import time

import httpx
import pytest

from devstack.testing import profile_params
from kubesim.testing import wait_until
from operators.sedna.install import install_crds
from operators.sedna.kube import DATASETS, FL_JOBS, MODELS, PODS, Kube
from tests.support.sedna.sedna_helpers import JOB, NS, dataset, fl_sample, model

pytestmark = pytest.mark.e2e
DAG_ID = "reconcile_federated_learning"




def watching(stack) -> bool:
    """True once the trigger (in the triggerer) has a watch open on the FL CRs."""
    stats = httpx.get(f"{stack.kubesim_url}/kubesim/stats", timeout=10).json()["by_resource"]
    return stats.get("watch federatedlearningjobs.sedna.io", 0) > 0


def trainer_pods(kube) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"]
            for p in kube.list(PODS, NS, f"federatedlearningjob.sedna.io/name={JOB}")
            if "-train-" in p["metadata"]["name"] and not p["metadata"].get("deletionTimestamp")}


@pytest.fixture(params=profile_params())
def stack(request):
    return request.getfixturevalue("airflow_stack" if request.param == "standalone" else "prod_stack")


def test_deleted_pod_comes_back_with_no_manual_trigger(stack):
    # the stacks leave dags_are_paused_at_creation at Airflow's default, true
    assert "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION" not in stack.env
    api = stack.k8s()
    kube = Kube(api)
    install_crds(kube)
    kube.create(MODELS, NS, model("surface-defect-detection-model", "/models/sdd/model.ckpt"))
    for n in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
        kube.create(DATASETS, NS, dataset(n, f"/data/{n}/train.txt"))
    # not unpaused by hand, no run triggered by hand: the asset watcher and the scheduler do it
    assert stack.wait_dag(DAG_ID)["is_paused"] is False
    wait_until(lambda: watching(stack), 120, 0.2, what="the Sedna watch trigger to start in the triggerer")
    kube.create(FL_JOBS, NS, fl_sample())
    first = wait_until(lambda: len(trainer_pods(kube)) == 2 and trainer_pods(kube), 90, 0.2, what="the job's pods")
    name, uid = sorted(first.items())[0]
    t0 = time.monotonic()
    kube.delete(PODS, NS, name)
    back = wait_until(lambda: (trainer_pods(kube).get(name) or uid) != uid, 90, 0.2, what=f"{name} to come back")
    latency = time.monotonic() - t0
    print(f"pod deleted -> recreated in {latency:.1f} s on the {type(stack).__name__}")
    assert back and len(trainer_pods(kube)) == 2
    runs = stack.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns")["dag_runs"]
    assert runs and all(r["run_type"] != "manual" for r in runs)
    assert any(r["run_type"] == "asset_triggered" for r in runs)
