"""What pods really use, at 1,000 pods (issue 37): kubesim (in this process) with 10 nodes of 120 pods, 1,000
scripted pods each with a steady ``kubesim.io/cpu-usage`` and ``memory-usage``, usage read as by the kubelet
(kubelet/stats.py). Measured, in one run:

* one usage pass over the 1,000 pods (what runs every ``metric_resolution``, 15 s like metrics-server's
  ``--metric-resolution``): its duration, against the 15 s it must fit in;
* ``kubectl top pod -A`` (the real kubectl, /usr/bin/kubectl) and a raw GET of every PodMetrics: wall time, against
  the issue's 1 s;
* Prometheus's view: one cAdvisor scrape per node through the node proxy (10 requests, whatever the pods), their
  total time and size, and the requests a scrape makes to the API's storage (none: the sampler's last readings).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

N_NODES, PER_NODE, N_PODS = 10, 120, 1000


def _pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"use-{i:04d}", "labels": {"bench": "usage"},
                         "annotations": {"kubesim.io/duration": "3600", "kubesim.io/cpu-usage": f"{1 + i % 500}m",
                                         "kubesim.io/memory-usage": f"{64 + i % 64}Mi"}},
            "spec": {"restartPolicy": "Never", "nodeName": f"node-{i % N_NODES}",
                     "containers": [{"name": "main", "image": "busybox"}]}}


def run() -> str:
    from kubernetes.client import CoreV1Api

    from kubesim import KubeSim
    from kubesim.controllers.framework import Timing
    from kubesim.testing import sync_api_client, wait_until

    nodes = [{"name": f"node-{i}", "cpu": 64, "memory": "256Gi", "pods": PER_NODE} for i in range(N_NODES)]
    sim = KubeSim(nodes=nodes, timing=Timing(metric_resolution=3600)).start()   # passes run here, by hand
    api = sync_api_client(sim.url)
    try:
        core = CoreV1Api(api)
        for i in range(N_PODS):
            core.create_namespaced_pod("default", _pod(i))
        wait_until(lambda: sum(1 for r in sim.cluster.kubelet.runs.values() if r.phase == "Running") >= N_PODS,
                   120, interval=0.5, what="1,000 pods running")
        sampler = sim.cluster.usage
        passes = []
        for _ in range(3):
            sim.run(_call(sampler.scrape))
            passes.append(sampler.last_duration)
            time.sleep(1.0)
        pods_read = len(sampler.last)
        kubeconfig = sim.write_kubeconfig(Path(tempfile.mkdtemp(prefix="bench-usage-")) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
        tops = []
        for _ in range(3):
            t0 = time.monotonic()
            out = subprocess.run(["kubectl", "top", "pod", "-A", "--no-headers"], capture_output=True, text=True,
                                 env=env, timeout=60)
            tops.append(time.monotonic() - t0)
        rows = len(out.stdout.splitlines())
        raws = []
        for _ in range(5):
            t0 = time.monotonic()
            size_all = len(api.call_api("/apis/metrics.k8s.io/v1beta1/pods", "GET", _preload_content=False).data)
            raws.append(time.monotonic() - t0)
        sim.reset_stats()
        t0 = time.monotonic()
        size = 0
        for i in range(N_NODES):
            size += len(api.call_api(f"/api/v1/nodes/node-{i}/proxy/metrics/cadvisor", "GET",
                                     _preload_content=False).data)
        scrape = time.monotonic() - t0
        requests = sim.stats()["total"]
    finally:
        api.close()
        sim.stop()
    return "\n".join([
        "## usage (metrics API, cAdvisor series, 1,000 pods)", "",
        f"kubesim in this process, {N_NODES} nodes, {N_PODS} scripted pods with steady use "
        f"({pods_read} read by the last pass).", "",
        "| what | Skiff / kubesim | target |", "| --- | --- | --- |",
        f"| one usage pass over {N_PODS} pods (max of 3) | {max(passes) * 1000:.0f} ms | within one scrape "
        "interval (15 s) |",
        f"| `kubectl top pod -A` ({rows} rows; min / max of 3, process start included) | {min(tops):.2f} s / "
        f"{max(tops):.2f} s | <= 1 s |",
        f"| GET every PodMetrics ({size_all / 1e6:.1f} MB; min / max of 5) | {min(raws) * 1000:.0f} ms / {max(raws) * 1000:.0f} ms | - |",
        f"| cAdvisor scrape of all {N_NODES} nodes through the node proxy | {scrape * 1000:.0f} ms, "
        f"{size / 1e6:.1f} MB, {requests} requests | requests per scrape = nodes, not pods |",
    ]) + "\n"


async def _call(fn):
    return fn()
