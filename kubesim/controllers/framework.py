"""The building blocks of kubesim's controllers: `Controller` (a work queue of object keys fed by store
events), `WorkQueue`, the informer-like `Cache` and the client-go style `EventRecorder`.

Components (scheduler, kubelet, gc, quota, workloads) import these from here, never from `cluster.py`,
which wires the components together: they see the cluster only as a `ControllerContext` (what
kube-controller-manager hands each controller: cmd/kube-controller-manager/app/controllercontext.go's
`ControllerContext`, the shared informers and the clients), so nothing below `cluster.py` imports it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kubesim.apimachinery.errors import ApiError

log = logging.getLogger("kubesim.cluster")


Key = tuple[str | None, str]   # (namespace, name)


def key_of(obj: dict) -> Key:
    md = obj["metadata"]
    return md.get("namespace"), md["name"]


def rv_int(obj: dict) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass
class Timing:
    """The cluster clock's delays, in seconds."""
    pod_start: float = 0.05          # bound pod: Pending (ContainerCreating) -> Running
    container_run: float = 0.2       # run time of a container without `kubesim.io/duration` (not restartPolicy Always)
    restart_backoff: float = 0.1     # CrashLoopBackOff before a restart (doubles per restart, capped at 10x)
    create_retry: float = 0.2        # a controller's retry after a refused create (doubles, capped at 10x)
    lease_renew: float = 10.0        # a kubelet's node Lease renewal (kubelet/heartbeats.py; the real kubelet: 10 s)
    metric_resolution: float = 15.0  # usage read every N s (kubelet/stats.py; metrics-server's --metric-resolution)


class ControllerContext(Protocol):
    """What a component sees of its cluster (`kubesim.cluster.Cluster` is one)."""

    store: Any          # kubesim.apiserver.registry.store.Store: the API, through its public verbs only
    timing: Timing
    cache: Cache

    def rt(self, plural: str, group: str = "", version: str = "v1"): ...

    def observe(self, rt, obj: dict) -> dict: ...

    def now(self) -> str: ...


class Cache:
    """What the cluster's informers have seen: the latest committed object per kind and key.

    Objects are the store's notifications or the results of our own writes (newer resourceVersion wins);
    they are shared, so treat them as read-only. Kept per kind and namespace, with an index of labels, so
    that a controller reading one namespace, or the pods a Service selects, does not scan the whole cluster.
    """

    def __init__(self) -> None:
        self._by_kind: dict[tuple[str, str], dict[str | None, dict[str, dict]]] = {}   # kind -> ns -> name -> obj
        self._labels: dict[tuple[str, str], dict[tuple, set[str]]] = {}    # kind -> (ns, key, value) -> names

    # kinds no component reads from the cache: not kept (Events are most of a busy cluster's objects)
    UNCACHED = frozenset({("", "events")})

    def observe(self, rt, obj: dict, deleted: bool = False) -> None:
        if rt.storage_key in self.UNCACHED:
            return
        kind = (rt.group, rt.plural)
        ns, name = key_of(obj)
        bucket = self._by_kind.setdefault(kind, {}).setdefault(ns, {})
        cur = bucket.get(name)
        if deleted:
            if cur is not None and cur["metadata"].get("uid") == obj["metadata"].get("uid"):
                del bucket[name]
                self._index(kind, ns, name, cur, None)
            return
        if cur is None or cur["metadata"].get("uid") != obj["metadata"].get("uid") or rv_int(obj) >= rv_int(cur):
            bucket[name] = obj
            self._index(kind, ns, name, cur, obj)

    def _index(self, kind, ns, name: str, before: dict | None, after: dict | None) -> None:
        old = (before["metadata"].get("labels") or {}) if before is not None else {}
        new = (after["metadata"].get("labels") or {}) if after is not None else {}
        if old == new:
            return
        index = self._labels.setdefault(kind, {})
        for k, v in old.items():
            if new.get(k) != v and (names := index.get((ns, k, v))) is not None:
                names.discard(name)
                if not names:
                    del index[(ns, k, v)]
        for k, v in new.items():
            if old.get(k) != v:
                index.setdefault((ns, k, v), set()).add(name)

    def get(self, rt, namespace: str | None, name: str) -> dict | None:
        return self._by_kind.get((rt.group, rt.plural), {}).get(namespace, {}).get(name)

    def list(self, rt, namespace: str | None = None) -> list[dict]:
        by_ns = self._by_kind.get((rt.group, rt.plural), {})
        if namespace is None:
            return [o for bucket in by_ns.values() for o in bucket.values()]
        return list(by_ns.get(namespace, {}).values())

    def select(self, rt, namespace: str | None, labels: dict) -> list[dict]:
        """The objects of the namespace whose labels hold every ``key: value`` of ``labels`` (a map selector,
        as a Service's; an empty one selects everything)."""
        if not labels:
            return self.list(rt, namespace)
        kind = (rt.group, rt.plural)
        index, bucket = self._labels.get(kind, {}), self._by_kind.get(kind, {}).get(namespace, {})
        sets = [index.get((namespace, k, v), ()) for k, v in labels.items()]
        out = []
        for name in min(sets, key=len):
            obj = bucket.get(name)
            if obj is not None and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in labels.items()):
                out.append(obj)
        return out


