"""Follow one training Job to its end by WATCHING it (async; used by the trigger and by sync mode).

``follow_job(api_client, namespace, name, settings, log)`` returns a JSON-able result dict::

    {"status": "success" | "failed", "namespace", "name", "uid", "reason", "kind", "log_tail": [...],
     "noticed_at": unix time the end was seen}

What it does, with a handful of long-lived requests instead of a poll every N seconds:

* one watch on the Job (fieldSelector metadata.name) and one on its pods (label ``skiff.io/job-name``),
  each resumed from the last resourceVersion when the connection drops or the server times it out, and
  re-listed when the server answers 410 Gone (history compacted);
* a followed log stream (``follow=true``) per pod as soon as its container starts, so every pod the Job
  creates shows up in the task log while it runs; the last ``log_tail_lines`` lines are kept for the alert;
* a local 1-second tick (no I/O) that applies the waiting policies: no pod within
  ``pod_discovery_timeout``; a quota refusal (events are only listed while the Job has no pod); an
  unschedulable pod; an image-pull / container-config error, which never heals on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

import aiohttp
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from operators.training import failure
from operators.training.naming import LABEL_JOB

WATCH_SECONDS = 900  # server-side watch timeout (API servers allow up to 1800); resumed from the last rv
MAX_FAILURES = 20  # consecutive transient failures (about 3 minutes with back-off) before giving up
CONTAINER = "jupyter-job"
LOG_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30, sock_read=None)


@dataclass(frozen=True)
class FollowSettings:
    pod_discovery_timeout: float = 300.0
    quota_wait: float | None = 0.0  # seconds a quota refusal may last before failing; None = wait forever
    unschedulable_timeout: float | None = 1800.0
    log_tail_lines: int = 50
    event_poll_interval: float = 5.0  # only while the Job has no pod (quota refusals are events)

    def to_dict(self) -> dict:
        return asdict(self)


class _State:
    def __init__(self, tail_lines: int) -> None:
        self.job: dict | None = None
        self.pods: dict[str, dict] = {}
        self.events: list[dict] = []
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.changed = asyncio.Event()


async def _ok(resp):
    """With ``_preload_content=False`` the client does not raise on an error status: do it here."""
    if resp.status >= 400:
        body = await resp.read()
        resp.release()
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        raise ApiException(status=resp.status, reason=str(message))
    return resp


def _transient(exc: BaseException) -> bool:
    """Worth retrying: the API server is overloaded or restarting, or the connection dropped."""
    if isinstance(exc, ApiException):
        return exc.status is None or exc.status == 429 or exc.status >= 500
    return isinstance(exc, TimeoutError | aiohttp.ClientError | ConnectionError)


async def _watch(list_call: Callable, on_event: Callable[[str, dict], None],
                 on_relist: Callable[[list[dict]], None], **selector) -> None:
    """List, then watch forever from the list's resourceVersion: resume after drops and transient errors
    (back-off, up to MAX_FAILURES in a row), re-list on 410 Gone; anything else (403, 404...) is raised."""
    rv: str | None = None
    failures = 0
    while True:
        try:
            if rv is None:
                listing = await _ok(await list_call(**selector, _preload_content=False))
                body = json.loads(await listing.read())
                rv = body["metadata"]["resourceVersion"]
                on_relist(body.get("items") or [])
            resp = await _ok(await list_call(**selector, watch=True, resource_version=rv,
                                             allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS,
                                             _preload_content=False))
            failures = 0
            async with resp:
                async for raw in resp.content:
                    if not raw.strip():
                        continue
                    event = json.loads(raw)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") != "BOOKMARK":
                        on_event(event["type"], obj)
        except Exception as exc:
            if isinstance(exc, ApiException) and exc.status == 410:
                rv = None  # history compacted: start over from a fresh list
                continue
            failures += 1
            if not _transient(exc) or failures > MAX_FAILURES:
                raise
            await asyncio.sleep(min(2 ** (failures - 1), 10))


async def _stream_logs(core: k8s.CoreV1Api, namespace: str, pod: str, state: _State,
                       log: Callable[[str], None]) -> None:
    for attempt in range(3):
        try:
            resp = await _ok(await core.read_namespaced_pod_log(pod, namespace, container=CONTAINER, follow=True,
                                                                _preload_content=False,
                                                                _request_timeout=LOG_TIMEOUT))
            async with resp:
                async for raw in resp.content:
                    line = raw.decode("utf-8", "replace").rstrip("\n")
                    state.tail.append(line)
                    log(f"[{pod}] {line}")
            return
        except ApiException as exc:
            if exc.status == 400 and attempt < 2:  # container not started yet (race with the pod watch)
                await asyncio.sleep(1)
                continue
            log(f"[{pod}] (logs unavailable: {exc.status} {exc.reason})")
            return
        except (TimeoutError, aiohttp.ClientError) as exc:
            log(f"[{pod}] (log stream interrupted: {exc!r})")
            return


def _started(pod: dict) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "running" in state or "terminated" in state:
            return True
    return False


async def _list_job_events(core: k8s.CoreV1Api, namespace: str, name: str) -> list[dict]:
    resp = await _ok(await core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}",
                                                      _preload_content=False))
    items = json.loads(await resp.read()).get("items") or []
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


async def follow_job(api_client, namespace: str, name: str, settings: FollowSettings,
                     log: Callable[[str], None], uid: str | None = None) -> dict:
    batch, core = k8s.BatchV1Api(api_client), k8s.CoreV1Api(api_client)
    state = _State(settings.log_tail_lines)
    streams: dict[str, asyncio.Task] = {}

    def on_job(kind: str, obj: dict) -> None:
        replaced = uid is not None and obj.get("metadata", {}).get("uid") not in (None, uid)
        state.job = {"deleted": True, **obj} if kind == "DELETED" or replaced else obj
        state.changed.set()

    def on_pod(kind: str, obj: dict) -> None:
        pod = obj["metadata"]["name"]
        if kind == "DELETED":
            state.pods.pop(pod, None)
        else:
            state.pods[pod] = obj
            if pod not in streams and _started(obj):
                streams[pod] = asyncio.create_task(_stream_logs(core, namespace, pod, state, log))
        state.changed.set()

    def relist_pods(items: list[dict]) -> None:
        state.pods.clear()
        for item in items:
            on_pod("ADDED", item)

    def relist_job(items: list[dict]) -> None:
        on_job("ADDED", items[0]) if items else on_job("DELETED", {"metadata": {"name": name}})

    watchers = [
        asyncio.create_task(_watch(batch.list_namespaced_job, on_job, relist_job, namespace=namespace,
                                   field_selector=f"metadata.name={name}")),
        asyncio.create_task(_watch(core.list_namespaced_pod, on_pod, relist_pods, namespace=namespace,
                                   label_selector=f"{LABEL_JOB}={name}")),
    ]
    loop = asyncio.get_running_loop()
    start = loop.time()
    seen_pod = False
    quota_since: float | None = None
    unschedulable_since: float | None = None
    events_at = -1e9
    outcome: tuple[str, str | None, str | None] | None = None  # (status, reason, kind)
    try:
        while outcome is None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(state.changed.wait(), timeout=1.0)
            state.changed.clear()
            for task in watchers:
                if task.done():
                    task.result()  # a watch that gave up raises here
            now = loop.time()
            job = state.job
            if job is None:
                continue
            if job.get("deleted"):
                outcome = ("failed", f"the Job {namespace}/{name} was deleted while the task waited for it",
                           "deleted")
                break
            job_state = failure.job_state(job)
            if job_state == "succeeded":
                outcome = ("success", None, None)
                break
            if job_state == "failed":
                outcome = ("failed", None, "job")
                break
            pods = [p for p in state.pods.values() if not p["metadata"].get("deletionTimestamp")]
            seen_pod = seen_pod or bool(pods)
            problem = failure.blocking_problem(pods, [])
            if problem and problem.kind == "fatal":
                outcome = ("failed", problem.message, "fatal")
                break
            if problem and problem.kind == "unschedulable":
                unschedulable_since = unschedulable_since if unschedulable_since is not None else now
                limit = settings.unschedulable_timeout
                if limit is not None and now - unschedulable_since >= limit:
                    outcome = ("failed", f"{problem.message} (pending for {limit:g}s)", "unschedulable")
                    break
            else:
                unschedulable_since = None
            if pods:
                quota_since = None
                continue
            # No pod: ask the events why (only in this state, so a healthy Job costs no event requests).
            if now - start >= 1.0 and now - events_at >= settings.event_poll_interval:
                events_at = now
                try:
                    state.events = await _list_job_events(core, namespace, name)
                except Exception as exc:
                    if not _transient(exc):
                        raise
            quota = failure.quota_problem(state.events)
            if quota:
                quota_since = quota_since if quota_since is not None else now
                if settings.quota_wait is not None and now - quota_since >= settings.quota_wait:
                    outcome = ("failed", quota, "quota")
                    break
                continue  # waiting for quota is allowed to outlast pod discovery
            if not seen_pod and now - start >= settings.pod_discovery_timeout:
                outcome = ("failed", f"no pod was created for Job {namespace}/{name} within "
                           f"{settings.pod_discovery_timeout:g}s (pod_discovery_timeout)", "discovery")
        noticed_at = time.time()
        status, reason, kind = outcome
        if streams:  # let the log streams deliver the last lines (they end with the container)
            await asyncio.wait(list(streams.values()), timeout=5)
        if status == "failed" and reason is None:
            events = await _list_job_events(core, namespace, name)
            reason = failure.failure_reason(state.job or {}, list(state.pods.values()), events)
        return {
            "status": status,
            "namespace": namespace,
            "name": name,
            "uid": ((state.job or {}).get("metadata") or {}).get("uid"),
            "reason": reason,
            "kind": kind,
            "log_tail": list(state.tail),
            "noticed_at": noticed_at,
        }
    finally:
        for task in [*watchers, *streams.values()]:
            task.cancel()
        await asyncio.gather(*watchers, *streams.values(), return_exceptions=True)
