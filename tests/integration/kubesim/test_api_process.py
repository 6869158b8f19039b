"""kubesim as a process (`python -m kubesim`) and through kubeconfig files: both clients and Airflow's
KubernetesHook / AsyncKubernetesHook work against it unchanged, as against a real cluster."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import kubernetes
import kubernetes_asyncio
import pytest

import kubesim

REPO = Path(kubesim.__file__).resolve().parents[1]


def start_process(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, str, Path]:
    kubeconfig = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", str(kubeconfig),
                             *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()      # blocks until the server accepts requests (or the process dies)
    assert line.startswith("kubesim ready http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
    return proc, line.split()[-1], kubeconfig


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_process_mode_ready_line_and_clean_stop(tmp_path, sig):
    """`python -m kubesim --port P --kubeconfig PATH` writes the kubeconfig, prints exactly one line
    `kubesim ready <url>` once it accepts requests, serves both clients through that kubeconfig, and exits 0
    on SIGTERM and SIGINT."""
    proc, url, path = start_process(tmp_path)
    try:
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(path), client_configuration=cfg)
        assert cfg.host == url
        with kubernetes.client.ApiClient(cfg) as api:
            core = kubernetes.client.CoreV1Api(api)
            core.create_namespaced_config_map("default", {"metadata": {"name": "p"}, "data": {"a": "1"}})
            names = {n.metadata.name for n in core.list_namespace().items}
            assert {"default", "kube-system", "kube-public"} <= names
        acfg = kubernetes_asyncio.client.Configuration()
        await kubernetes_asyncio.config.load_kube_config(config_file=str(path), client_configuration=acfg)
        async with kubernetes_asyncio.client.ApiClient(acfg) as aapi:
            cm = await kubernetes_asyncio.client.CoreV1Api(aapi).read_namespaced_config_map("p", "default")
            assert cm.data == {"a": "1"}
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        assert proc.stdout.read() == ""       # nothing after the ready line
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_kubeconfig_shape(apisim, tmp_path):
    """The kubeconfig has cluster, user and context `kubesim` over plain http and is current."""
    import yaml
    cfg = yaml.safe_load(apisim.write_kubeconfig(tmp_path / "kc").read_text())
    assert cfg["current-context"] == "kubesim"
    assert cfg["clusters"][0] == {"name": "kubesim", "cluster": {"server": apisim.url}}
    assert cfg["contexts"][0]["context"]["cluster"] == "kubesim"


@pytest.fixture
def kubernetes_default(kubesim, kubeconfig, monkeypatch):
    """Airflow connection `kubernetes_default` with extra kube_config_path (as a JSON env connection)."""
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}}))
    return kubesim


def test_airflow_kubernetes_hook(kubernetes_default):
    """KubernetesHook(conn kubernetes_default).core_v1_client talks to kubesim (no Airflow DB needed)."""
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
    hook = KubernetesHook()
    names = {n.metadata.name for n in hook.core_v1_client.list_namespace().items}
    assert {"default", "kube-system"} <= names
    hook.core_v1_client.create_namespaced_config_map("default", {"metadata": {"name": "from-hook"}})
    assert kubernetes_default.store.get(
        kubernetes_default.store.registry.lookup("", "v1", "configmaps"), "default", "from-hook")


async def test_airflow_async_kubernetes_hook(kubernetes_default):
    """AsyncKubernetesHook reads a pod from kubesim through kubernetes_asyncio."""
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
    sim = kubernetes_default
    pods = sim.store.registry.lookup("", "v1", "pods")
    sim.store.create(pods, "default", {"metadata": {"name": "hooked"},
                                       "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    hook = AsyncKubernetesHook(conn_id="kubernetes_default")
    pod = await hook.get_pod("hooked", "default")
    assert pod.metadata.name == "hooked" and pod.metadata.namespace == "default"


def test_process_help():
    """`python -m kubesim --help` (run from the checkout, as the demo does) documents its options."""
    out = subprocess.run([sys.executable, "-m", "kubesim", "--help"], cwd=REPO, capture_output=True, text=True,
                         env={**os.environ}, timeout=60)
    assert out.returncode == 0 and "--kubeconfig" in out.stdout


def test_process_start_failure_is_one_error_line(tmp_path):
    """If kubesim cannot start (here: the port is taken) it prints one `kubesim: error:` line, exits 2."""
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run([sys.executable, "-m", "kubesim", "--port", str(port), "--kubeconfig",
                              str(tmp_path / "kc")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("kubesim: error: ") and "Address already in use" in out.stderr


@pytest.fixture
def api_only_connection(apisim, tmp_path, monkeypatch):
    """kubernetes_default pointing at the API-only server (no kubelet writing events of its own)."""
    path = apisim.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": str(path)}}))
    return apisim


async def test_airflow_async_hook_watches_pod_events(api_only_connection):
    """AsyncKubernetesHook.watch_pod_events (the provider's deferrable path) watches events with
    fieldSelector involvedObject.name, resumes after timeoutSeconds, and stops once the pod is terminal;
    get_pod_events lists with resourceVersionMatch=NotOlderThan."""
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
    store = api_only_connection.store
    pods, events = store.registry.lookup("", "v1", "pods"), store.registry.lookup("", "v1", "events")
    store.create(pods, "default", {"metadata": {"name": "watched"},
                                   "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    for i, (obj, reason) in enumerate([("watched", "Scheduled"), ("other", "Scheduled"), ("watched", "Pulled")]):
        store.create(events, "default", {"metadata": {"name": f"e{i}"}, "reason": reason, "type": "Normal",
                                         "involvedObject": {"kind": "Pod", "name": obj, "namespace": "default"}})
    hook = AsyncKubernetesHook(conn_id="kubernetes_default")
    listed = await hook.get_pod_events("watched", "default", resource_version=store.resource_version)
    assert [e.reason for e in listed.items] == ["Scheduled", "Pulled"]
    seen = []
    async for event in hook.watch_pod_events("watched", "default", timeout_seconds=1):
        seen.append(event.reason)
        if len(seen) == 2:   # the pod ends: the hook's next reconnect sees a terminal phase and stops
            store.patch(pods, "default", "watched", "application/merge-patch+json",
                        {"status": {"phase": "Succeeded"}}, subresource="status")
    assert seen == ["Scheduled", "Pulled"]


def test_process_nodes_file(tmp_path):
    """`--nodes FILE` replaces the default nodes; a malformed file is one error line and exit 2."""
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text("- {name: big-gpu, cpu: 32, memory: 128Gi, gpu: 8}\n- {name: small}\n")
    env = {k: v for k, v in os.environ.items() if k != "KUBESIM_CLUSTER"}
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig",
                             str(tmp_path / "kc"), "--nodes", str(nodes)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("kubesim ready "), proc.stderr.read() if proc.poll() is not None else line
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(tmp_path / "kc"), client_configuration=cfg)
        with kubernetes.client.ApiClient(cfg) as api:
            listed = kubernetes.client.CoreV1Api(api).list_node().items
        assert sorted(n.metadata.name for n in listed) == ["big-gpu", "small"]
        big = next(n for n in listed if n.metadata.name == "big-gpu")
        assert big.status.allocatable["nvidia.com/gpu"] == "8"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    nodes.write_text("- {name: broken\n")
    out = subprocess.run([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", str(tmp_path / "kc2"),
                          "--nodes", str(nodes)], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.startswith("kubesim: error: ") and out.stdout == ""
