"""Debian's Prometheus scrapes kubesim's cAdvisor and dcgm-exporter series with the shipped production jobs
(deploy/monitoring/scrape-usage.yaml: every node through the API server's node proxy), pointed at kubesim over
HTTPS with its CA and token the way the demo does (devstack.monitoring.usage_jobs), and the usage alert rules
load beside them. Debian's build has no kubernetes_sd, so the nodes come from a file_sd file labelled as
kubernetes_sd's node role labels them; the shipped relabelling is unchanged."""
from __future__ import annotations

import pytest

from devstack.monitoring import SHIPPED, prometheus_config, usage_scrape
from kubesim import KubeSim
from kubesim.controllers.framework import Timing
from kubesim.testing import wait_until
from tests.support.metrics.prometheus_support import PROMETHEUS, prometheus_with


@pytest.fixture(scope="module")
def sim():
    sim = KubeSim(tls=True, timing=Timing(metric_resolution=1.0)).start()
    yield sim
    sim.stop()


def _pod(name: str, annotations: dict, limits: dict) -> dict:
    return {"metadata": {"name": name, "annotations": {"kubesim.io/duration": "600", **annotations}},
            "spec": {"restartPolicy": "Never", "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "train", "image": "busybox", "resources": {"limits": limits}}]}}


def test_prometheus_scrapes_cadvisor_and_dcgm_through_the_api_server(sim, tmp_path):
    from kubernetes.client import CoreV1Api

    if not PROMETHEUS.exists():
        pytest.fail("/usr/bin/prometheus missing: run `make monitoring` (apt-get install prometheus)")
    from kubernetes.config import new_client_from_config

    api = new_client_from_config(config_file=str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
    core = CoreV1Api(api)
    core.create_namespaced_pod("default", _pod("busy", {"kubesim.io/cpu-usage": "500m",
                                                        "kubesim.io/memory-usage": "200Mi"},
                                               {"cpu": "1", "memory": "1Gi"}))
    core.create_namespaced_pod("default", _pod("gpu", {"kubesim.io/gpu-util": "3"},
                                               {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}))
    jobs, rules = usage_scrape(sim.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)   # what the demo runs
    nodes = [n.metadata.name for n in core.list_node().items]
    assert [j["job_name"] for j in jobs] == ["kubernetes-cadvisor", "dcgm-exporter"]
    assert rules == [SHIPPED / "usage-alerts.yaml"]
    for job in jobs:
        job["scrape_interval"] = "2s"
    cfg = prometheus_config({"scrape_configs": []}, skiff_target="", token_file=tmp_path / "t", statsd_target="",
                            rules=rules[:1], extra_jobs=jobs)
    try:
        with prometheus_with(tmp_path, cfg) as prom:
            def query(promql: str) -> dict:
                return {s["metric"].get("pod", s["metric"].get("instance")): float(s["value"][1])
                        for s in prom.query(promql)}

            rate = 'sum by (pod) (rate(container_cpu_usage_seconds_total{pod="busy"}[10s]))'
            wait_until(lambda: abs(query(rate).get("busy", 0) - 0.5) < 0.05, 60, interval=0.5,
                       what="busy's CPU rate in Prometheus at its 500m (once its series spans the window)")
            assert query('container_memory_working_set_bytes{pod="busy"}')["busy"] == 200 * 2**20
            assert query('container_spec_memory_limit_bytes{pod="busy"}')["busy"] == 2**30
            assert wait_until(lambda: query('DCGM_FI_DEV_GPU_UTIL{container="train"}').get("gpu"), 30, interval=0.5,
                              what="the simulated GPU in Prometheus") == 3
            up = 'up{job=~"kubernetes-cadvisor|dcgm-exporter"}'
            assert query(f"count({up} == 1)") == {None: 2 * len(nodes)}   # every node's two targets answer
    finally:
        api.close()
