"""Shared informers (client-go's idea, small): one ``list_and_watch`` per (resource, namespace, label selector)
for a whole process, a local cache, and any number of subscribers.

The triggerer runs every deferred task's trigger in one event loop; with one watch per trigger the API
server's open watches grow with the number of waiting tasks. Here triggers that need objects of the same
resource in the same namespace share one watch: each ``subscribe``s with a ``match`` (e.g. "my Job") and a
``handler``, and the informer runs while anyone is subscribed (reference counting), then stops.

What a subscriber sees, in order:
* on subscribing, an ``ADDED`` for each cached object it matches (absence means nothing: the cache may
  not have caught up with an object created a moment ago); or, with ``snapshot=True``, one ``SYNC`` of them
  if the informer has listed already (for a consumer that diffs later changes against "everything now");
* every later ``ADDED`` / ``MODIFIED`` / ``DELETED`` of a matching object;
* a ``SYNC`` (its matching objects, complete) whenever the server was listed (the first list, or a re-list
  after 410 Gone): absence from it means the object is gone.
A cut watch, 410 and back-off are ``list_and_watch``'s; if it gives up, every subscription's ``check()``
raises its ``KubeError`` and the next subscriber starts a fresh informer. A triggerer restart starts from
nothing: the triggers subscribe again and the informers list again.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from operators.k8s import connection
from operators.k8s.resource import Resource
from operators.k8s.watch import WatchEvent, list_and_watch

log = logging.getLogger("skiff.k8s")

Handler = Callable[[WatchEvent], None]
Match = Callable[[dict], bool]


def _name(obj: dict) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


@dataclass(eq=False)
class Subscription:
    informer: Informer
    match: Match
    handler: Handler

    def check(self) -> None:
        """Raise the informer's error if its watch gave up."""
        if self.informer.error is not None:
            raise self.informer.error

    def deliver(self, ev: WatchEvent) -> None:
        if ev.type == "SYNC":
            ev = WatchEvent("SYNC", items=[o for o in ev.items if self.match(o)])
        elif not self.match(ev.object):
            return
        try:
            self.handler(ev)
        except Exception:  # one subscriber's bug must not stop the others' watch
            log.exception("informer subscriber failed on %s", ev.type)


class Informer:
    def __init__(self, client: Callable[[], AbstractAsyncContextManager], res: Resource, namespace: str | None, label_selector: str | None) -> None:
        self.client, self.res, self.namespace, self.label_selector = client, res, namespace, label_selector
        self.cache: dict[str, dict] = {}  # "namespace/name" -> object
        self.subscriptions: list[Subscription] = []
        self.error: BaseException | None = None
        self.synced = False  # listed at least once: the cache is complete as of some resourceVersion
        # an empty context: the informer outlives the subscriber that started it, and the triggerer would route
        # its log lines (by structlog contextvars) into that one task's log file
        self.task = asyncio.create_task(self._run(), name=f"informer {res.plural} {namespace} {label_selector}",
                                        context=contextvars.Context())

    async def _run(self) -> None:
        try:
            async with self.client() as api:
                async for ev in list_and_watch(api, self.res, self.namespace, label_selector=self.label_selector):
                    self._apply(ev)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to every subscriber through check()
            log.warning("informer %s in %s gave up: %s", self.res.plural, self.namespace, exc)
            self.error = exc

    def _apply(self, ev: WatchEvent) -> None:
        if ev.type == "SYNC":
            self.cache = {_name(o): o for o in ev.items}
            self.synced = True
        elif ev.type == "DELETED":
            self.cache.pop(_name(ev.object), None)
        else:
            self.cache[_name(ev.object)] = ev.object
        for sub in list(self.subscriptions):
            sub.deliver(ev)

    def add(self, match: Match, handler: Handler, snapshot: bool = False) -> Subscription:
        sub = Subscription(self, match, handler)
        self.subscriptions.append(sub)
        if snapshot and self.synced:
            sub.deliver(WatchEvent("SYNC", items=list(self.cache.values())))
        else:
            for obj in list(self.cache.values()):
                sub.deliver(WatchEvent("ADDED", obj))
        return sub


class Informers:
    """The informers of one connection in one event loop. ``client`` opens an ``ApiClient`` context; one is
    shared (``api()``) by the running informers and by any caller that needs the connection meanwhile (the
    triggers' log streams and reads): opened by the first user, closed with the last. One client, not one
    per trigger: each costs a connection pool and an SSL context (about 1 MiB and 10 ms of CPU)."""

    def __init__(self, client: Callable[[], AbstractAsyncContextManager]) -> None:
        self.client = client
        self.informers: dict[tuple, Informer] = {}
        self._lock = asyncio.Lock()
        self._users = 0
        self._api = None
        self._stack: AsyncExitStack | None = None

    @asynccontextmanager
    async def api(self) -> AsyncIterator:
        """The shared ``ApiClient`` (give ``client`` no connection limit when many will stream at once)."""
        async with self._lock:
            if self._users == 0:
                self._stack = AsyncExitStack()
                self._api = await self._stack.enter_async_context(self.client())
            self._users += 1
        try:
            yield self._api
        finally:
            async with self._lock:
                self._users -= 1
                if self._users == 0:
                    await self._stack.aclose()
                    self._api = self._stack = None

    @property
    def watches(self) -> int:
        return len(self.informers)

    @asynccontextmanager
    async def subscribe(self, res: Resource, namespace: str | None, label_selector: str | None, match: Match,
                        handler: Handler, snapshot: bool = False) -> AsyncIterator[Subscription]:
        key = (res, namespace, label_selector)
        informer = self.informers.get(key)
        if informer is None or informer.error is not None:
            informer = self.informers[key] = Informer(self.api, res, namespace, label_selector)
        sub = informer.add(match, handler, snapshot)
        try:
            yield sub
        finally:
            informer.subscriptions.remove(sub)
            if not informer.subscriptions:  # the last one out stops the watch
                if self.informers.get(key) is informer:
                    del self.informers[key]
                informer.task.cancel()
                await asyncio.gather(informer.task, return_exceptions=True)


_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> {conn id: Informers}


def shared_informers(conn_id: str | None = None) -> Informers:
    """This process's informers for the connection, in the running event loop (the triggerer's)."""
    conn = connection.conn_id(conn_id)
    per_loop = _SHARED.setdefault(asyncio.get_running_loop(), {})
    if conn not in per_loop:
        # no connection limit: every watch and log stream of the process holds one connection of this client
        per_loop[conn] = Informers(lambda: connection.async_api_client(conn, max_connections=0))
    return per_loop[conn]
