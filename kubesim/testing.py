"""pytest fixtures for kubesim (registered by `pytest_plugins = ["kubesim.testing"]` in tests/conftest.py).

- `kubesim_server` (session): one KubeSim started for the whole run.
- `kubesim` (function): the same server, reset to a fresh cluster before the test.
- `kubeconfig` (session): a kubeconfig file path for it.
- `k8s`: a `kubernetes.client.ApiClient` for it; `k8s_async`: a `kubernetes_asyncio` ApiClient.
- `async_api_client(url)`: an async context manager giving a `kubernetes_asyncio` ApiClient.
- `kubesim_kueue_server` (session) / `kubesim_kueue` (function, reset): a KubeSim with Kueue installed.
- `kubesim_rbac_server` (session) / `kubesim_rbac` (function, reset, 403 log cleared): a KubeSim enforcing
  RBAC (`authz="rbac"`); `sync_api_client(url, token="kubesim")` is its admin, a ServiceAccount's client comes
  from `kubesim.apiserver.auth.authz.write_service_account_kubeconfig`.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import pytest

from kubesim.server import KubeSim


def sync_api_client(url: str, token: str | None = None):
    import kubernetes.client
    cfg = kubernetes.client.Configuration()
    cfg.host = url
    if token:
        cfg.api_key = {"BearerToken": token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return kubernetes.client.ApiClient(cfg)


@asynccontextmanager
async def async_api_client(url: str):
    from kubernetes_asyncio import client
    cfg = client.Configuration()
    cfg.host = url
    api = client.ApiClient(cfg)
    try:
        yield api
    finally:
        await api.close()


def _timed_out(timeout: float, what, predicate) -> TimeoutError:
    return TimeoutError(f"condition not met within {timeout} s: {what or predicate}")


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, what: str = ""):
    """The one polling helper: call `predicate()` until it is truthy (and return that value), or raise
    TimeoutError naming `what`. Never a bare sleep in a test."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, predicate)
        time.sleep(interval)


async def async_wait_until(predicate, timeout: float = 10.0, interval: float = 0.02, what: str = ""):
    """`wait_until` for async tests (the loop keeps running while it waits); `predicate` may be sync or async."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, predicate)
        await asyncio.sleep(interval)


@pytest.fixture(scope="session")
def kubesim_server():
    sim = KubeSim().start()
    yield sim
    sim.stop()


@pytest.fixture
def kubesim(kubesim_server):
    kubesim_server.reset()
    yield kubesim_server


@pytest.fixture(scope="session")
def kubeconfig(kubesim_server, tmp_path_factory):
    return str(kubesim_server.write_kubeconfig(tmp_path_factory.mktemp("kubesim") / "kubeconfig"))


@pytest.fixture
def k8s(kubesim):
    api = sync_api_client(kubesim.url)
    yield api
    api.close()


@pytest.fixture
async def k8s_async(kubesim):
    async with async_api_client(kubesim.url) as api:
        yield api


@pytest.fixture(scope="session")
def kubesim_rbac_server():
    sim = KubeSim(authz="rbac").start()
    yield sim
    sim.stop()


@pytest.fixture
def kubesim_rbac(kubesim_rbac_server):
    kubesim_rbac_server.reset()
    kubesim_rbac_server.access.denials.clear()
    yield kubesim_rbac_server


@pytest.fixture(scope="session")
def kubesim_kueue_server():
    from kubesim.kubelet.nodes import DEFAULT_NODES
    # two big untainted nodes besides the default set: Kueue's documented examples use 9- to 21-CPU Jobs
    big = [{"name": f"big-{i}", "cpu": 32, "memory": "128Gi"} for i in (1, 2)]
    sim = KubeSim(kueue=True, nodes=DEFAULT_NODES + big).start()
    yield sim
    sim.stop()


@pytest.fixture
def kubesim_kueue(kubesim_kueue_server):
    """A fresh cluster with Kueue installed (its CRDs served, kubesim.kueue's controllers running)."""
    kubesim_kueue_server.reset()
    yield kubesim_kueue_server
