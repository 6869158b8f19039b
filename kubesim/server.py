"""`KubeSim`: kubesim's API server (app.py) and cluster (cluster.py) served from a daemon thread of this
process, with the fault-injection API for tests (kubeconfig writing: kubeconfig.py)."""
from __future__ import annotations

import asyncio
import functools
import os
import socket
import threading
from pathlib import Path

from aiohttp import web

from kubesim import controls
from kubesim import tls as tls_mod
from kubesim.apiserver.auth.authz import Access
from kubesim.apiserver.endpoints.app import ApiServer
from kubesim.apiserver.endpoints.routes_discovery import GIT_VERSION  # noqa: F401  (kubesim.server.GIT_VERSION)
from kubesim.apiserver.registry.store import Store
from kubesim.controls import TestControls
from kubesim.kubeconfig import kubeconfig, write_kubeconfig  # noqa: F401  (kubesim.server.write_kubeconfig)


def _cluster_class():
    """kubesim.cluster.Cluster if that module exists (the API server works without it)."""
    try:
        from kubesim.cluster import Cluster
    except ModuleNotFoundError as e:
        if e.name != "kubesim.cluster":
            raise
        return None
    return Cluster


class KubeSim:
    """kubesim in a daemon thread of this process: `start()`, `.url`, `reset()` between tests, `stop()`."""

    def __init__(self, nodes=None, timing=None, history: int = 10000, port: int = 0, host: str = "127.0.0.1",
                 bookmark_interval: float = 5.0, with_cluster: bool | None = None, authz: str | None = None,
                 kueue: bool = False, tls: bool = False):
        self.nodes, self.timing, self.history = nodes, timing, history
        self.kueue = kueue        # install Kueue's CRDs at start and after every reset (kubesim.kueue)
        # tls: HTTPS with a self-signed certificate (kubesim.tls), which kubectl needs to send its token
        self.cert_pem, self._key_pem = tls_mod.self_signed(host) if tls else (None, None)
        if authz not in (None, "none", "rbac"):
            raise ValueError(f"authz must be 'rbac' or None, not {authz!r}")
        # with_cluster=False (or env KUBESIM_CLUSTER=0): the API server alone, no controllers
        self.with_cluster = os.environ.get("KUBESIM_CLUSTER", "1") != "0" if with_cluster is None else with_cluster
        self.host, self.port = host, port
        self.store = Store(history=history)
        self.controls = TestControls()
        self.cluster = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.access = Access(self.store, enforce=authz == "rbac")    # kubesim.apiserver.auth.authz: tokens, RBAC
        self.api = ApiServer(self.store, self.controls, bookmark_interval, self.access)
        self.api.test_api = functools.partial(controls.handle, self.controls, self.store)  # /kubesim/...
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.cert_pem else 'http'}://{self.host}:{self.port}"

    # -- lifecycle --

    def start(self) -> KubeSim:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="kubesim", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError("kubesim failed to start") from self._error
        if not self._ready.is_set():
            raise RuntimeError("kubesim did not start within 30 s")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:     # surfaced by start()
            self._error = e
            self._ready.set()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        # handler_cancellation: a client that goes away cancels its handler, so its watch closes at once
        self._runner = web.AppRunner(self.api.app, access_log=None, handle_signals=False,
                                     handler_cancellation=True)
        await self._runner.setup()
        # backlog: the accept queue for a burst of new connections (aiohttp defaults to 128; a dropped SYN
        # costs the client a 1 s retransmit). The kernel caps it at net.core.somaxconn.
        ssl_context = tls_mod.server_context(self.cert_pem, self._key_pem) if self.cert_pem else None
        await web.SockSite(self._runner, sock, shutdown_timeout=0.5, backlog=4096, ssl_context=ssl_context).start()
        await self._start_cluster()
        self._ready.set()
        await self._stopped.wait()
        self.store.close_watches()
        await self._stop_cluster()
        await self._runner.cleanup()

    async def _start_cluster(self) -> None:
        cls = _cluster_class() if self.with_cluster else None
        if cls is None:
            self.cluster = None
            return
        self.cluster = cls(self.store, nodes=self.nodes, timing=self.timing)
        await self.cluster.start()
        if self.kueue:
            from kubesim import kueue
            kueue.install(self.store)

    async def _stop_cluster(self) -> None:
        if self.cluster is not None:
            await self.cluster.stop()
            self.cluster = None

    def stop(self) -> None:
        if self._thread is None or self.loop is None:
            return
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(30)
        self._thread = None

    def run(self, coro, timeout: float = 60):
        """Run a coroutine on kubesim's loop from another thread and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def reset(self) -> None:
        """Fresh store (default namespaces), cluster re-installed, faults/latency/stats cleared."""
        async def _reset():
            await self._stop_cluster()
            self.store.clear()
            self.controls.clear()
            self.controls.reset_stats()
            await self._start_cluster()
        self.run(_reset())

    # -- clients and config --

    def write_kubeconfig(self, path, **kw) -> Path:
        """A kubeconfig for this server (`token`, `user`, `namespace` as `kubeconfig()`; the admin's by default)."""
        return write_kubeconfig(self.url, path, ca_pem=self.cert_pem, **kw)

    def api_client(self):
        import kubernetes.client
        cfg = kubernetes.client.Configuration()
        cfg.host = self.url
        return kubernetes.client.ApiClient(cfg)

    # -- fault injection (same as the HTTP test API) --

    def fail(self, verb: str = "*", path: str = ".*", status: int = 500, count: int | None = 1,
             message: str | None = None) -> None:
        """Fail the next `count` requests (None = all) whose verb and path (regex, searched) match."""
        self.loop.call_soon_threadsafe(self.controls.add_fault, verb, path, status, count, message)
        self._sync()

    def add_latency(self, verb: str = "*", path: str = ".*", seconds: float = 0.1,
                    count: int | None = None) -> None:
        self.loop.call_soon_threadsafe(self.controls.add_latency, verb, path, seconds, count)
        self._sync()

    def lose_answers(self, verb: str = "*", path: str = ".*", count: int | None = 1) -> None:
        """Serve the next `count` matching requests (the write is committed), then close the connection
        before the answer: what a client sees when a proxy or the API server dies mid-reply."""
        self.loop.call_soon_threadsafe(self.controls.add_lost, verb, path, count)
        self._sync()

    def set_faults(self, rate: float, seed: int = 0, **kw) -> None:
        """Rate-based faults (controls.Chaos: kinds, verb, path, slow_seconds, cut_every); rate 0 or
        clear_faults() stops them."""
        from kubesim.controls import Chaos, chaos_from

        chaos = chaos_from({"rate": rate, "seed": seed, **kw})

        async def install(c: Chaos):
            self.controls.set_chaos(c, self.store)
        self.run(install(chaos))

    def clear_faults(self) -> None:
        self.loop.call_soon_threadsafe(self.controls.clear)
        self._sync()

    def cut_watches(self) -> int:
        """Close every open watch connection; returns how many there were."""
        return self.store.close_watches()

    def stats(self) -> dict:
        return self.controls.stats()

    def reset_stats(self) -> None:
        self.loop.call_soon_threadsafe(self.controls.reset_stats)
        self._sync()

    def _sync(self) -> None:
        async def noop():
            return None
        self.run(noop())
