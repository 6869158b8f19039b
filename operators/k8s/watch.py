"""``list_and_watch``: the one list-then-watch loop (client-go's reflector, as an async generator).

It lists, yields the complete listing as a ``SYNC`` event, then watches from the list's resourceVersion and
yields every ``ADDED`` / ``MODIFIED`` / ``DELETED``. When the server ends the watch (its timeout, a dropped
connection) it resumes from the last resourceVersion seen, which bookmarks (``allowWatchBookmarks``) keep
fresh on a quiet resource; on 410 Gone (history compacted) it lists again and yields a new ``SYNC``, so a
consumer that treats ``SYNC`` as "this is everything now" misses nothing. Errors go through the one policy in
``operators.k8s.retry``: transient ones wait with jittered back-off (at least the server's ``Retry-After``),
others and a failure that lasts too long raise ``KubeError``. Lines of any length are read (a watch event
carries a whole object, which can exceed aiohttp's 64 KiB line limit).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp

from operators.k8s.errors import KubeError
from operators.k8s.resource import Resource
from operators.k8s.rest import AsyncKube, _query, lines
from operators.k8s.retry import RAISE, RELIST, RetryPolicy, next_step

log = logging.getLogger("skiff.k8s")

WATCH_SECONDS = 900  # server-side watch timeout (API servers allow up to 1800); resumed from the last rv
DEFAULT_POLICY = RetryPolicy()


@dataclass(frozen=True)
class WatchEvent:
    type: str  # "SYNC" (a complete listing, in ``items``) | "ADDED" | "MODIFIED" | "DELETED"
    object: dict | None = None
    items: list[dict] | None = None


async def list_and_watch(api, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                         field_selector: str | None = None, policy: RetryPolicy = DEFAULT_POLICY,
                         watch_seconds: int = WATCH_SECONDS,
                         rand: Callable[[], float] = random.random) -> AsyncIterator[WatchEvent]:
    """Events of ``res`` in ``namespace`` (None: all) matching the selectors, forever (or until it raises).

    ``api``: a ``kubernetes_asyncio`` ApiClient or an ``AsyncKube`` (whose request counter then counts)."""
    kube = api if isinstance(api, AsyncKube) else AsyncKube(api)
    loop = asyncio.get_running_loop()
    rv: str | None = None
    failures, failing_since = 0, 0.0
    while True:
        try:
            if rv is None:
                items, rv = await kube.list_with_version(res, namespace, label_selector, field_selector)
                failures = 0
                yield WatchEvent("SYNC", items=items)
            resp = await _open_watch(kube, res, namespace, label_selector, field_selector, rv, watch_seconds)
            failures = 0
            try:
                async for line in lines(resp):
                    if not line.strip():
                        continue
                    etype, obj = _parse(line)
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if etype != "BOOKMARK":
                        yield WatchEvent(etype, obj)
            finally:
                resp.release()
        except (KubeError, aiohttp.ClientError, OSError) as raised:  # OSError includes TimeoutError
            exc = raised if isinstance(raised, KubeError) else KubeError.transport(raised)
            now = loop.time()
            failures += 1
            failing_since = now if failures == 1 else failing_since
            action, wait = next_step(policy, exc.status, failures, failing_since, now, rand(), exc.retry_after)
            if action == RAISE:
                raise exc from (None if exc is raised else raised)
            if action == RELIST:
                log.info("watch %s: %s; listing again", res.plural, exc)
                rv, failures = None, 0
                continue
            log.warning("watch %s: %s; retrying in %.1f s (failure %d)", res.plural, exc, wait, failures)
            await asyncio.sleep(wait)


async def _open_watch(kube: AsyncKube, res: Resource, namespace: str | None, label_selector: str | None,
                      field_selector: str | None, rv: str, watch_seconds: int):
    kube.count("watch", res)
    query = _query(label_selector, field_selector, watch="true", resourceVersion=rv, allowWatchBookmarks="true",
                   timeoutSeconds=str(watch_seconds))
    # the client's own limit only backs up the server's timeoutSeconds; no read timeout: a quiet watch is fine
    timeout = aiohttp.ClientTimeout(total=watch_seconds + 60, connect=30, sock_connect=30)
    return await kube.open("GET", res.path(namespace), query=query, timeout=timeout)


def _parse(line: bytes) -> tuple[str, dict]:
    """(type, object) of one watch line; an ``ERROR`` event or a truncated line raises ``KubeError``."""
    try:
        event = json.loads(line)
    except ValueError:  # the connection dropped in the middle of an event: resume from the last rv
        raise KubeError(None, "TruncatedEvent", f"watch stream ended inside an event ({len(line)} bytes)") from None
    obj = event.get("object") or {}
    if event.get("type") == "ERROR":
        raise KubeError.from_status(obj)
    return event.get("type"), obj
