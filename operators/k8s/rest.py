"""Plain-JSON access to the API server: ``Kube`` (sync, ``kubernetes`` client) and ``AsyncKube``
(``kubernetes_asyncio``), both on an ``ApiClient`` from ``operators.k8s.connection``.

Objects stay dicts end to end: callers compare labels and build manifests as dicts, and deserialising
thousands of objects into the clients' model classes costs more than the work itself. Both raise
``KubeError`` on any error answer and on no answer, with the same conveniences: ``get`` is
None on 404, ``create`` None on 409 (it exists: someone else made it, or an earlier send of this very request
whose answer was lost), ``delete`` False when already gone.
Every request is counted by (verb, resource) so benchmarks and summaries can report them.

``Kube`` retries transient failures (429, 5xx, no answer) through the one policy in ``operators.k8s.retry``:
jittered back-off, at least the server's ``Retry-After``, and give-up once this ``Kube``'s requests have been
failing for the policy's window with no success in between (so a pass of many requests over a cluster that
is gone waits that long once, not once per request). ``AsyncKube`` does not: its callers (``list_and_watch``,
the training trigger's follow loop) retry around it with the same policy.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlencode

from operators.k8s.errors import KubeError
from operators.k8s.resource import Resource
from operators.k8s.retry import RETRY, RetryPolicy, classify, next_step, resendable

log = logging.getLogger("skiff.k8s")
DEFAULT_POLICY = RetryPolicy()  # a worker's task: ride out an API server restart, give up after 5 min
# (connect, read) seconds: a request left unanswered (a hung connection) is a transient failure, not a hang
REQUEST_TIMEOUT = (10.0, 120.0)

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class ReadBound:
    """The most of an answer a read of user-controlled content takes: ``max_bytes`` of body and ``seconds`` from
    sending the request to the body's last byte (urllib3's read timeout bounds each socket read only: one byte
    every 2 s would keep the read open for ever)."""

    max_bytes: int
    seconds: float


# what the page and the culler read from a user's pod (Jupyter's /metrics is a few KiB)
USER_CONTENT = ReadBound(max_bytes=256 * 1024, seconds=10.0)
_CHUNK = 64 * 1024


def _query(label_selector: str | None = None, field_selector: str | None = None, **params) -> list:
    query = [("labelSelector", label_selector)] if label_selector else []
    query += [("fieldSelector", field_selector)] if field_selector else []
    return query + [(k, v) for k, v in params.items() if v is not None]


def _delete_options(uid: str | None, propagation: str) -> dict:
    body: dict = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
    if uid:
        body["preconditions"] = {"uid": uid}  # only that incarnation, never a newer one of the same name
    return body


def _headers(body: object, content_type: str) -> dict:
    return {"Accept": JSON, **({"Content-Type": content_type} if body is not None else {})}


class _Counted:
    def __init__(self, api) -> None:
        self.api = api
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, verb: str, res: Resource) -> None:
        with self._lock:
            self.requests[f"{verb} {res.plural}"] += 1


class Kube(_Counted):
    """Sync, on a ``kubernetes.client.ApiClient``; thread-safe (one may serve a pool of threads)."""

    def __init__(self, api, policy: RetryPolicy = DEFAULT_POLICY,
                 timeout: float | tuple[float, float] = REQUEST_TIMEOUT) -> None:
        super().__init__(api)
        self.policy = policy
        self.timeout = timeout
        self.retried: Counter[str] = Counter()  # "<METHOD> <status or 'no answer'>" -> requests sent again
        self._failing_since: float | None = None  # first failure since this Kube's last success

    def fork(self, connections: int = 0) -> Kube:
        """A ``Kube`` on the same client, policy and timeout that counts its own requests (e.g. one reconcile
        pass's summary), its client keeping at least ``connections`` connections per host (urllib3 keeps
        cpu_count*5 by default): one per thread writing at once."""
        pool = getattr(getattr(self.api, "rest_client", None), "pool_manager", None)
        if pool is not None and pool.connection_pool_kw.get("maxsize", 1) < connections:
            pool.connection_pool_kw["maxsize"] = connections
            pool.clear()
        return Kube(self.api, self.policy, self.timeout)

    def request(self, method: str, path: str, *, query: list | None = None, body: object = None,
                content_type: str = JSON) -> dict | None:
        """One request, sent again after a transient failure while the policy allows and it is safe."""
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        named = bool(meta.get("name"))
        failures = 0
        while True:
            try:
                result = self._send(method, path, query, body, content_type)
            except KubeError as exc:
                if classify(exc.status) != RETRY:
                    self._failing_since = None  # an answer (404, 409...): the server is there
                    raise
                failures += 1
                with self._lock:
                    now = time.monotonic()
                    if self._failing_since is None:
                        self._failing_since = now
                    since = self._failing_since
                action, wait = next_step(self.policy, exc.status, failures, since, now, random.random(),
                                         exc.retry_after)
                if action != RETRY or not resendable(method, exc.status, named):
                    raise
                with self._lock:
                    self.retried[f"{method} {exc.status or 'no answer'}"] += 1
                log.warning("%s %s: %s; sending it again in %.1f s (failure %d)", method, path, exc, wait, failures)
                time.sleep(wait)
                continue
            self._failing_since = None  # a success ends the failing run (a plain store: no lock needed)
            return result

    def _send(self, method: str, path: str, query: list | None, body: object, content_type: str, *,
              raw: bool = False, timeout: float | tuple[float, float] | None = None,
              bound: ReadBound | None = None) -> dict | bytes | None:
        """One HTTP exchange on the ``ApiClient``'s own configuration, credentials and connection pool, as its
        ``call_api`` makes it (same URL, headers, token, JSON body, timeouts), without its generic
        parameter handling: the body is serialised once, by ``json.dumps`` (the client's serialiser only for
        what JSON does not know, e.g. a model object), and the answer is read as JSON (``raw``: as bytes).
        ``bound``: the answer is content a user controls, read within its bytes and total time
        (``read_bounded``), error answers included."""
        import urllib3

        api = self.api
        headers = {**_headers(body, content_type), **({"Accept": "*/*"} if raw else {}), **api.default_headers}
        if api.cookie:
            headers["Cookie"] = api.cookie
        headers.setdefault("Content-Type", JSON)
        query = list(query or [])
        api.update_params_for_auth(headers, query, ["BearerToken"])  # refreshes an expiring token, as call_api
        url = api.configuration.host + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body, default=api.sanitize_for_serialization).encode()
        started = time.monotonic()
        try:
            resp = api.rest_client.pool_manager.request(method, url, body=data, headers=headers,
                                                        timeout=_urllib3_timeout(timeout or self.timeout),
                                                        preload_content=False)
            # read here: a connection dropped in the middle of the body is no answer too
            answer = read_bounded(resp, bound, started) if bound else resp.data
        except urllib3.exceptions.SSLError as exc:  # what the client's REST layer makes of it: status 0
            raise KubeError(None, "", f"{type(exc).__name__}\n{exc}") from exc
        except urllib3.exceptions.HTTPError as exc:  # no answer: refused, timed out, dropped
            raise KubeError.transport(exc) from exc
        if not 200 <= resp.status <= 299:
            raise KubeError.from_response(resp.status, answer, resp.headers)
        if raw:
            return answer
        return json.loads(answer) if answer else None

    def get_text(self, res: Resource, namespace: str | None, name: str, sub: str,
                 bound: ReadBound | None = None) -> str:
        """One GET of a subresource answering text, e.g. a pod's ``/metrics`` through the service proxy
        (``sub="proxy/metrics"``). Sent once, never again: a 503 there is the proxied program not answering
        (or no endpoints), which is the answer, not the API server failing. What answers is a user's program,
        so the answer is read within ``bound`` (default ``USER_CONTENT``; bytes and total time, ``read_bounded``): a ``KubeError``
        beyond it, never a process grown by an endless answer or a read held open by a dripping one."""
        self.count(f"get/{sub.split('/', 1)[0]}", res)
        bound = bound or USER_CONTENT
        connect = min(REQUEST_TIMEOUT[0], bound.seconds)
        return self._send("GET", res.path(namespace, name, sub), None, None, JSON, raw=True,
                          timeout=(connect, bound.seconds), bound=bound).decode("utf-8", "replace")

    def list(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[dict]:
        self.count("list", res)
        return self.request("GET", res.path(namespace), query=_query(label_selector, field_selector))["items"]

    def get(self, res: Resource, namespace: str | None, name: str) -> dict | None:
        self.count("get", res)
        try:
            return self.request("GET", res.path(namespace, name))
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    def create(self, res: Resource, namespace: str | None, body: dict) -> dict | None:
        """The created object, or None if one with that name already exists (409: someone else did it)."""
        self.count("create", res)
        try:
            return self.request("POST", res.path(namespace), body=body)
        except KubeError as e:
            if e.status == 409:
                return None
            raise

    def replace(self, res: Resource, namespace: str | None, name: str, body: dict) -> dict:
        self.count("update", res)
        return self.request("PUT", res.path(namespace, name), body=body)

    def merge_patch(self, res: Resource, namespace: str | None, name: str, body: dict,
                    sub: str | None = None) -> dict:
        self.count("patch" + (f"/{sub}" if sub else ""), res)
        return self.request("PATCH", res.path(namespace, name, sub), body=body, content_type=MERGE_PATCH)

    def delete(self, res: Resource, namespace: str | None, name: str, uid: str | None = None,
               propagation: str = "Background") -> bool:
        """Delete (only that incarnation if ``uid`` is given); False if it was already gone."""
        self.count("delete", res)
        try:
            self.request("DELETE", res.path(namespace, name), body=_delete_options(uid, propagation))
            return True
        except KubeError as e:
            if e.status in (404, 409):  # gone, or a newer incarnation we must not delete
                return False
            raise


class AsyncKube(_Counted):
    """Async, on a ``kubernetes_asyncio`` ``ApiClient``; ``open`` gives the raw response, for streams."""

    async def open(self, method: str, path: str, *, query: list | None = None, body: object = None,
                   content_type: str = JSON, timeout=None):
        """The ``aiohttp`` response of a successful request (the caller reads and releases it)."""
        import aiohttp
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            resp = await self.api.call_api(path, method, query_params=query or [],
                                           header_params=_headers(body, content_type), body=body,
                                           auth_settings=["BearerToken"], _preload_content=False,
                                           _return_http_data_only=True, _request_timeout=timeout)
        except ApiException as exc:
            raise KubeError.from_exception(exc) from None
        except (aiohttp.ClientError, OSError) as exc:  # OSError includes TimeoutError
            raise KubeError.transport(exc) from exc
        if resp.status >= 400:  # with _preload_content=False the client does not raise: do it here
            try:
                data = await resp.read()
            finally:
                resp.release()
            raise KubeError.from_response(resp.status, data, resp.headers)
        return resp

    async def request(self, method: str, path: str, *, query: list | None = None, body: object = None,
                      content_type: str = JSON) -> dict | None:
        import aiohttp

        resp = await self.open(method, path, query=query, body=body, content_type=content_type)
        try:
            data = await resp.read()
        except (aiohttp.ClientError, OSError) as exc:  # OSError includes TimeoutError
            raise KubeError.transport(exc) from exc
        finally:
            resp.release()
        return json.loads(data) if data else None

    async def list_with_version(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
                                field_selector: str | None = None) -> tuple[list[dict], str]:
        """The items and the list's resourceVersion (where a watch starts)."""
        self.count("list", res)
        body = await self.request("GET", res.path(namespace), query=_query(label_selector, field_selector))
        return body.get("items") or [], body["metadata"]["resourceVersion"]

    async def list(self, res: Resource, namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None) -> list[dict]:
        return (await self.list_with_version(res, namespace, label_selector, field_selector))[0]

    async def get(self, res: Resource, namespace: str | None, name: str) -> dict | None:
        self.count("get", res)
        try:
            return await self.request("GET", res.path(namespace, name))
        except KubeError as e:
            if e.status == 404:
                return None
            raise

    async def delete(self, res: Resource, namespace: str | None, name: str, uid: str | None = None,
                     propagation: str = "Background") -> bool:
        """Delete (only that incarnation if ``uid`` is given); False if it was already gone."""
        self.count("delete", res)
        try:
            await self.request("DELETE", res.path(namespace, name), body=_delete_options(uid, propagation))
            return True
        except KubeError as e:
            if e.status in (404, 409):
                return False
            raise


