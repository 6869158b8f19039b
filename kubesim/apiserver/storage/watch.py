"""Watches: `Event` (one committed change, kept in the store's history), `Watch` (one watcher's queue of
events, filtered by its namespace and selectors, turned into ADDED/DELETED when an object enters or leaves a
label selection), and `WatchIndex`, which finds the watches an event may concern without looking at the others."""
from __future__ import annotations

import asyncio
import json
import threading
from typing import Protocol

from kubesim.apimachinery.selectors import FieldSelector, LabelSelector
from kubesim.apiserver.registry.kinds import ResourceType
from kubesim.apiserver.registry.views import dumps, is_view, view


class WatchSource(Protocol):
    """What a `Watch` needs of the store that feeds it (the store is above this module, not imported)."""

    lock: threading.RLock
    _current_rv: int

    def _drop_watch(self, watch: Watch) -> None: ...


class Event:
    """One committed change. While it is fanned out it holds the objects; once settled (in the history) it
    keeps only their JSON, decoded again when a resumed watch or a list snapshot reads it: 10,000 kept
    events then cost their bytes, not 20,000 dicts."""

    __slots__ = ("rv", "type", "key", "namespace", "name", "data", "old_data", "_obj", "_old")

    def __init__(self, rv: int, type_: str, key: tuple[str, str], namespace: str, name: str, data: bytes,
                 old_data: bytes | None, obj: dict | None = None, old: dict | None = None):
        self.rv, self.type, self.key = rv, type_, key       # key: storage key (group, plural)
        self.namespace, self.name = namespace, name
        self.data, self.old_data = data, old_data           # the object, and the one it replaced, serialized
        self._obj, self._old = obj, old

    @property
    def obj(self) -> dict:
        return self._obj if self._obj is not None else json.loads(self.data)

    @property
    def old(self) -> dict | None:
        if self._old is not None:
            return self._old
        return json.loads(self.old_data) if self.old_data is not None else None

    def settle(self) -> None:
        """Drop the objects (the history keeps the bytes)."""
        self._obj = self._old = None


_UNSET = object()


