"""``metrics.k8s.io/v1beta1`` on kubesim, through the real kubectl (``kubectl top``), as metrics-server serves it.

metrics-server (github.com/kubernetes-sigs/metrics-server): pkg/api/install.go serves NodeMetrics and PodMetrics
(get, list) in discovery; pkg/storage/types.go ``resourceUsage`` makes CPU the rate between the last two readings
(nanocores), memory the last working set, ``window`` their distance; pkg/api/pod.go ``Get`` answers 404
``podmetrics.metrics.k8s.io "<ns>/<name>" not found`` for a pod without metrics yet. The readings are the pods'
cgroups, read as cAdvisor does (working set = usage - inactive_file: container/libcontainer/handler.go), or a
scripted pod's annotations.

The CPU check compares with what the process itself says it got (its own ``time.process_time``), not with a
fixed 1000m: on a shared machine a busy loop gets what the scheduler gives it; alone it shows about 1000m.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from kubernetes.client import CoreV1Api

from kubesim import KubeSim
from kubesim.controllers.framework import Timing
from kubesim.testing import sync_api_client, wait_until
from tests.integration.kubesim.test_kubectl import _binaries
from tests.support.kubesim.procrt_support import PROCESS_NODES, log, pod

MiB = 1 << 20
BURN = ("import time\nlast = time.monotonic()\nwhile True:\n    if time.monotonic() - last >= 1:\n"
        "        last = time.monotonic()\n        print(last, time.process_time(), flush=True)\n")
HOLD = "import time\nblock = bytearray(300 * 1024 * 1024)\nfor i in range(0, len(block), 4096): block[i] = 1\n" \
       "print('held', flush=True)\ntime.sleep(600)\n"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """Process nodes, usage read every second (metrics-server's --metric-resolution, 15 s by default); a pod
    burning CPU, one holding 300 MiB, and a scripted one with steady use from its annotations."""
    sim = KubeSim(nodes=PROCESS_NODES, timing=Timing(metric_resolution=1.0)).start()
    api = sync_api_client(sim.url)
    core = CoreV1Api(api)
    py = [sys.executable, "-c"]
    core.create_namespaced_pod("default", pod("burn", [*py, BURN], container={"image": "skiff/venv"}))
    core.create_namespaced_pod("default", pod("hold", [*py, HOLD], container={
        "image": "skiff/venv", "resources": {"limits": {"memory": "1Gi"}}}))
    scripted = pod("steady", ["sleep", "600"], nodeName="proc-2", container={
        "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "128Mi"}}})
    scripted["metadata"]["annotations"] = {"kubesim.io/duration": "600", "kubesim.io/cpu-usage": "250m",
                                           "kubesim.io/memory-usage": "64Mi", "kubesim.io/gpu-util": "35"}
    core.create_namespaced_pod("default", scripted)
    sim.kubeconfig_path = sim.write_kubeconfig(tmp_path_factory.mktemp("top") / "kubeconfig")
    yield sim, core
    api.close()
    sim.stop()


def kubectl(binary: str, sim, *args: str) -> str:
    env = {**os.environ, "KUBECONFIG": str(sim.kubeconfig_path), "HOME": str(sim.kubeconfig_path.parent)}
    proc = subprocess.run([binary, *args], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {proc.stderr or proc.stdout}"
    return proc.stdout


def table(out: str) -> dict[tuple[str, ...], list[str]]:
    lines = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.strip()]
    return {tuple(r[:2]) if len(lines[0]) == 4 and lines[0][1] == "NAME" else (r[0],): r for r in lines[1:]}


def milli(text: str) -> int:
    return int(text.rstrip("m"))


def mebi(text: str) -> int:
    return int(text.rstrip("Mi"))


def started_log(core, name: str) -> str:
    from kubernetes.client.exceptions import ApiException
    try:
        return log(core, name)
    except ApiException:   # 400 while the container is being created
        return ""


def process_rate(core) -> float:
    """The CPU the burning process says it got over its last logged seconds (cores)."""
    rows = [tuple(map(float, line.split())) for line in log(core, "burn").splitlines()[-6:]]
    (t0, c0), (t1, c1) = rows[0], rows[-1]
    return (c1 - c0) / (t1 - t0)


@pytest.mark.parametrize("binary", _binaries())
def test_kubectl_top_pod_shows_what_the_cgroups_used(sim, binary):
    sim, core = sim
    wait_until(lambda: len(started_log(core, "burn").splitlines()) >= 6 and "held" in started_log(core, "hold"), 60,
               what="burn logging its CPU for 6 s, hold holding 300 MiB")
    out = wait_until(lambda: (o := kubectl(binary, sim, "top", "pod", "--containers")) and "hold" in o and
                     "steady" in o and o, 30, what="kubectl top pod listing all three")
    rows = table(out)
    used, said = milli(rows[("burn", "main")][2]) / 1000, process_rate(core)
    assert used == pytest.approx(said, rel=0.3, abs=0.1), (out, said)     # alone on the machine: about 1000m
    assert abs(mebi(rows[("hold", "main")][3]) - 300) <= 30, out            # its working set, within 10 %
    assert rows[("steady", "main")][2:] == ["250m", "64Mi"], out             # a scripted pod's annotations
    nodes = table(kubectl(binary, sim, "top", "node"))
    assert set(nodes) == {("proc-1",), ("proc-2",)}
    assert nodes[("proc-2",)][1:4:2] == ["250m", "64Mi"]                     # the sum of its pods


def test_the_metrics_api_documents_as_metrics_server_writes_them(sim):
    sim, core = sim
    api = sync_api_client(sim.url)
    try:
        def get(path):
            return json.loads(api.call_api(path, "GET", _preload_content=False).data)
        groups = {g["name"]: g for g in get("/apis")["groups"]}
        assert groups["metrics.k8s.io"]["preferredVersion"]["version"] == "v1beta1"
        kinds = {r["name"]: (r["kind"], r["namespaced"], r["verbs"])
                 for r in get("/apis/metrics.k8s.io/v1beta1")["resources"]}
        assert kinds == {"nodes": ("NodeMetrics", False, ["get", "list"]),
                         "pods": ("PodMetrics", True, ["get", "list"])}
        doc = wait_until(lambda: next((p for p in get("/apis/metrics.k8s.io/v1beta1/pods")["items"]
                                       if p["metadata"]["name"] == "steady"), None), 30, what="steady's metrics")
        assert doc["kind"] == "PodMetrics" and re.fullmatch(r"\d+(\.\d+)?s", doc["window"]), doc
        (container,) = doc["containers"]
        assert container["name"] == "main" and container["usage"]["memory"] == "64Mi"
        assert re.fullmatch(r"\d+n", container["usage"]["cpu"])      # nanocores, as metrics-server writes them
        assert int(container["usage"]["cpu"][:-1]) == pytest.approx(250_000_000, abs=1000)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", doc["timestamp"])
        core.create_namespaced_pod("default", pod("fresh", ["sleep", "600"], nodeName="nowhere"))  # never runs
        from kubernetes.client.exceptions import ApiException
        with pytest.raises(ApiException) as err:     # no readings: metrics-server's 404, named ns/name
            api.call_api("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/fresh", "GET",
                         _preload_content=False)
        assert err.value.status == 404
        assert json.loads(err.value.body)["message"] == 'podmetrics.metrics.k8s.io "default/fresh" not found'
        bad = pod("bad", ["sleep", "1"])
        bad["metadata"]["annotations"] = {"kubesim.io/cpu-usage": "lots"}
        with pytest.raises(ApiException) as err:     # refused at admission, naming the annotation
            core.create_namespaced_pod("default", bad)
        assert err.value.status == 422 and "annotations[kubesim.io/cpu-usage]" in err.value.body
        selected = get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dnone")
        assert selected["kind"] == "PodMetricsList" and selected["items"] == []
    finally:
        api.close()


def _series(text: str) -> dict[tuple[str, str], tuple[dict, float]]:
    """{(name, pod): (labels, value)} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r'(\w+)\{(.*)\} (\S+)(?: \d+)?', line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m[2]))
            out[(m[1], labels.get("pod", ""))] = (labels, float(m[3]))
    return out


