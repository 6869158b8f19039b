"""`WatchCache`: the recent history of committed changes and the open watches it feeds.

Upstream: k8s.io/apiserver/pkg/storage/cacher/cacher.go (one cacher fans each event out to the watchers it
may concern) and watch_cache.go (a bounded window of recent events; a watch from a resourceVersion older
than the window is 410 Expired, as after etcd compaction). kubesim keeps one window for all resources
(default 10,000 events, as JSON), and also serves consistent list pages and `resourceVersionMatch=Exact`
lists from it by undoing newer events (`snapshot`), where the real server reads etcd at that revision.
"""
from __future__ import annotations

import threading
from collections import deque

from kubesim.apimachinery import errors
from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.selectors import FieldSelector, LabelSelector
from kubesim.apiserver.registry.kinds import ResourceType
from kubesim.apiserver.registry.views import dumps, is_view, view
from kubesim.apiserver.storage.storage import Storage
from kubesim.apiserver.storage.watch import Event, Watch, WatchIndex, running_loop


class WatchCache:
    """Shares the store's lock; every method but `_drop_watch` and `close_all` is called under it."""

    def __init__(self, storage: Storage, lock: threading.RLock, size: int):
        self.storage, self.lock, self.size = storage, lock, size
        self.history: deque[Event] = deque()
        self.floor = 0              # events with rv <= floor are no longer kept
        self.watches = WatchIndex()
        self.opened = 0             # ever, monotonic: tests wait on it to know a watch reached the server

    @property
    def _current_rv(self) -> int:      # what a Watch's bookmark carries (watch.WatchSource)
        return self.storage.current_rv

    def reset(self) -> None:
        """Close every watch and forget the history (the store was cleared)."""
        for w in list(self.watches):
            w.close()
        self.history.clear()
        self.floor = self.storage.current_rv

    def record(self, ev: Event) -> None:
        """Keep a committed event and offer it to the watches it may concern."""
        self.history.append(ev)
        while len(self.history) > self.size:
            self.floor = self.history.popleft().rv
        running = running_loop()
        for w in self.watches.candidates(ev):
            w._offer(ev, running)
        ev.settle()

    def watch(self, rt: ResourceType, namespace: str | None, resource_version: str | None,
              label: LabelSelector, field: FieldSelector) -> Watch:
        """A new watch: from now with the current objects as ADDED (no or "0" resourceVersion), else every
        kept event after `resource_version`. Must be called on the event loop that will consume it."""
        w = Watch(self, rt, namespace, label, field)
        if resource_version in (None, "", "0"):
            for _key, obj, data in self.storage.select(rt, namespace, label, field):
                if is_view(rt) or obj.get("apiVersion") != rt.api_version:
                    obj = view(rt, obj)
                    data = dumps(obj)
                w.queue.put_nowait(("ADDED", obj, data, self.storage.current_rv))
            w.last_rv = self.storage.current_rv
        else:
            try:
                since = int(resource_version)
            except ValueError:
                raise ApiError(400, f"invalid resource version: {resource_version!r}", "BadRequest") \
                    from None
            if since < self.floor:
                raise errors.gone(f"too old resource version: {since} ({self.floor + 1})")
            for ev in self.history:
                if ev.rv > since:
                    w._offer(ev)
            w.last_rv = max(since, w.last_rv)
        self.watches.add(w)
        self.opened += 1
        return w

    def _drop_watch(self, w: Watch) -> None:
        with self.lock:
            self.watches.discard(w)

    def close_all(self) -> int:
        """Cut every open watch (fault injection): clients see their stream end."""
        with self.lock:
            ws = list(self.watches)
        for w in ws:
            w.close()
        return len(ws)

    def snapshot(self, rt: ResourceType, rv: int) -> dict:
        """rt's objects as they were at resourceVersion `rv`, rebuilt by undoing the newer history events;
        410 Expired if the history no longer reaches back that far (etcd compaction on a real server)."""
        if rv < self.floor:
            raise errors.gone(f"too old resource version: {rv} ({self.floor + 1})")
        state = dict(self.storage.bucket(rt))
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            if ev.key != rt.storage_key:
                continue
            key = (ev.namespace, ev.name)
            if ev.type == "ADDED":
                state.pop(key, None)
            else:
                state[key] = (ev.old, ev.old_data)
        return state

    def check_list_rv(self, resource_version: str | None, match: str | None) -> None:
        """A list at an exact, no-longer-kept resourceVersion → 410 Gone; at a version the server has not
        reached → 504 `Too large resource version` (the real server first waits 3 s for it)."""
        if not resource_version or resource_version == "0":
            return
        try:
            rv = int(resource_version)
        except ValueError:
            raise ApiError(400, f"invalid resource version: {resource_version!r}", "BadRequest") from None
        current = self.storage.current_rv
        if match == "Exact" and rv < self.floor:
            raise errors.gone("The resourceVersion for the provided list is too old.")
        if rv > current:
            raise ApiError(504, f"Too large resource version: {rv}, current: {current}", "Timeout",
                           causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