def running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Watch:
    """An async iterator of (event_type, obj) for one watcher; `.close()` ends it."""

    _CLOSED = object()

    def __init__(self, store: WatchSource, rt: ResourceType, namespace: str | None, label: LabelSelector,
                 field: FieldSelector):
        self.store, self.rt, self.namespace = store, rt, namespace
        self.label, self.field = label, field
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.closed = False
        self.last_rv = 0       # every event of this watch up to here is in the queue or sent (bookmarks)
        # offers made on another thread and not yet in the queue (call_soon_threadsafe): while any is in
        # flight, an offer or close on the loop goes behind them, and no bookmark is sent (`progress`)
        self.in_flight = 0

    def _matches(self, obj: dict | None) -> bool:
        if obj is None:
            return False
        return self.label.matches(obj["metadata"].get("labels")) and (
            self.field.empty or self.field.matches(obj))

    def _translate(self, ev: Event) -> tuple[str, dict, bytes] | None:
        """The event as this watcher sees it: selectors turn MODIFIED into ADDED/DELETED, as the cache does."""
        if ev.key != self.rt.storage_key:
            return None
        if self.namespace is not None and ev.namespace != self.namespace:
            return None
        obj, data = ev.obj, ev.data
        converted = is_view(self.rt) or obj.get("apiVersion") != self.rt.api_version
        if converted:
            obj = view(self.rt, obj)
            data = dumps(obj)
        if self.label.empty and self.field.empty:
            return ev.type, obj, data
        now = self._matches(obj)
        if ev.type == "MODIFIED":
            before = self._matches(view(self.rt, ev.old) if converted else ev.old)
            if now and not before:
                return "ADDED", obj, data
            if before and not now:
                return "DELETED", obj, data
        return (ev.type, obj, data) if now else None

    def _offer(self, ev: Event, running=_UNSET) -> None:
        """Called under the store lock from any thread; `running`: the caller's running loop, if known."""
        item = self._translate(ev)
        if item is None or self.closed:
            return
        if running is _UNSET:
            running = running_loop()
        self._put((item[0], item[1], item[2], ev.rv), running)

    def _put(self, payload, running) -> None:
        """Into the queue in commit order: at once on the watch's loop unless offers from other threads are
        still in flight (then behind them, FIFO on the loop); from another thread through the loop."""
        if running is self.loop:
            if self.in_flight:
                self.in_flight += 1
                self.loop.call_soon(self._arrive, payload)
            else:
                self.queue.put_nowait(payload)
        elif not self.loop.is_closed():
            self.in_flight += 1
            try:
                self.loop.call_soon_threadsafe(self._arrive, payload)
            except RuntimeError:       # the watcher's loop closed between the check and the call
                self.in_flight -= 1
                self.closed = True

    def _arrive(self, payload) -> None:
        self.queue.put_nowait(payload)
        with self.store.lock:
            self.in_flight -= 1

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.store._drop_watch(self)
        with self.store.lock:      # after every event offered before it
            self._put(self._CLOSED, running_loop())

    def __aiter__(self):
        return self

    async def __anext__(self) -> tuple[str, dict]:
        item = await self.next_raw()
        if item is None:
            raise StopAsyncIteration
        return item[0], json.loads(item[2])

    async def progress(self) -> int | None:
        """The resourceVersion a BOOKMARK carries now: the store's, as kube-apiserver's watch cache sends its
        own progress (not the last event this watcher got), so a client resumes past writes it does not watch
        instead of from a version compacted away. None while events up to it are still queued or in flight
        from another thread: send them first. (kube-apiserver's cacher carries the last dispatched event's
        version in a bookmark and puts it into each watcher's input channel behind the events dispatched before
        it: k8s.io/apiserver/pkg/storage/cacher/cacher.go `dispatchEvents` / `dispatchEvent`, and
        cache_watcher.go `nonblockingAdd`, the channel `process` sends from in order.)"""
        with self.store.lock:  # a commit in progress elsewhere has offered its event once the lock is free
            if self.in_flight or not self.queue.empty():   # events up to `rv` not all sent yet
                return None
            rv = self.store._current_rv
        self.last_rv = max(self.last_rv, rv)
        return self.last_rv

    async def next_raw(self, timeout: float | None = None):
        """(type, obj, bytes, rv); None when closed; raises TimeoutError after `timeout` seconds."""
        if timeout is None:
            item = await self.queue.get()
        else:
            item = await asyncio.wait_for(self.queue.get(), timeout)
        if item is self._CLOSED:
            self.closed = True
            return None
        self.last_rv = item[3]
        return item


class WatchIndex:
    """The open watches, indexed so that a committed event is offered only to the watches it may concern:
    by storage key, namespace (None: all namespaces), the name of a `metadata.name=` field selector, and
    one `key=value` requirement of the label selector (each None when the watch has none). A watch is
    filed under one index key; an event looks up every key it could match — its namespace or None, its
    name or None, each label pair of the new and the replaced object (so objects leaving a selection are
    seen) or None — and each watch still applies all its selectors itself (`Watch._translate`)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple, set[Watch]] = {}
        self._key_of: dict[Watch, tuple] = {}

    def __len__(self) -> int:
        return len(self._key_of)

    def __iter__(self):
        return iter(list(self._key_of))

    def add(self, w: Watch) -> None:
        pairs = w.label.equality_pairs()
        key = (w.rt.storage_key, w.namespace, w.field.exact_name(), min(pairs) if pairs else None)
        self._key_of[w] = key
        self._by_key.setdefault(key, set()).add(w)

    def discard(self, w: Watch) -> None:
        key = self._key_of.pop(w, None)
        if key is None:
            return
        bucket = self._by_key[key]
        bucket.discard(w)
        if not bucket:
            del self._by_key[key]

    def candidates(self, ev: Event) -> list[Watch]:
        if not self._by_key:
            return []
        md = ev.obj["metadata"]
        pairs: set = {None, *(md.get("labels") or {}).items()}
        if ev.old is not None:
            pairs.update((ev.old["metadata"].get("labels") or {}).items())
        out: list[Watch] = []
        get = self._by_key.get
        for ns in {None, ev.namespace}:
            for name in (None, md.get("name")):
                for pair in pairs:
                    bucket = get((ev.key, ns, name, pair))
                    if bucket:
                        out.extend(bucket)
        return out
