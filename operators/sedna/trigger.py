"""An event trigger that watches Sedna CRs and their children, for an ``AssetWatcher``.

``SednaWatchTrigger(kind=...)`` watches the CRs of one kind, their children (by the Sedna uid label) and
the Models (and, for FL, Datasets) through the process's shared informers (``operators.k8s.informer``:
one ``list_and_watch`` per resource, scope and selector for the whole triggerer, e.g. the Models for both
kinds' triggers; connection ``kubernetes_conn_id``, default ``[skiff] kubernetes_conn_id``), and yields a ``TriggerEvent`` when something the reconcile cares about changed:

* a CR added, deleted, or its spec edited (``metadata.generation``) or being deleted. Status-only updates,
  including the reconcile's own status writes, are ignored: otherwise every run would trigger the next;
* a child deleted, or its owner, labels, pod phase, Deployment health or Service/HPA spec changed;
* a Model or Dataset added, deleted or re-pointed.

Each watch resumes from the last resourceVersion it saw; a dropped connection re-watches from there, and
410 Gone (history compacted) re-lists and fires if anything differs from what was known, so no change is
lost. When it starts (a triggerer restarted, or a dead triggerer's triggers taken over), it fires once
after its first listing: nothing watched while no trigger ran, so what changed meanwhile needs a run now,
not at the next cron resync (as a controller reconciles everything its informers list at start). Events
are coalesced: after the first relevant change the trigger keeps collecting for as long as changes keep
arriving within ``coalesce_seconds`` (bounded by ``max_batch_seconds``), then yields one event; an idle
cluster costs nothing but open watch connections. The reconcile is level-triggered, so a
batch of changes needs one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from operators.sedna import kube as k
from operators.sedna.desired import FL_KIND
from operators.sedna.kinds import SOURCE_RESOURCES, kind_spec

log = logging.getLogger(__name__)


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


class SednaWatchTrigger(BaseEventTrigger):
    def __init__(self, kind: str = FL_KIND, namespaces: list[str] | None = None,
                 kubernetes_conn_id: str | None = None, coalesce_seconds: float = 0.1,
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
        from operators.k8s.informer import shared_informers  # here: a DAG file importing this loads no client

        async for event in self.events(shared_informers(self.kubernetes_conn_id), fire_on_start=True):
            yield event

    async def events(self, source, ready: asyncio.Event | None = None, *,
                     fire_on_start: bool = False) -> AsyncIterator[TriggerEvent]:
        """The trigger's events from ``source``: the process's ``Informers`` (the triggerer's: watches shared
        with the other triggers there) or a kubernetes_asyncio ``ApiClient`` (tests drive this directly);
        ``ready`` is set once every watch has listed (changes after that are seen). ``fire_on_start``: the
        first event comes once every watch has listed, for what changed while no trigger watched."""
        from operators.k8s.informer import Informers

        informers = source if isinstance(source, Informers) else Informers(lambda: _borrowed(source))
        queue: asyncio.Queue[str] = asyncio.Queue()
        progress = asyncio.Event()  # a watcher has listed
        async with contextlib.AsyncExitStack() as stack:
            watchers = []
            for ns in self.namespaces or [None]:
                for w in watched_resources(self.kind):
                    watcher = _Watcher(w, queue, progress)
                    watcher.sub = await stack.enter_async_context(informers.subscribe(
                        w.res, ns, w.label_selector, _everything, watcher.handle, snapshot=True))
                    watchers.append(watcher)
            while not all(x.started for x in watchers):  # every watch has listed once
                _check(watchers)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(progress.wait(), 1.0)
                progress.clear()
            if ready is not None:
                ready.set()
            if fire_on_start:  # after the listing: a change the run's own reads miss is one the watches see
                queue.put_nowait(f"STARTED {self.kind} watches (changes while no trigger watched)")
            loop = asyncio.get_running_loop()
            while True:
                changes = [await _next_change(queue, watchers)]
                first = loop.time()
                while loop.time() - first < self.max_batch_seconds:
                    try:
                        changes.append(await asyncio.wait_for(queue.get(), self.coalesce_seconds))
                    except TimeoutError:
                        break
                yield TriggerEvent({"kind": self.kind, "changes": len(changes), "sample": changes[:10]})


def _everything(obj: dict) -> bool:
    return True


@asynccontextmanager
async def _borrowed(api) -> AsyncIterator:
    """An ApiClient the caller owns, as the informers' client (not closed here)."""
    yield api


class _Watcher:
    """One watched resource in one scope: puts a line per relevant change on ``queue``; ``started`` once it
    has listed. ``list_and_watch`` (under the informer) resumes, re-lists on 410 and backs off; after a re-list,
    what differs from what was known is reported as one RESYNC line. When it gives up, so does the trigger
    (``_check``), and Airflow's triggerer starts a failed trigger that an asset still needs again."""

    def __init__(self, w: Watched, queue: asyncio.Queue, progress: asyncio.Event) -> None:
        self.w, self.queue, self.progress = w, queue, progress
        self.known: dict[str, tuple[str, str]] = {}  # uid -> (fingerprint, "ns/name")
        self.started = False
        self.sub = None

    def handle(self, ev) -> None:
        if ev.type == "SYNC":
            fresh = {o["metadata"]["uid"]: (fingerprint(self.w.kind, o), _ref(o)) for o in ev.items}
            if self.started and fresh != self.known:  # a re-list after 410: what did we miss?
                self.queue.put_nowait(f"RESYNC {self.w.kind} ({len(set(fresh.items()) ^ set(self.known.items()))} differ)")
            self.known, self.started = fresh, True
            self.progress.set()
        elif change := _change(self.w.kind, ev.type, ev.object, self.known):
            self.queue.put_nowait(change)


def _check(watchers: list[_Watcher]) -> None:
    """Raise if a watch gave up; an optional resource that is not served (404) is just not watched."""
    from operators.k8s.errors import KubeError

    for x in watchers:
        if x.sub is None:
            continue
        try:
            x.sub.check()
        except KubeError as e:
            if e.status == 404 and x.w.optional:
                log.info("%s not served: not watching it", x.w.res.plural)
                x.sub, x.started = None, True
                continue
            raise


async def _next_change(queue: asyncio.Queue, watchers: list[_Watcher]) -> str:
    """The next change line, checking the watches every second meanwhile."""
    while True:
        _check(watchers)
        try:
            return await asyncio.wait_for(queue.get(), 1.0)
        except TimeoutError:
            continue


def _ref(obj: dict) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


def _change(kind: str, etype: str, obj: dict, known: dict) -> str | None:
    """The line to report for one watch event (None: not relevant), updating ``known``."""
    uid = obj["metadata"]["uid"]
    if etype == "DELETED":
        known.pop(uid, None)
        return f"DELETED {kind} {_ref(obj)}"
    fp = fingerprint(kind, obj)
    previous = known.get(uid)
    known[uid] = (fp, _ref(obj))
    if previous is None:
        # a new CR, Model or Dataset needs a run; a new child is (almost always) our own create
        return f"ADDED {kind} {_ref(obj)}" if kind in ("CR", "Model", "Dataset") else None
    return f"MODIFIED {kind} {_ref(obj)}" if previous[0] != fp else None
