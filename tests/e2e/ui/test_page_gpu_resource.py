"""The page's GPU figures follow the platform file's ``node_pools.gpu.resource``: on a cluster whose
accelerators are ``example.com/tpu`` the quota bar, the New-instance form's free GPUs and a training row's GPUs
count that resource (and not ``nvidia.com/gpu``), through the page's API on a real api-server over kubesim."""

from __future__ import annotations

import subprocess

from kubernetes import client

from devstack.stack import BIN
from kubesim.testing import wait_until
from tests.support.ui.ui_support import SEED_WAITING, TPU


def test_quota_bars_and_the_forms_free_gpus_count_the_files_gpu_resource(tpu_server):
    core = client.CoreV1Api(tpu_server.k8s)
    assert core.read_namespaced_resource_quota("skiff-quota", "recsys").spec.hard[f"requests.{TPU}"] == "2"
    asks = {"cpu": "1", "memory": "1Gi", TPU: "1"}
    core.create_namespaced_pod("recsys", {"metadata": {"name": "tpu-user"}, "spec": {"containers": [{
        "name": "c", "image": "busybox", "resources": {"requests": asks, "limits": asks}}]}})
    try:
        wait_until(lambda: (core.read_namespaced_resource_quota("skiff-quota", "recsys").status.used or {})
                   .get(f"requests.{TPU}") == "1", timeout=15, what="the quota counts the pod's TPU")
        with tpu_server.client("bob") as bob:
            (recsys,) = bob.get("/api/quota").json()["teams"]
            form = bob.get("/api/instances/options").json()
        gpu = next(b for b in recsys["bars"] if b["resource"] == "gpu")
        assert (gpu["key"], gpu["used"], gpu["hard"]) == (f"requests.{TPU}", 1.0, 2.0)
        assert [t["free"]["gpu"] for t in form["teams"] if t["team"] == "recsys"] == [1.0]
    finally:
        core.delete_namespaced_pod("tpu-user", "recsys", grace_period_seconds=0)


def test_a_training_rows_gpus_are_the_files_gpu_resource(tpu_server):
    from operators.k8s.resource import JOBS
    from operators.k8s.rest import Kube
    from operators.platform import load_platform
    from operators.platform.admission import decide
    from operators.training.admission import admission_request
    from operators.training.naming import LABEL_JOB, TaskInstanceKey
    from operators.training.operator import TrainingJobOperator

    done = subprocess.run([str(BIN / "python"), "-c", SEED_WAITING], env=tpu_server.env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    op = TrainingJobOperator(task_id="train", image="registry.local/recsys/train-gpu:1.4", entry_path="train.py",
                             namespace="recsys", owner="alice", cpu=1, memory=1, gpu=1)
    platform = load_platform(tpu_server.env["AIRFLOW__SKIFF__PLATFORM_FILE"])
    admitted = decide(platform, admission_request(op.build_spec(), "alice"), None)
    manifest = op.build_manifest(TaskInstanceKey("training_recommendation_daily", "train", "manual__waiting", 1), admitted)
    job = Kube(tpu_server.k8s).create(JOBS, "recsys", manifest)
    core = client.CoreV1Api(tpu_server.k8s)
    try:
        pods = wait_until(lambda: core.list_namespaced_pod("recsys", label_selector=f"{LABEL_JOB}={job['metadata']['name']}")
                          .items, timeout=15, what="the Job's pod")
        assert pods[0].spec.containers[0].resources.limits[TPU] == "1"
        assert "nvidia.com/gpu" not in pods[0].spec.containers[0].resources.limits
        with tpu_server.client("alice") as alice:
            (row,) = [t for t in alice.get("/api/training").json()["tasks"] if t["dag_id"] == "training_recommendation_daily"
                      and t["task_id"] == "train"]
        assert (row["job"], row["gpu"]) == (job["metadata"]["name"], 1)
    finally:
        client.BatchV1Api(tpu_server.k8s).delete_namespaced_job(job["metadata"]["name"], "recsys",
                                                                propagation_policy="Background")