class WorkQueue:
    """A controller's queue of keys: deduplicated, processed one at a time, with delayed re-adds, and client-go's
    rate-limited re-queue (k8s.io/client-go/util/workqueue: `AddRateLimited`, `Forget`, `NumRequeues`; the
    per-item exponential back-off of `DefaultControllerRateLimiter`, 5 ms doubling up to 1000 s). A key whose
    handler raised is re-queued that way, as a controller's processNextWorkItem does with a reconcile error; a
    handler that ends without re-queueing its key (`add_rate_limited`) forgets its failures."""

    BASE_DELAY = 0.005      # ItemExponentialFailureRateLimiter(5*time.Millisecond, 1000*time.Second)
    MAX_DELAY = 1000.0

    def __init__(self, name: str, handler: Callable[[Key], None]):
        self.name = name
        self._handler = handler
        self._pending: set[Key] = set()
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._task: asyncio.Task | None = None
        self._failures: dict[Key, int] = {}
        self._current: Key | None = None        # the key being handled, and whether its handler re-queued it
        self._requeued = False

    def add(self, key: Key) -> None:
        if key not in self._pending:
            self._pending.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: Key, delay: float) -> None:
        """Process `key` after `delay` s (an earlier pending timer for it wins)."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        old = self._timers.get(key)
        when = loop.time() + delay
        if old is not None and not old.cancelled() and old.when() <= when:
            return
        if old is not None:
            old.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key)

    def add_rate_limited(self, key: Key) -> None:
        """Process `key` again after its own back-off: 5 ms, doubled at each re-queue since its last `forget`."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if key == self._current:
            self._requeued = True
        self.add_after(key, min(self.BASE_DELAY * 2 ** min(failures, 40), self.MAX_DELAY))

    def forget(self, key: Key) -> None:
        """Stop tracking `key`'s failures: its next `add_rate_limited` waits the base delay again."""
        self._failures.pop(key, None)

    def num_requeues(self, key: Key) -> int:
        return self._failures.get(key, 0)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"kubesim-{self.name}")

    async def _run(self) -> None:
        while True:
            key = await self._queue.get()
            self._pending.discard(key)
            self._current, self._requeued = key, False
            try:
                self._handler(key)
            except Exception:   # a controller bug must not stop the cluster: log it, retry after a back-off
                log.exception("%s: error reconciling %s", self.name, key)
                self.add_rate_limited(key)
            else:
                if not self._requeued:
                    self.forget(key)
            finally:
                self._current = None

    async def stop(self) -> None:
        for t in self._timers.values():
            t.cancel()
        self._timers.clear()
        self._failures.clear()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None


