"""An event trigger that watches Sedna CRs and their children, for an ``AssetWatcher``.

``SednaWatchTrigger(kind=...)`` watches the CRs of one kind, their children (by the Sedna uid label) and
the Models (and, for FL, Datasets) with kubernetes_asyncio through the provider's ``AsyncKubernetesHook``,
and yields a ``TriggerEvent`` when something the reconcile cares about changed:

* a CR added, deleted, or its spec edited (``metadata.generation``) or being deleted. Status-only updates,
  including the reconcile's own status writes, are ignored: otherwise every run would trigger the next;
* a child deleted, or its owner, labels, pod phase, Deployment health or Service/HPA spec changed;
* a Model or Dataset added, deleted or re-pointed.

Each watch resumes from the last resourceVersion it saw; a dropped connection re-watches from there, and
410 Gone (history compacted) re-lists and fires if anything differs from what was known, so no change is
lost. Events are coalesced: after the first relevant change the trigger keeps collecting for as long as
changes keep arriving within ``coalesce_seconds`` (bounded by ``max_batch_seconds``), then yields one
event; an idle cluster costs nothing but open watch connections. The reconcile is level-triggered, so a
batch of changes needs one run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from operators.sedna import kube as k
from operators.sedna.desired import FL_KIND
from operators.sedna.kinds import SOURCE_RESOURCES, kind_spec

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300  # the server ends a watch after this; we re-watch from the last resourceVersion


@dataclass(frozen=True)
class Watched:
    kind: str  # "CR" | "Pod" | "Service" | "Deployment" | "HorizontalPodAutoscaler" | "Model" | "Dataset"
    res: k.Resource
    label_selector: str | None = None
    optional: bool = False  # not served on every cluster (autoscaling/v2): a 404 ends that watch only


def watched_resources(kind: str) -> list[Watched]:
    """The CRs of ``kind``, their children (by the Sedna uid label) and the sources, from its ``KindSpec``."""
    spec = kind_spec(kind)
    return [Watched("CR", spec.resource),
            *(Watched(ck, k.BY_KIND[ck], spec.uid_label, ck in spec.optional_kinds) for ck in spec.child_kinds),
            *(Watched(src, SOURCE_RESOURCES[src]) for src in spec.sources)]


def fingerprint(kind: str, obj: dict) -> str:
    """What of an object matters to the reconcile; a change of fingerprint is a relevant change."""
    md = obj.get("metadata") or {}
    common = [bool(md.get("deletionTimestamp"))]
    if kind == "CR":
        parts = [md.get("generation")]
    elif kind in ("Model", "Dataset"):
        parts = [(obj.get("spec") or {}).get("url"), (obj.get("spec") or {}).get("credentialName")]
    else:
        parts = [md.get("ownerReferences"), md.get("labels")]
        status = obj.get("status") or {}
        if kind == "Pod":  # only terminal phases change the job's status (Pending/Running are both active)
            parts.append(status.get("phase") if status.get("phase") in ("Succeeded", "Failed") else "active")
        elif kind == "Deployment":
            parts += [md.get("generation"), sorted(
                (c.get("type"), c.get("status")) for c in status.get("conditions") or []
                if c.get("type") in ("ReplicaFailure", "Progressing"))]
        else:
            parts.append(obj.get("spec"))
    return json.dumps(common + parts, sort_keys=True, default=str)


class _Gone(Exception):
    """410: our resourceVersion is older than the server's history."""


