"""Run kubesim API tests through both clients: `kubernetes` (sync) and `kubernetes_asyncio`."""
from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager

import kubernetes
import kubernetes_asyncio
import pytest

from kubesim.testing import async_api_client, async_wait_until, sync_api_client

API_EXCEPTIONS = (kubernetes.client.exceptions.ApiException, kubernetes_asyncio.client.exceptions.ApiException)


class Events(list):
    """Watch events collected in the background: (type, object model) pairs."""

    async def wait_for(self, predicate, timeout: float = 10.0):
        try:
            await async_wait_until(lambda: predicate(self), timeout, 0.01, what="watch condition")
        except TimeoutError:
            raise AssertionError(f"watch condition not met within {timeout} s; got {self.summary()}") from None
        return self

    def summary(self):
        return [(t, getattr(getattr(o, "metadata", None), "name", o)) for t, o in self]


class Kube:
    """One client flavour behind one async interface: `await kube.api("CoreV1Api").list_namespace()`."""

    def __init__(self, flavour: str, sync_client, async_client, sim=None):
        self.flavour = flavour
        self.sim = sim
        self.sync_client, self.async_client = sync_client, async_client
        self.client = sync_client if flavour == "kubernetes" else async_client

    def api(self, name: str):
        if self.flavour == "kubernetes":
            target = getattr(kubernetes.client, name)(self.sync_client)

            class _Sync:
                def __getattr__(self, attr):
                    fn = getattr(target, attr)

                    async def call(*a, **kw):
                        return fn(*a, **kw)
                    return call
            return _Sync()
        return getattr(kubernetes_asyncio.client, name)(self.async_client)

    async def error(self, coro) -> tuple[int, dict]:
        """Await a call that must fail; return (HTTP status, Status body)."""
        import json
        with pytest.raises(API_EXCEPTIONS) as info:
            await coro
        return info.value.status, json.loads(info.value.body)

    def watching(self, api_name: str, method: str, *args, **kwargs):
        return _Watching(self, api_name, method, args, kwargs)


class _Watching:
    """`async with kube.watching("CoreV1Api", "list_namespaced_pod", "default") as events:`"""

    def __init__(self, kube: Kube, api_name, method, args, kwargs):
        self.kube, self.api_name, self.method, self.args, self.kwargs = kube, api_name, method, args, kwargs
        self.events = Events()
        self.ended = threading.Event()
        self.error: BaseException | None = None

    async def __aenter__(self) -> Events:
        before = self.kube.sim.store.watches_opened if self.kube.sim else None
        await self._start()
        if before is not None:
            # return once the server holds the watch (or it already ended, e.g. 410), so that what the
            # test does next happens after the watch started: no race with the initial state
            await async_wait_until(lambda: self.kube.sim.store.watches_opened > before or self.ended.is_set(),
                                   10, 0.005, what="the watch to reach the server")
        self.events.ctx = self
        return self.events

    async def _start(self) -> None:
        if self.kube.flavour == "kubernetes":
            api = getattr(kubernetes.client, self.api_name)(self.kube.sync_client)
            self.watch = kubernetes.watch.Watch()

            def run():
                try:
                    for ev in self.watch.stream(getattr(api, self.method), *self.args, **self.kwargs):
                        self.events.append((ev["type"], ev["object"]))
                except BaseException as e:   # surfaced to the test via .error
                    self.error = e
                finally:
                    self.ended.set()
            threading.Thread(target=run, daemon=True).start()
        else:
            api = getattr(kubernetes_asyncio.client, self.api_name)(self.kube.async_client)
            self.watch = kubernetes_asyncio.watch.Watch()

            async def run():
                try:
                    async for ev in self.watch.stream(getattr(api, self.method), *self.args, **self.kwargs):
                        self.events.append((ev["type"], ev["object"]))
                except asyncio.CancelledError:
                    raise
                except BaseException as e:
                    self.error = e
                finally:
                    self.ended.set()
            self.task = asyncio.create_task(run())

    async def __aexit__(self, *exc):
        self.watch.stop()
        if self.kube.flavour != "kubernetes":
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass
        return False


@asynccontextmanager
async def kube_for(sim, flavour: str):
    sync = sync_api_client(sim.url)
    try:
        async with async_api_client(sim.url) as aclient:
            yield Kube(flavour, sync, aclient, sim)
    finally:
        sync.close()


@pytest.fixture(params=["kubernetes", "kubernetes_asyncio"])
def flavour(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def apisim_server():
    """The API tests run against kubesim's API server alone (no controllers, scheduler or kubelet acting
    on their objects), so what they observe is exactly the apiserver's behaviour."""
    from kubesim import KubeSim
    sim = KubeSim(with_cluster=False).start()
    yield sim
    sim.stop()


@pytest.fixture
def apisim(apisim_server):
    apisim_server.reset()
    yield apisim_server


@pytest.fixture
async def kube(flavour, apisim):
    async with kube_for(apisim, flavour) as k:
        yield k


@pytest.fixture(scope="module")
def small_sim():
    """A separate API-only kubesim keeping 5 watch events and sending bookmarks every 0.2 s."""
    from kubesim import KubeSim
    sim = KubeSim(history=5, bookmark_interval=0.2, with_cluster=False).start()
    yield sim
    sim.stop()


def pod(name: str | None = None, labels: dict | None = None, **spec) -> dict:
    md = {"name": name} if name else {"generateName": "p-"}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}], **spec}}


def configmap(name: str, data: dict | None = None, labels: dict | None = None) -> dict:
    md = {"name": name}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data or {"k": "v"}}


def deployment(name: str, replicas: int = 1) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}}


@pytest.fixture(scope="session")
def procsim_server():
    """kubesim with process nodes (kubesim/kubelet/procrt): the test_procrt_* modules' pods really run."""
    from kubesim import KubeSim
    from tests.support.kubesim.procrt_support import PROCESS_NODES
    sim = KubeSim(nodes=PROCESS_NODES).start()
    yield sim
    sim.stop()


@pytest.fixture
def pcore(procsim_server):
    """A CoreV1Api on a fresh process-node cluster."""
    from kubernetes.client import CoreV1Api
    procsim_server.reset()
    api = sync_api_client(procsim_server.url)
    yield CoreV1Api(api)
    api.close()
