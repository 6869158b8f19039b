"""The dashboard's usage row answered by a real chain (issue 37): Debian's Prometheus scrapes kubesim's cAdvisor and
dcgm-exporter series with the shipped jobs (as the demo does, devstack.monitoring.usage_scrape) and Skiff's own
endpoint code (read_cluster over the same cluster: skiff_pod_info, skiff_pod_requests); kubesim's kubelet reads
every second. A training step's pod and an instance's pod carry the labels, annotations and home volume Skiff's
templates render, and use what kubesim's annotations say (CPU, memory, simulated GPU). Every panel expression of
the row returns data, grouped under the step's DAG and task and the instance's owner."""

from __future__ import annotations

import math

import pytest

from devstack.monitoring import prometheus_config, usage_scrape
from kubesim import KubeSim
from kubesim.controllers.framework import Timing
from kubesim.testing import wait_until
from operators.k8s import Kube
from tests.integration.metrics.test_usage_dashboard import usage_panels
from tests.support.metrics.prometheus_support import PROMETHEUS, SkiffEndpoint, prometheus_with

NS = "recsys"


@pytest.fixture(scope="module")
def sim():
    sim = KubeSim(tls=True, timing=Timing(metric_resolution=1.0)).start()
    yield sim
    sim.stop()


def _skiff_pods():
    """A training step's pod (from the rendered Job's template) and an instance's (from its StatefulSet's), each
    with kubesim's usage annotations, the GPU taint tolerated."""
    from operators.devinstances import desired
    from operators.devinstances.spec import Image, build_request
    from operators.training.manifest import job_manifest
    from operators.training.naming import TaskInstanceKey
    from operators.training.spec import build_spec

    key = TaskInstanceKey("training_recommendation_daily", "train", "manual__1", 1)
    step = build_spec(image="registry/train:1", namespace=NS, work_dir="/root", exec_command="python",
                      entry_path="train.py", run_args=[], env={}, cpu=1, memory=1, gpu=1, pvc="bob-home",
                      volumes_=None, online=False, pool_key="pool", pool_value="offline")
    image = Image("tf2-gpu", "registry.local/nb:gpu", default=True, gpu=True)
    req = build_request(owner="alice", name="nb", team=NS, image="tf2-gpu", cpu=1, memory=2, gpu=1, mounts_=[],
                        extra_ports_=[], catalogue=(image,), default_image="tf2-gpu", home_pvc="alice-home",
                        access={"alice-home": "rw"}.get)
    out = []
    for owner, name, container, usage in (
            (job_manifest(step, key), "step-0", "train", {"cpu-usage": "500m", "memory-usage": "300Mi", "gpu-util": "3"}),
            (desired.statefulset(req, {}, replicas=1, started=None), "alice--nb-0", "notebook",
             {"cpu-usage": "5m", "memory-usage": "100Mi", "gpu-util": "40"})):
        meta = owner["spec"]["template"]["metadata"]
        spec = owner["spec"]["template"]["spec"]
        res = next(c for c in spec["containers"] if c["name"] == container)["resources"]
        home = [v for v in spec.get("volumes") or [] if v.get("persistentVolumeClaim")][:1]
        out.append({"metadata": {"name": name, "labels": meta["labels"], "annotations": {
            **(meta.get("annotations") or {}), "kubesim.io/duration": "3600",
            **{f"kubesim.io/{k}": v for k, v in usage.items()}}},
            "spec": {"restartPolicy": "Never", "tolerations": [{"operator": "Exists"}], "volumes": home,
                     "containers": [{"name": container, "image": "busybox", "resources": res,
                                     "volumeMounts": [{"name": v["name"], "mountPath": "/root"} for v in home]}]}})
    return out


def test_every_usage_panel_returns_data_from_kubesim_and_skiffs_endpoint(sim, tmp_path):
    from kubernetes.client import CoreV1Api
    from kubernetes.config import new_client_from_config

    if not PROMETHEUS.exists():
        pytest.fail("/usr/bin/prometheus missing: run `make monitoring` (apt-get install prometheus)")
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    api = new_client_from_config(config_file=str(kubeconfig))
    core = CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    for claim in ("bob-home", "alice-home"):
        core.create_namespaced_persistent_volume_claim(NS, {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    for pod in _skiff_pods():
        core.create_namespaced_pod(NS, pod)
    wait_until(lambda: all(p.status.phase == "Running" for p in core.list_namespaced_pod(NS).items), 30,
               what="both pods running")
    endpoint = SkiffEndpoint(Kube(api))
    jobs, _ = usage_scrape(kubeconfig, tmp_path)
    skiff = {"job_name": "skiff", "metrics_path": "/metrics", "static_configs": [{"targets": [endpoint.url]}]}
    for job in [*jobs, skiff]:
        job["scrape_interval"] = "1s"
    cfg = prometheus_config({"scrape_configs": []}, skiff_target="", token_file=tmp_path / "t", statsd_target="",
                            rules=[], extra_jobs=[*jobs, skiff])
    try:
        with prometheus_with(tmp_path, cfg) as prom:
            _every_panel_answers(prom)
    finally:
        endpoint.server.shutdown()
        api.close()


def _every_panel_answers(prom) -> None:
    def result(expr: str) -> list[dict]:
        return [s for s in prom.query(expr) if math.isfinite(float(s["value"][1]))]

    panels = usage_panels()

    def empty() -> list:
        return [k for k, e in panels.items() if not result(e)]
    try:
        wait_until(lambda: not empty(), 90, interval=1, what="every usage panel returning data")
    except TimeoutError:
        pass
    assert empty() == []
    step = result(panels[("Training steps: peak memory / limit (last hour)", "{{dag}}.{{task}}")])
    assert [(s["metric"]["dag"], s["metric"]["task"]) for s in step] == [("training_recommendation_daily", "train")]
    assert float(step[0]["value"][1]) == pytest.approx(300 / 1024)        # 300 MiB of its 1 GiB limit
    idle = result(panels[("GPUs held idle now (under 5 %), by whom", "{{user}} {{kind}} {{pod}}")])
    assert [(s["metric"]["user"], s["metric"]["kind"]) for s in idle] == [("bob", "training")]  # 3 %, not 40 %
    inst = result(panels[("Each instance: CPU cores used vs requested", "{{user}} {{pod}} used")])
    assert [s["metric"]["user"] for s in inst] == ["alice"]
    # The panel's rate() over 5 minutes of a series a few seconds old is extrapolated from each pod's own start, so
    # the two users' values are scaled unalike (a clean-clone run read 0.017). Over a window both series fully cover,
    # the ratio is the annotations' (5m against 500m): the same expression over 20 s, once both are that old.
    used = panels[("CPU cores used vs requested, by user", "{{user}} ({{team}}) used")]
    assert "[5m]" in used
    short = used.replace("[5m]", "[20s]")

    def ratio() -> float:
        users = {s["metric"]["user"]: float(s["value"][1]) for s in result(short)}
        return users.get("alice", math.nan) / users.get("bob", math.nan) if users.get("bob") else math.nan
    try:
        wait_until(lambda: abs(ratio() - 0.01) <= 0.002, 60, interval=1, what="alice's CPU a hundredth of bob's")
    except TimeoutError:
        pass
    assert ratio() == pytest.approx(0.01, rel=0.2)
