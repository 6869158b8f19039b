"""The API server's service proxy: ``/api/v1/namespaces/<ns>/services/<[scheme:]name[:port]>/proxy/<path>``.

What kube-apiserver does (``pkg/registry/core/service/storage``, ``ResourceLocation``): find the Service (404 if
missing), the Service port named or numbered ``port`` (any port when omitted; 503 "no service port ... found"
otherwise), then a ready address of its Endpoints serving that port (503 "no endpoints available for service"),
and forward the request to ``<pod IP>:<target port>/<path>``, returning the backend's answer as is; a backend
that does not answer is a 503 "error trying to reach service". The query string is passed on.

A pod on a process node (kubesim/kubelet/procrt) is really asked: the request goes to its port inside the pod's
network namespace (through the pod's agent) and its answer comes back as is. For scripted pods, what a pod's
server answers is scripted, like pod outcomes, by an annotation on the pod: ``kubesim.io/http`` = JSON ``{"<container port>/<path>": <answer>}`` where ``<answer>`` is the body
(text, served 200 ``text/plain``) or ``{"status": 200, "body": "...", "contentType": "..."}``. A port/path the
annotation does not list has nothing listening: 503 "connection refused", as when the process is down.
An answer ``{"forward": "http://127.0.0.1:<port>"}`` stands for a program that really serves: the request goes to
that local HTTP server (loopback only) and its status, content type and body are streamed back as they come, a
chunk at a time, as kube-apiserver's proxy does (``staging/src/k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go``,
``UpgradeAwareHandler.ServeHTTP``: an ``httputil.ReverseProxy`` copying the backend's body as it is read, so an
endless or dripping body reaches the client endless or dripping, and kubesim holds one chunk of it at a time).
"""

from __future__ import annotations

import asyncio
import json
import re

from aiohttp import web

from kubesim.apimachinery.errors import ApiError

ANNOTATION = "kubesim.io/http"
PATH = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/services/(?P<service>[^/]+)/proxy(?:/(?P<path>.*))?$")


def add_proxy_route(api) -> None:
    """Register the service proxy on an ``ApiServer`` (its ``routes``: behind the same middleware)."""
    store = api.store

    async def handle(request: web.Request, match: re.Match) -> web.StreamResponse:
        target = service_target(store, match["namespace"], match["service"])
        uid = _process_pod(store, match["namespace"], target[2])
        if uid is not None:
            return await forward_http(store, uid, target[1], request, match["path"] or "")
        answer = service_proxy(store, match["namespace"], match["service"], match["path"] or "", target)
        if isinstance(answer, str):
            return await _forward(request, answer, match["path"] or "")
        return answer

    api.routes.append((PATH, handle))


def _unavailable(message: str) -> ApiError:
    return ApiError(503, message, "ServiceUnavailable")


def _endpoint(store, ns: str, svc_name: str, port_name: str, target_port: int) -> tuple[dict, int]:
    """A ready (address, port) of the Service's Endpoints for ``port_name``."""
    try:
        endpoints = store.get(store.registry.lookup("", "v1", "endpoints"), ns, svc_name)
    except ApiError as e:
        if e.code == 404:
            raise _unavailable(f'no endpoints available for service "{svc_name}"') from None
        raise
    for subset in endpoints.get("subsets") or []:
        for port in subset.get("ports") or []:
            if (port.get("name") or "") == (port_name or ""):
                for address in subset.get("addresses") or []:
                    return address, int(port.get("port") or target_port)
    raise _unavailable(f'no endpoints available for service "{svc_name}"')


def service_target(store, ns: str, ref: str) -> tuple[dict, int, str | None]:
    """The Service port's ready endpoint: (address, port, pod name) (ResourceLocation)."""
    parts = ref.split(":")
    if len(parts) == 3:
        parts = parts[1:]  # scheme:name:port
    name, port_ref = parts[0], (parts[1] if len(parts) > 1 else "")
    svc = store.get(store.registry.lookup("", "v1", "services"), ns, name)  # 404 like the real one
    ports = svc["spec"].get("ports") or []
    chosen = next((p for p in ports if not port_ref or p.get("name") == port_ref or str(p.get("port")) == port_ref),
                  None)
    if chosen is None:
        raise _unavailable(f'no service port "{port_ref}" found for service "{name}"')
    target = chosen.get("targetPort", chosen.get("port"))
    address, port = _endpoint(store, ns, name, chosen.get("name") or "", target if isinstance(target, int) else 0)
    return address, port, (address.get("targetRef") or {}).get("name")