async def lines(resp):
    """Newline-delimited lines of a streamed response, of any length (aiohttp's ``readline`` and
    ``async for line in resp.content`` fail on a line over 64 KiB: a watch event of a large object)."""
    pending: list[bytes] = []  # pieces of a line not ended yet (joined once: linear in the line's length)
    async for chunk in resp.content.iter_any():
        first, *more = chunk.split(b"\n")
        pending.append(first)
        if more:
            yield b"".join(pending)
            *complete, rest = more
            for line in complete:
                yield line
            pending = [rest]
    if any(pending):
        yield b"".join(pending)


def read_bounded(resp, bound: ReadBound, started: float) -> bytes:
    """The body of a urllib3 response (``preload_content=False``) within ``bound``, or ``KubeError`` (status
    None: no usable answer) once it is over ``bound.max_bytes`` or unfinished ``bound.seconds`` after
    ``started`` (``time.monotonic()`` when the request was sent; the headers were waited for within the
    read timeout, itself ``bound.seconds``: an API server's proxy sends the headers once it has them all).
    A watchdog shuts the response down at the deadline (``HTTPResponse.shutdown``, urllib3 2.3: it interrupts
    a read blocked in another thread), so a drip cannot hold the read past it; either way the connection is
    closed, never drained (draining a flood is the unbounded read) nor returned to the pool mid-body."""
    chunks: list[bytes] = []
    size, late = 0, threading.Event()

    def cut() -> None:
        late.set()
        resp.shutdown()

    timer = threading.Timer(max(0.0, bound.seconds - (time.monotonic() - started)), cut)
    timer.daemon = True
    timer.start()
    try:
        while chunk := resp.read1(_CHUNK):
            size += len(chunk)
            if size > bound.max_bytes:
                raise KubeError(None, "AnswerTooLarge",
                                f"the answer is over {bound.max_bytes} bytes: not read further")
            chunks.append(chunk)
    except Exception as exc:
        if isinstance(exc, KubeError):
            raise
        if not late.is_set():
            raise
        raise KubeError(None, "Timeout", f"the answer did not end within {bound.seconds:g} s "
                                         f"({size} bytes read): not read further") from None
    finally:
        timer.cancel()
        if size > bound.max_bytes or late.is_set():
            resp.close()
    if late.is_set():  # the deadline struck just as the body ended: the same verdict as a moment later
        raise KubeError(None, "Timeout", f"the answer did not end within {bound.seconds:g} s: not read further")
    return b"".join(chunks)


def _urllib3_timeout(t):
    """The client's ``_request_timeout`` forms (seconds, or (connect, read)) as urllib3's Timeout."""
    import urllib3

    if isinstance(t, tuple) and len(t) == 2:
        return urllib3.Timeout(connect=t[0], read=t[1])
    return urllib3.Timeout(total=t) if t else None
