"""The usage alerts (deploy/monitoring/usage-alerts.yaml, issue 37) fire on real processes and stay silent on busy
ones: kubesim's process nodes run four pods, each a Python process in its own memory cgroup; Debian's Prometheus
scrapes their cAdvisor and dcgm-exporter series with the shipped jobs (as the demo does) and evaluates the shipped
rules, each ``for:`` cut to seconds (promtool's unit tests, test_usage_alerts.py, cover the shipped durations).

* ``near-oom`` holds 480 MiB under a 512 MiB limit (its working set about 94 %): SkiffStepNearMemoryLimit.
* ``roomy`` holds 100 MiB of the same limit: silent.
* ``idle-gpu`` holds a GPU and writes no load (0 %): SkiffGpuHeldIdle.
* ``busy-gpu`` holds a GPU and says it is 90 % busy, as the demo's train.py does: silent.

Prometheus starts only once every process has said it is ready and the kubelet has read them since, so no alert
depends on a reading taken before a process set itself up.
"""
from __future__ import annotations

import sys
import time

import pytest
import yaml

from devstack.monitoring import prometheus_config, usage_scrape
from kubesim import KubeSim
from kubesim.controllers.framework import Timing
from kubesim.kubelet.stats import GPU_UTIL_FILE
from kubesim.testing import wait_until
from tests.support.kubesim.procrt_support import log, pod
from tests.support.metrics.prometheus_support import MONITORING, PROMETHEUS, prometheus_with

FOR = "5s"
NODES = [{"name": "proc-gpu", "runtime": "process", "cpu": 8, "memory": "32Gi", "gpu": 4,
          "images": {"skiff/venv": sys.prefix}}]
HOLD = ("import time\nblock = bytearray({mib} * 1024 * 1024)\nfor i in range(0, len(block), 4096): block[i] = 1\n"
        "print('ready', flush=True)\ntime.sleep(600)\n")
GPU = ("import time\n{write}print('ready', flush=True)\ntime.sleep(600)\n")
PODS = {
    "near-oom": (HOLD.format(mib=480), {"memory": "512Mi"}),
    "roomy": (HOLD.format(mib=100), {"memory": "512Mi"}),
    "idle-gpu": (GPU.format(write=""), {"memory": "256Mi", "nvidia.com/gpu": "1"}),
    "busy-gpu": (GPU.format(write=f"open('/tmp/{GPU_UTIL_FILE}', 'w').write('90')\n"),
                 {"memory": "256Mi", "nvidia.com/gpu": "1"}),
}
EXPECTED = {("SkiffStepNearMemoryLimit", "near-oom"), ("SkiffGpuHeldIdle", "idle-gpu")}


@pytest.fixture
def sim():
    sim = KubeSim(nodes=NODES, tls=True, timing=Timing(metric_resolution=1.0)).start()
    yield sim
    sim.stop()


def _short_rules(path):
    rules = yaml.safe_load((MONITORING / "usage-alerts.yaml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = FOR
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def test_near_oom_and_idle_gpu_alerts_fire_on_processes_and_not_on_busy_ones(sim, tmp_path):
    from kubernetes.client import CoreV1Api
    from kubernetes.config import new_client_from_config

    if not PROMETHEUS.exists():
        pytest.fail("/usr/bin/prometheus missing: run `make monitoring` (apt-get install prometheus)")
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    api = new_client_from_config(config_file=str(kubeconfig))
    core = CoreV1Api(api)
    for name, (script, limits) in PODS.items():
        core.create_namespaced_pod("default", pod(name, [sys.executable, "-c", script], container={
            "name": "train", "image": "skiff/venv", "resources": {"limits": limits}},
            tolerations=[{"operator": "Exists"}]))
    for name in PODS:
        wait_until(lambda n=name: "ready" in _log(core, n), 60, what=f"{name} ready")
    readings = sim.cluster.usage.scrapes
    wait_until(lambda: sim.cluster.usage.scrapes >= readings + 2, 30, what="two kubelet readings since")

    jobs, _ = usage_scrape(kubeconfig, tmp_path)
    for job in jobs:
        job["scrape_interval"] = "1s"
    cfg = prometheus_config({"scrape_configs": []}, skiff_target="", token_file=tmp_path / "t", statsd_target="",
                            rules=[_short_rules(tmp_path / "usage-alerts.yaml")], extra_jobs=jobs)
    cfg["global"]["evaluation_interval"] = "1s"
    try:
        with prometheus_with(tmp_path, cfg) as prom:
            def firing() -> set[tuple[str, str]]:
                return {(s["metric"]["alertname"], s["metric"]["pod"]) for s in prom.query('ALERTS{alertstate="firing"}')}

            wait_until(lambda: EXPECTED <= firing(), 90, interval=1, what=f"{sorted(EXPECTED)} firing")
            started = time.time()  # the busy pods have had as long as the idle ones: a few more evaluations, silent
            wait_until(lambda: time.time() - started > 3 and firing() == EXPECTED, 30, interval=1,
                       what=f"only {sorted(EXPECTED)} firing, not {sorted(firing() - EXPECTED)}")
            assert prom.query('max_over_time(ALERTS{pod=~"roomy|busy-gpu"}[10m])') == []   # not even pending
            held = prom.query('max(container_memory_working_set_bytes{pod="near-oom", container="train"}) / 2^20')
            assert 480 <= float(held[0]["value"][1]) < 512, held   # what the rule saw: its working set, under the limit
            assert core.read_namespaced_pod("near-oom", "default").status.phase == "Running"
    finally:
        api.close()


def _log(core, name: str) -> str:
    from kubernetes.client.exceptions import ApiException
    try:
        return log(core, name)
    except ApiException:   # 400 while the container is being created
        return ""