def _process_pod(store, ns: str, pod_name: str | None) -> str | None:
    procs = store.kubelet.process_pods() if store.kubelet is not None else None
    if procs is None or not pod_name:
        return None
    return procs.runs_pod(ns, pod_name)


async def forward_http(store, uid: str, port: int, request: web.Request, path: str) -> web.StreamResponse:
    """The request, as HTTP/1.0, to the pod's port; its answer streamed back (status, headers, then the body a chunk
    at a time, as kube-apiserver's UpgradeAwareHandler copies it: an endless or dripping body is never held whole)."""
    procs = store.kubelet.process_pods()
    try:
        reader, writer = await procs.connect(uid, port)
    except (ConnectionError, OSError) as e:
        raise _unavailable(f"error trying to reach service: dial tcp :{port}: connect: {e}") from None
    try:
        body = await request.read()
        query = f"?{request.query_string}" if request.query_string else ""
        head = [f"{request.method} /{path}{query} HTTP/1.0", f"Host: localhost:{port}", "Connection: close",
                f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in request.headers.items()
                 if k.lower() in ("content-type", "accept", "cookie")]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        try:
            header = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            raise _unavailable("error trying to reach service: malformed HTTP response") from None
        lines = header.decode(errors="replace").split("\r\n")
        try:
            status = int(lines[0].split()[1])
        except (IndexError, ValueError):
            raise _unavailable("error trying to reach service: malformed HTTP response") from None
        out = web.StreamResponse(status=status)
        for line in lines[1:]:
            k, _, v = line.partition(":")
            if k.lower() in ("content-type", "location", "set-cookie", "cache-control"):
                out.headers[k.strip()] = v.strip()
        await out.prepare(request)
        try:
            while chunk := await reader.read(65536):
                await out.write(chunk)
        except (ConnectionError, OSError):
            return out  # the client went away (or the pod broke off): stop copying
        await out.write_eof()
        return out
    finally:
        writer.close()


def service_proxy(store, ns: str, ref: str, path: str, target=None) -> web.Response | str:
    address, port, pod_name = target or service_target(store, ns, ref)
    pod = store.get(store.registry.lookup("", "v1", "pods"), ns, pod_name) if pod_name else {}
    script = (pod.get("metadata", {}).get("annotations") or {}).get(ANNOTATION)
    try:
        answers = json.loads(script) if script else {}
    except ValueError:
        answers = {}
    if not isinstance(answers, dict):
        answers = {}
    answer = answers.get(f"{port}/{path.lstrip('/')}")
    if answer is None:
        raise _unavailable(f"error trying to reach service: dial tcp {address.get('ip')}:{port}: "
                           "connect: connection refused")
    if isinstance(answer, str):
        answer = {"body": answer}
    if isinstance(answer, dict) and isinstance(answer.get("forward"), str):
        return _loopback(answer["forward"])
    return web.Response(status=int(answer.get("status", 200)), text=str(answer.get("body", "")),
                        content_type=answer.get("contentType", "text/plain"))


def _loopback(url: str) -> str:
    """A ``forward`` target: ``http://127.0.0.1:<port>`` only (kubesim is a test cluster on loopback)."""
    if not re.fullmatch(r"http://127\.0\.0\.1:\d{1,5}", url):
        raise _unavailable(f"error trying to reach service: forward target {url[:80]!r} is not http://127.0.0.1:<port>")
    return url


async def _forward(request: web.Request, base: str, path: str) -> web.StreamResponse:
    """Stream the local server's answer to ``path`` back to the client, chunk by chunk, until either side ends."""
    import aiohttp

    url = f"{base}/{path.lstrip('/')}" + (f"?{request.query_string}" if request.query_string else "")
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5)) as session:
        try:
            backend = await session.get(url)
        except (aiohttp.ClientError, OSError) as exc:
            raise _unavailable(f"error trying to reach service: {exc}") from None
        async with backend:
            out = web.StreamResponse(status=backend.status)
            out.content_type = backend.content_type or "text/plain"
            await out.prepare(request)
            try:
                async for chunk in backend.content.iter_any():
                    await out.write(chunk)
            except (ConnectionResetError, aiohttp.ClientError, OSError):
                return out  # the client went away (or the backend broke off): stop copying
            await out.write_eof()
            return out