def test_cadvisor_and_dcgm_series_through_the_node_proxy(sim):
    """The kubelet's /metrics/cadvisor with cAdvisor's names and labels; dcgm-exporter's on the node's :9400,
    simulated and saying so."""
    sim, core = sim
    api = sync_api_client(sim.url)
    try:
        def text(path):
            return api.call_api(path, "GET", _preload_content=False).data.decode()
        wait_until(lambda: ("container_cpu_usage_seconds_total", "burn") in _series(
            text("/api/v1/nodes/proc-1/proxy/metrics/cadvisor")), 30, what="burn in proc-1's cAdvisor series")
        first = _series(text("/api/v1/nodes/proc-1/proxy/metrics/cadvisor"))
        labels, cpu0 = first[("container_cpu_usage_seconds_total", "burn")]
        assert labels["container"] == "main" and labels["namespace"] == "default" and labels["cpu"] == "total"
        assert labels["image"] == "skiff/venv" and labels["id"].startswith("/kubepods/")
        assert abs(first[("container_memory_working_set_bytes", "hold")][1] / MiB - 300) <= 30
        assert first[("container_spec_memory_limit_bytes", "hold")][1] == 1024 * MiB
        wait_until(lambda: _series(text("/api/v1/nodes/proc-1/proxy/metrics/cadvisor"))[
            ("container_cpu_usage_seconds_total", "burn")][1] > cpu0 + 0.05, 15, what="burn's CPU counter growing")
        gpu = text("/api/v1/nodes/proc-2:9400/proxy/metrics")
        assert "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %). SIMULATED by kubesim" in gpu
        labels, util = _series(gpu)[("DCGM_FI_DEV_GPU_UTIL", "steady")]
        assert util == 35 and labels["container"] == "main" and labels["gpu"] == "0"
        assert ("DCGM_FI_DEV_FB_USED", "steady") in _series(gpu)
        assert "DCGM_FI_DEV_GPU_UTIL{" not in text("/api/v1/nodes/proc-1:9400/proxy/metrics")   # no GPU held
    finally:
        api.close()