class EventRecorder:
    """Writes core/v1 Events the way client-go's recorder does: name `<object>.<hex of the time's UnixNano>`
    (k8s.io/client-go/tools/record/event.go `makeEvent`: so a list, sorted by name, shows an object's events in
    the order they happened), and a repeat of the same event (same object, type, reason, message, source)
    bumps `count` and `lastTimestamp`."""

    MAX_KEPT = 4096      # aggregation keys remembered (client-go keeps an LRU cache too)
    _last_ns = 0         # the clock has microseconds: names made within one are kept distinct and in order
    _ns_lock = threading.Lock()

    def __init__(self, store, component: str):
        self.store = store
        self.component = component
        self._rt = store.registry.lookup("", "v1", "events")
        self._seen: OrderedDict[tuple, str] = OrderedDict()

    @staticmethod
    def _unix_nano(dt) -> int:
        ns = (int(dt.timestamp()) * 1_000_000 + dt.microsecond) * 1000
        with EventRecorder._ns_lock:
            ns = EventRecorder._last_ns = max(ns, EventRecorder._last_ns + 1)
        return ns

    def record(self, obj: dict, type_: str, reason: str, message: str, *, host: str | None = None,
               field_path: str | None = None) -> None:
        md = obj["metadata"]
        namespace = md.get("namespace") or "default"
        now_dt = self.store.clock.now()
        now = self.store.clock.rfc3339(now_dt)
        key = (namespace, md.get("uid"), field_path, type_, reason, message, host)
        name = self._seen.get(key)
        if name is not None and self._bump(namespace, name, now):
            self._seen.move_to_end(key)
            return
        involved = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "name": md["name"],
                    "namespace": md.get("namespace"), "uid": md.get("uid"),
                    "resourceVersion": md.get("resourceVersion")}
        if field_path:
            involved["fieldPath"] = field_path
        source = {"component": self.component}
        if host:
            source["host"] = host
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"{md['name']}.{self._unix_nano(now_dt):x}", "namespace": namespace},
                 "involvedObject": {k: v for k, v in involved.items() if v is not None},
                 "reason": reason, "message": message, "source": source, "type": type_,
                 "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                 "reportingComponent": self.component, "reportingInstance": host or "",
                 "action": reason}
        try:
            created = self.store.create(self._rt, namespace, event)
        except ApiError as e:   # e.g. the namespace is being deleted: events are best effort, as in client-go
            log.debug("event %s/%s dropped: %s", namespace, reason, e.message)
            return
        self._seen[key] = created["metadata"]["name"]
        while len(self._seen) > self.MAX_KEPT:
            self._seen.popitem(last=False)

    def _bump(self, namespace: str, name: str, now: str) -> bool:
        try:
            event = self.store.get(self._rt, namespace, name)
            event["count"] = int(event.get("count") or 1) + 1
            event["lastTimestamp"] = now
            self.store.update(self._rt, namespace, name, event)
            return True
        except ApiError:       # gone (or raced): record a new one
            return False


class Controller:
    """Base of the cluster's components: a work queue of object keys fed by store events."""

    name = "controller"

    def __init__(self, cluster: ControllerContext):
        self.cluster = cluster
        self.store = cluster.store
        self.queue = WorkQueue(self.name, self.reconcile)

    def start(self) -> None:
        self.queue.start()

    async def stop(self) -> None:
        await self.queue.stop()

    def reset(self) -> None:
        """Forget per-object runtime state (the store was cleared)."""

    def on_event(self, event_type: str, rt, obj: dict, old: dict | None) -> None:
        """Enqueue keys for a store change (runs on the loop, in store order)."""

    def reconcile(self, key: Key) -> None:
        """Bring the object at `key` to its desired state."""