class SednaWatchTrigger(BaseEventTrigger):
    def __init__(self, kind: str = FL_KIND, namespaces: list[str] | None = None,
                 kubernetes_conn_id: str = "kubernetes_default", coalesce_seconds: float = 0.1,
                 max_batch_seconds: float = 2.0):
        super().__init__()
        watched_resources(kind)  # validates kind before anything runs
        self.kind = kind
        self.namespaces = list(namespaces) if namespaces else None
        self.kubernetes_conn_id = kubernetes_conn_id
        self.coalesce_seconds = coalesce_seconds
        self.max_batch_seconds = max_batch_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "kind": self.kind, "namespaces": self.namespaces, "kubernetes_conn_id": self.kubernetes_conn_id,
            "coalesce_seconds": self.coalesce_seconds, "max_batch_seconds": self.max_batch_seconds,
        })

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

        hook = AsyncKubernetesHook(conn_id=self.kubernetes_conn_id)
        async with hook.get_conn() as api:
            async for event in self.events(api):
                yield event

    async def events(self, api, ready: asyncio.Event | None = None) -> AsyncIterator[TriggerEvent]:
        """The trigger's events, given a kubernetes_asyncio ``ApiClient`` (tests drive this directly);
        ``ready`` is set once every watch has listed (changes after that are seen)."""
        queue: asyncio.Queue[str] = asyncio.Queue()
        ready_events: list[asyncio.Event] = []
        tasks = []
        for ns in self.namespaces or [None]:
            for w in watched_resources(self.kind):
                started = asyncio.Event()
                ready_events.append(started)
                tasks.append(asyncio.create_task(_watch_forever(api, w, ns, queue, started)))
        try:
            await asyncio.gather(*(e.wait() for e in ready_events))  # every watch has listed once
            if ready is not None:
                ready.set()
            loop = asyncio.get_running_loop()
            while True:
                changes = [await queue.get()]
                first = loop.time()
                while loop.time() - first < self.max_batch_seconds:
                    try:
                        changes.append(await asyncio.wait_for(queue.get(), self.coalesce_seconds))
                    except TimeoutError:
                        break
                yield TriggerEvent({"kind": self.kind, "changes": len(changes), "sample": changes[:10]})
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def _watch_forever(api, w: Watched, namespace: str | None, queue: asyncio.Queue, started: asyncio.Event,
                         ) -> None:
    """List, then watch from the list's resourceVersion, forever. Puts a line per relevant change."""
    from kubernetes_asyncio.client.exceptions import ApiException

    known: dict[str, tuple[str, str]] = {}  # uid -> (fingerprint, "ns/name")
    backoff = 0.1
    rv: str | None = None
    while True:
        try:
            if rv is None:
                items, rv = await _list(api, w, namespace)
                fresh = {o["metadata"]["uid"]: (fingerprint(w.kind, o), _ref(o)) for o in items}
                if started.is_set() and fresh != known:  # a re-list after 410 or an error: what did we miss?
                    queue.put_nowait(f"RESYNC {w.kind} ({len(set(fresh.items()) ^ set(known.items()))} differ)")
                known = fresh
                started.set()
            rv = await _watch(api, w, namespace, rv, known, queue)
            backoff = 0.1
        except _Gone:
            rv = None
        except asyncio.CancelledError:
            raise
        except ApiException as e:
            if e.status == 410:
                rv = None
                continue
            if e.status == 404 and w.optional:
                log.info("%s not served: not watching it", w.res.plural)
                started.set()
                return
            log.warning("watch %s failed (%s), re-listing in %.1f s", w.res.plural, e.status, backoff)
            rv = None
            await asyncio.sleep(backoff)  # back-off on a failing API server, not a polling interval
            backoff = min(backoff * 2, 10.0)
        except Exception as e:  # dropped connection, timeouts: re-list after a short back-off
            log.warning("watch %s dropped (%r), re-listing in %.1f s", w.res.plural, e, backoff)
            rv = None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


def _ref(obj: dict) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


def _query(w: Watched, extra: list) -> list:
    return ([("labelSelector", w.label_selector)] if w.label_selector else []) + extra


async def _list(api, w: Watched, namespace: str | None) -> tuple[list[dict], str]:
    resp = await api.call_api(
        w.res.path(namespace), "GET", query_params=_query(w, []), header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
    )
    body = json.loads(await resp.read())
    return body.get("items") or [], body["metadata"]["resourceVersion"]


async def _lines(stream) -> AsyncIterator[bytes]:
    """Newline-delimited watch events, of any size (aiohttp's readline caps a line at 64 KiB)."""
    buf = b""
    async for chunk in stream.iter_any():
        buf += chunk
        while (end := buf.find(b"\n")) >= 0:
            line, buf = buf[:end].strip(), buf[end + 1:]
            if line:
                yield line
    if buf.strip():
        yield buf.strip()


async def _watch(api, w: Watched, namespace: str | None, rv: str, known: dict, queue: asyncio.Queue) -> str:
    """One watch connection from ``rv``; returns the last resourceVersion seen when the server ends it."""
    query = _query(w, [("watch", "true"), ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
                       ("timeoutSeconds", str(WATCH_TIMEOUT_SECONDS))])
    resp = await api.call_api(
        w.res.path(namespace), "GET", query_params=query, header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
        _request_timeout=WATCH_TIMEOUT_SECONDS + 30,
    )
    try:
        async for line in _lines(resp.content):
            event = json.loads(line)
            etype, obj = event.get("type"), event.get("object") or {}
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise _Gone()
                raise RuntimeError(f"watch error: {obj.get('message')}")
            rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
            if etype == "BOOKMARK":
                continue
            uid = obj["metadata"]["uid"]
            if etype == "DELETED":
                known.pop(uid, None)
                queue.put_nowait(f"DELETED {w.kind} {_ref(obj)}")
                continue
            fp = fingerprint(w.kind, obj)
            previous = known.get(uid)
            known[uid] = (fp, _ref(obj))
            if previous is None:
                # a new CR, Model or Dataset needs a run; a new child is (almost always) our own create
                if w.kind in ("CR", "Model", "Dataset"):
                    queue.put_nowait(f"ADDED {w.kind} {_ref(obj)}")
            elif previous[0] != fp:
                queue.put_nowait(f"MODIFIED {w.kind} {_ref(obj)}")
    finally:
        resp.release()
    return rv
