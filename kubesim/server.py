"""The HTTP face of kubesim: aiohttp routes for the Kubernetes API, discovery, watch streaming, pod logs,
the `/kubesim/` test API (fault injection, stats), and `KubeSim`, which runs it all in a daemon thread."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml
from aiohttp import web

from kubesim import patch as patchmod
from kubesim.authz import Access
from kubesim.errors import REASONS, ApiError
from kubesim.registry import DEFAULT_VERBS, ResourceType
from kubesim.store import Store

GIT_VERSION = "v1.31.0-kubesim"
JSON = "application/json"
_TRUE = ("true", "True", "1")
log = logging.getLogger("kubesim")


def _body(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _response(data: bytes | dict, status: int = 200) -> web.Response:
    if not isinstance(data, bytes):
        data = _body(data)
    return web.Response(body=data, status=status, content_type=JSON)


def _error(e: ApiError) -> web.Response:
    return _response(e.status(), e.code)


# ---- request classification ----------------------------------------------------------------------------

@dataclass
class Target:
    """What a Kubernetes API path addresses."""
    group: str
    version: str
    namespace: str | None
    plural: str
    name: str | None
    subresource: str | None


def parse_path(path: str) -> Target | None:
    """`/api/v1/...` or `/apis/<g>/<v>/...` → Target; None if it is not a resource path."""
    segs = [s for s in path.split("/") if s]
    if len(segs) >= 3 and segs[0] == "api":
        group, version, rest = "", segs[1], segs[2:]
    elif len(segs) >= 4 and segs[0] == "apis":
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    else:
        ns = None
    if len(rest) > 3:
        return None
    return Target(group, version, ns, rest[0], rest[1] if len(rest) > 1 else None,
                  rest[2] if len(rest) > 2 else None)


def kube_verb(method: str, target: Target | None, query) -> str:
    if target is None:
        return method.lower()
    if method == "GET":
        if target.name is None:
            return "watch" if query.get("watch") in _TRUE else "list"
        return "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name else "deletecollection"
    return method.lower()


# ---- fault injection and stats ----------------------------------------------------------------------

@dataclass
class Rule:
    verb: str            # kube verb ("get", "list", "watch", "create"...), HTTP method, or "*"
    path: re.Pattern
    count: int | None    # None = forever
    status: int = 500
    message: str = ""
    seconds: float = 0.0

    def matches(self, verb: str, method: str, path: str) -> bool:
        return self.verb in ("*", verb, method.lower(), method.upper()) and bool(self.path.search(path))


class TestControls:
    """Fault rules, latency rules and request counters (the /kubesim/ test API)."""

    def __init__(self):
        self.faults: list[Rule] = []
        self.latencies: list[Rule] = []
        self.reset_stats()

    def reset_stats(self) -> None:
        self.total = 0
        self.by_verb: dict[str, int] = {}
        self.by_path: dict[str, int] = {}
        self.by_resource: dict[str, int] = {}

    def clear(self) -> None:
        self.faults.clear()
        self.latencies.clear()

    def stats(self) -> dict:
        return {"total": self.total, "by_verb": dict(self.by_verb), "by_path": dict(self.by_path),
                "by_resource": dict(self.by_resource)}

    def count(self, verb: str, method: str, path: str, target: Target | None) -> None:
        self.total += 1
        self.by_verb[verb] = self.by_verb.get(verb, 0) + 1
        key = f"{method} {path}"
        self.by_path[key] = self.by_path.get(key, 0) + 1
        if target is not None:
            res = target.plural if not target.group else f"{target.plural}.{target.group}"
            if target.subresource:
                res += "/" + target.subresource
            rk = f"{verb} {res}"
            self.by_resource[rk] = self.by_resource.get(rk, 0) + 1

    @staticmethod
    def _take(rules: list[Rule], verb: str, method: str, path: str) -> Rule | None:
        for rule in rules:
            if rule.matches(verb, method, path):
                if rule.count is not None:
                    rule.count -= 1
                    if rule.count <= 0:
                        rules.remove(rule)
                return rule
        return None

    def fault_for(self, verb, method, path) -> Rule | None:
        return self._take(self.faults, verb, method, path)

    def latency_for(self, verb, method, path) -> float:
        rule = self._take(self.latencies, verb, method, path)
        return rule.seconds if rule else 0.0

    def add_fault(self, verb="*", path=".*", status=500, count=1, message=None) -> None:
        reason = REASONS.get(status, "Unknown")
        self.faults.append(Rule(verb, re.compile(path), count, status,
                                message or f"kubesim: injected fault ({status} {reason})"))

    def add_latency(self, verb="*", path=".*", seconds=0.1, count=None) -> None:
        self.latencies.append(Rule(verb, re.compile(path), count, seconds=seconds))


# ---- discovery ----------------------------------------------------------------------------------------

def _resource_entries(rts: list[ResourceType]) -> list[dict]:
    out = []
    for rt in sorted(rts, key=lambda r: r.plural):
        entry = {"name": rt.plural, "singularName": rt.singular or rt.kind.lower(), "namespaced": rt.namespaced,
                 "kind": rt.kind, "verbs": list(DEFAULT_VERBS)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        out.append(entry)
        for sub in sorted(rt.subresources):
            se = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                  "kind": rt.kind, "verbs": ["get", "patch", "update"]}
            if sub == "scale":
                se.update(group="autoscaling", version="v1", kind="Scale")
            elif sub == "log":
                se["verbs"] = ["get"]
            elif sub in ("binding", "eviction"):
                se["verbs"] = ["create"]
                se["kind"] = "Binding" if sub == "binding" else "Eviction"
            elif sub == "finalize":
                se["verbs"] = ["update"]
            elif sub == "token":
                se.update(group="authentication.k8s.io", version="v1", kind="TokenRequest", verbs=["create"])
            elif sub == "proxy":
                se.update(kind="NodeProxyOptions", verbs=["create", "delete", "get", "patch", "update"])
            out.append(se)
    return out


def _group_versions(store: Store) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rt in store.registry.all():
        if rt.group:
            vs = groups.setdefault(rt.group, [])
            if rt.version not in vs:
                vs.append(rt.version)
    return groups


def _api_group(name: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


# ---- the application ----------------------------------------------------------------------------------

class ApiServer:
    """Routes bound to one Store and one TestControls."""

    def __init__(self, store: Store, controls: TestControls | None = None, bookmark_interval: float = 5.0,
                 access: Access | None = None):
        self.store = store
        self.access = access or Access(store)     # TokenRequest; authn + RBAC when access.enforce
        self.controls = controls or TestControls()
        self.bookmark_interval = bookmark_interval
        self.app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        path = request.path
        if path.startswith("/kubesim/"):
            return await handler(request)
        target = parse_path(path)
        verb = kube_verb(request.method, target, request.query)
        self.controls.count(verb, request.method, path, target)
        delay = self.controls.latency_for(verb, request.method, path)
        if delay:
            await asyncio.sleep(delay)
        rule = self.controls.fault_for(verb, request.method, path)
        if rule is not None:
            return _error(ApiError(rule.status, rule.message))
        try:
            await self.access.check(request)
            return await handler(request)
        except ApiError as e:
            return _error(e)
        except (asyncio.CancelledError, ConnectionResetError, web.HTTPException):
            raise
        except Exception as e:      # a kubesim bug: answer like the real server's 500, and log it
            log.exception("kubesim: %s %s failed", request.method, path)
            return _error(ApiError(500, f"kubesim internal error: {type(e).__name__}: {e}", "InternalError"))

    async def _dispatch(self, request: web.Request):
        path = request.path.rstrip("/") or "/"
        if path.startswith("/kubesim/"):
            return await self._test_api(request, path)
        if request.method == "GET":
            simple = self._simple_get(path)
            if simple is not None:
                return simple
        target = parse_path(path)
        if target is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return await self._resource(request, target)

    # -- non-resource endpoints --

    def _simple_get(self, path: str) -> web.Response | None:
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/version":
            return _response({"major": "1", "minor": "31", "gitVersion": GIT_VERSION, "gitCommit": "kubesim",
                              "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z",
                              "goVersion": "go1.22.5", "compiler": "gc", "platform": "linux/amd64"})
        if path == "/api":
            return _response({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        if path == "/apis":
            return _response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                _api_group(g, vs) for g, vs in sorted(_group_versions(self.store).items())]})
        segs = path.strip("/").split("/")
        if segs == ["api", "v1"]:
            return self._resource_list("", "v1")
        if len(segs) == 2 and segs[0] == "apis":
            vs = _group_versions(self.store).get(segs[1])
            if not vs:
                raise ApiError(404, "the server could not find the requested resource", "NotFound")
            return _response({"kind": "APIGroup", "apiVersion": "v1", **_api_group(segs[1], vs)})
        if len(segs) == 3 and segs[0] == "apis":
            return self._resource_list(segs[1], segs[2])
        return None

    def _resource_list(self, group: str, version: str) -> web.Response:
        rts = [rt for rt in self.store.registry.all() if rt.group == group and rt.version == version]
        if not rts:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        gv = version if not group else f"{group}/{version}"
        return _response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                          "resources": _resource_entries(rts)})

    # -- resources --

    async def _read_body(self, request: web.Request):
        raw = await request.read()
        if not raw:
            return None
        ctype = request.content_type
        if "yaml" in ctype:
            try:
                return yaml.safe_load(raw)
            except yaml.YAMLError as e:
                raise ApiError(400, f"error decoding YAML: {e}", "BadRequest") from None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, f"error decoding request body: {e}", "BadRequest") from None

    async def _resource(self, request: web.Request, t: Target):
        store = self.store
        rt = store.registry.lookup(t.group, t.version, t.plural)
        if rt is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if t.namespace is not None and not rt.namespaced:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        if t.subresource and t.subresource not in rt.subresources:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        q = request.query
        method = request.method
        dry_run = q.get("dryRun") == "All"
        ns = t.namespace
        if rt.namespaced and t.name is not None and ns is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")

        if t.name is None:
            if method == "GET":
                if q.get("watch") in _TRUE:
                    return await self._watch(request, rt, ns)
                return self._list(rt, ns, q)
            if method == "POST":
                if rt.namespaced and ns is None:
                    raise ApiError(405, "the server does not allow this method on the requested resource",
                                   "MethodNotAllowed")
                body = await self._read_body(request)
                if body is None:
                    raise ApiError(400, "the body of the request is empty", "BadRequest")
                obj = store.create(rt, ns, body, dry_run=dry_run)
                return _response(obj, 201)
            if method == "DELETE":
                opts = await self._read_body(request) or {}
                items = store.delete_collection(rt, ns, q.get("labelSelector"), q.get("fieldSelector"),
                                                propagation=self._propagation(q, opts), dry_run=dry_run)
                return _response({"kind": rt.list_kind, "apiVersion": rt.api_version,
                                  "metadata": {"resourceVersion": store.resource_version}, "items": items})
            raise ApiError(405, "the server does not allow this method on the requested resource",
                           "MethodNotAllowed")

        sub = t.subresource
        if sub == "log":
            return await self._log(request, ns, t.name)
        if sub == "scale":
            return await self._scale(request, rt, ns, t.name, dry_run)
        if sub in ("binding", "eviction"):
            if method != "POST":
                raise ApiError(405, "the server does not allow this method on the requested resource",
                               "MethodNotAllowed")
            body = await self._read_body(request) or {}
            if sub == "binding":
                target = body.get("target") or {}
                if not target.get("name"):
                    raise ApiError(422, f'Binding "{t.name}" is invalid: target.name: Required value', "Invalid")
                store.bind(ns, t.name, target["name"], dry_run=dry_run)
            else:
                opts = body.get("deleteOptions") or {}
                store.delete(rt, ns, t.name, propagation=opts.get("propagationPolicy"),
                             preconditions=opts.get("preconditions"), dry_run=dry_run)
            return _response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "code": 201}, 201)
        if sub == "token" and method == "POST":
            return _response(self.access.token_request(ns, t.name, await self._read_body(request)), 201)
        if sub not in (None, "status"):
            raise ApiError(405, "the server does not allow this method on the requested resource",
                           "MethodNotAllowed")
        if method == "GET":
            return _response(store.get_bytes(rt, ns, t.name))
        if method == "PUT":
            body = await self._read_body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
            return _response(store.update(rt, ns, t.name, body, subresource=sub, dry_run=dry_run))
        if method == "PATCH":
            ptype = request.content_type
            if ptype not in patchmod.PATCH_TYPES:
                raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                                    f"include: {', '.join(patchmod.PATCH_TYPES)}", "UnsupportedMediaType")
            raw = await request.read()
            existed = True
            if ptype == patchmod.APPLY:
                try:
                    store.get_bytes(rt, ns, t.name)
                except ApiError:
                    existed = False
            obj = store.patch(rt, ns, t.name, ptype, raw, subresource=sub, field_manager=q.get("fieldManager"),
                              force=q.get("force") in _TRUE, dry_run=dry_run)
            return _response(obj, 200 if existed else 201)
        if method == "DELETE" and sub is None:
            opts = await self._read_body(request) or {}
            obj = store.delete(rt, ns, t.name, propagation=self._propagation(q, opts),
                               preconditions=opts.get("preconditions"),
                               dry_run=dry_run or "All" in (opts.get("dryRun") or []),
                               grace_period_seconds=self._grace(q, opts))
            pending = bool(obj.get("metadata", {}).get("deletionTimestamp")) and \
                self._exists(rt, ns, t.name)
            return _response(obj, 202 if pending else 200)
        raise ApiError(405, "the server does not allow this method on the requested resource",
                       "MethodNotAllowed")

    def _exists(self, rt, ns, name) -> bool:
        try:
            self.store.get_bytes(rt, ns, name)
            return True
        except ApiError:
            return False

    @staticmethod
    def _grace(q, opts: dict) -> int | None:
        value = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds"))
        try:
            return int(value) if value is not None else None
        except ValueError:
            raise ApiError(400, f"invalid gracePeriodSeconds: {value!r}", "BadRequest") from None

    @staticmethod
    def _propagation(q, opts: dict) -> str | None:
        policy = opts.get("propagationPolicy") or q.get("propagationPolicy")
        orphan = opts.get("orphanDependents", q.get("orphanDependents"))
        if policy is None and orphan is not None:
            policy = "Orphan" if orphan in (True, "true") else "Background"
        return policy

    def _list(self, rt: ResourceType, ns: str | None, q) -> web.Response:
        self.store.check_list_rv(q.get("resourceVersion"), q.get("resourceVersionMatch"))
        limit = q.get("limit")
        try:
            limit = int(limit) if limit else None
        except ValueError:
            raise ApiError(400, f"invalid limit: {limit!r}", "BadRequest") from None
        items, rv, token, remaining = self.store.list_page(rt, ns, q.get("labelSelector"), q.get("fieldSelector"),
                                                           limit, q.get("continue"), q.get("resourceVersion"),
                                                           q.get("resourceVersionMatch"))
        meta = {"resourceVersion": rv}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        head = _body({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta})[:-1]
        return _response(head + b',"items":[' + b",".join(items) + b"]}")

    # -- watch --

    async def _watch(self, request: web.Request, rt: ResourceType, ns: str | None):
        q = request.query
        timeout = q.get("timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks") in _TRUE
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        try:
            w = self.store.watch(rt, ns, q.get("resourceVersion"), q.get("labelSelector"), q.get("fieldSelector"))
        except ApiError as e:
            if e.code != 410:
                raise
            await resp.prepare(request)
            await resp.write(b'{"type":"ERROR","object":' + _body(e.status()) + b"}\n")
            await resp.write_eof()
            return resp
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(timeout) if timeout else None
        try:
            while True:
                wait = None
                if deadline is not None:
                    wait = deadline - loop.time()
                    if wait <= 0:
                        break
                if bookmarks:
                    wait = self.bookmark_interval if wait is None else min(wait, self.bookmark_interval)
                try:
                    item = await w.next_raw(wait)
                except TimeoutError:
                    if bookmarks and (deadline is None or loop.time() < deadline):
                        bm = {"kind": rt.kind, "apiVersion": rt.api_version,
                              "metadata": {"resourceVersion": str(w.last_rv)}}
                        await resp.write(b'{"type":"BOOKMARK","object":' + _body(bm) + b"}\n")
                    continue
                if item is None:
                    break
                etype, _obj, data, _rv = item
                await resp.write(b'{"type":"' + etype.encode() + b'","object":' + data + b"}\n")
        except ConnectionResetError:      # the client went away
            return resp
        finally:
            w.close()
        try:
            await resp.write_eof()
        except ConnectionResetError:
            pass
        return resp

    # -- pods/log --

    async def _log(self, request: web.Request, ns: str, name: str):
        pod_rt = self.store.registry.lookup("", "v1", "pods")
        pod = self.store.get(pod_rt, ns, name)
        q = request.query
        containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
        container = q.get("container")
        if container is None:
            if len(containers) > 1:
                raise ApiError(400, f"a container name must be specified for pod {name}, choose one of: "
                                    f"[{' '.join(containers)}]", "BadRequest")
            container = containers[0] if containers else None
        elif container not in containers and container not in [
                c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []]:
            raise ApiError(400, f"container {container} is not valid for pod {name}", "BadRequest")
        provider = self.store.log_provider
        if provider is None:
            raise ApiError(400, f'container "{container}" in pod "{name}" is waiting to start: '
                                "ContainerCreating", "BadRequest")
        tail = int(q["tailLines"]) if q.get("tailLines") else None
        stamps = q.get("timestamps") in _TRUE
        since = int(q["sinceSeconds"]) if q.get("sinceSeconds") else None
        if q.get("sinceTime"):
            since_dt = _parse_time(q["sinceTime"])
        elif since is not None:
            since_dt = datetime.now(UTC) - timedelta(seconds=since)
        else:
            since_dt = None
        limit = int(q["limitBytes"]) if q.get("limitBytes") else None
        if q.get("follow") in _TRUE:
            # the kubelet's refusals (container not started, unknown pod) must be an HTTP error, not a
            # broken stream: ask for an empty snapshot first, which raises the same ApiError
            provider.snapshot(ns, name, container, tail_lines=0)
            resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            sent = 0
            async for chunk in provider.stream(ns, name, container, tail_lines=tail, timestamps=stamps):
                if limit is not None:
                    chunk = chunk[: max(0, limit - sent)]
                if chunk:
                    await resp.write(chunk)
                    sent += len(chunk)
                if limit is not None and sent >= limit:
                    break
            await resp.write_eof()
            return resp
        # sinceSeconds/sinceTime select lines first, tailLines then counts from the end of that selection
        text = provider.snapshot(ns, name, container, tail_lines=tail if since_dt is None else None,
                                 timestamps=stamps or since_dt is not None, previous=q.get("previous") in _TRUE)
        if since_dt is not None:
            text = _since(text, since_dt, keep_stamps=stamps)
            if tail is not None:
                lines = text.splitlines(keepends=True)
                text = "".join(lines[-tail:] if tail > 0 else [])
        data = text.encode()
        if limit is not None:
            data = data[:limit]
        return web.Response(body=data, content_type="text/plain")

    # -- scale --

    async def _scale(self, request, rt, ns, name, dry_run):
        def to_scale(obj):
            md = obj["metadata"]
            sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                    "metadata": {k: md[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                    "creationTimestamp") if k in md},
                    "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
                    "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                               "selector": ",".join(f"{k}={v}" for k, v in sorted(sel.items()))}}

        obj = self.store.get(rt, ns, name)
        if request.method == "GET":
            return _response(to_scale(obj))
        if request.method not in ("PUT", "PATCH"):
            raise ApiError(405, "the server does not allow this method on the requested resource",
                           "MethodNotAllowed")
        current = to_scale(obj)
        if request.method == "PUT":
            new = await self._read_body(request)
            if not isinstance(new, dict):
                raise ApiError(400, "the body of the request must be a Scale object", "BadRequest")
        else:
            ptype = request.content_type
            body = patchmod.decode_body(ptype, await request.read())
            new = patchmod.apply_patch(current, ptype if ptype != patchmod.APPLY else patchmod.MERGE, body,
                                       custom=False)
        replicas = (new.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise ApiError(422, f'Scale.autoscaling "{name}" is invalid: spec.replicas: Invalid value: '
                                f"{replicas}: must be greater than or equal to 0", "Invalid")
        rv = (new.get("metadata") or {}).get("resourceVersion")
        body = {"metadata": {"resourceVersion": rv} if rv else {}, "spec": {"replicas": replicas}}
        updated = self.store.patch(rt, ns, name, patchmod.MERGE, body, dry_run=dry_run)
        return _response(to_scale(updated))

    # -- the /kubesim/ test API --

    async def _test_api(self, request: web.Request, path: str):
        c = self.controls
        m = request.method
        body = {}
        if m in ("POST", "PUT"):
            raw = await request.read()
            body = json.loads(raw) if raw else {}
        if path == "/kubesim/stats" and m == "GET":
            return _response(c.stats())
        if path == "/kubesim/stats/reset" and m == "POST":
            c.reset_stats()
            return _response({"ok": True})
        if path == "/kubesim/faults" and m == "POST":
            c.add_fault(body.get("verb", "*"), body.get("path", ".*"), int(body.get("status", 500)),
                        body.get("count", 1), body.get("message"))
            return _response({"ok": True})
        if path == "/kubesim/latency" and m == "POST":
            c.add_latency(body.get("verb", "*"), body.get("path", ".*"), float(body.get("seconds", 0.1)),
                          body.get("count"))
            return _response({"ok": True})
        if path in ("/kubesim/faults", "/kubesim/latency") and m == "DELETE":
            c.clear()
            return _response({"ok": True})
        if path == "/kubesim/denials" and m == "GET":      # every 403 answered by RBAC (kubesim.authz)
            return _response({"denials": [{k: v for k, v in d.__dict__.items() if k != "user"} | {"user": d.user.name}
                                          for d in list(self.access.denials)]})
        if path == "/kubesim/watches/cut" and m == "POST":
            return _response({"closed": self.store.close_watches()})
        raise ApiError(404, f"no kubesim test endpoint {m} {path}", "NotFound")


def _parse_time(text: str) -> datetime:
    text = text.strip().replace("Z", "+00:00")
    m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", text)
    if m and m.group(2):
        text = m.group(1) + m.group(2)[:7] + m.group(3)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        raise ApiError(400, f"invalid time: {text!r}", "BadRequest") from None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _since(text: str, since: datetime, *, keep_stamps: bool) -> str:
    """Keep the log lines stamped at or after `since` (lines carry an RFC 3339 timestamp prefix)."""
    out = []
    for line in text.splitlines(keepends=True):
        stamp, _, rest = line.partition(" ")
        try:
            ok = _parse_time(stamp) >= since
        except ApiError:
            ok = True
            rest = line
        if ok:
            out.append(line if keep_stamps else rest)
    return "".join(out)


# ---- kubeconfig ---------------------------------------------------------------------------------------

def kubeconfig(url: str, token: str = "kubesim", user: str = "kubesim", namespace: str = "default") -> dict:
    """A kubeconfig for `url`; the default token is kubesim's admin (see kubesim.authz)."""
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "kubesim", "cluster": {"server": url}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "kubesim", "context": {"cluster": "kubesim", "user": user,
                                                     "namespace": namespace}}],
        "current-context": "kubesim",
    }


def write_kubeconfig(url: str, path, **kw) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(kubeconfig(url, **kw), sort_keys=False))
    return path


# ---- KubeSim: in-process server -------------------------------------------------------------------------

def _cluster_class():
    """kubesim.cluster.Cluster if that module exists (the API server works without it)."""
    try:
        from kubesim.cluster import Cluster
    except ModuleNotFoundError as e:
        if e.name != "kubesim.cluster":
            raise
        return None
    return Cluster


class KubeSim:
    """kubesim in a daemon thread of this process: `start()`, `.url`, `reset()` between tests, `stop()`."""

    def __init__(self, nodes=None, timing=None, history: int = 10000, port: int = 0, host: str = "127.0.0.1",
                 bookmark_interval: float = 5.0, with_cluster: bool | None = None, authz: str | None = None):
        self.nodes, self.timing, self.history = nodes, timing, history
        if authz not in (None, "none", "rbac"):
            raise ValueError(f"authz must be 'rbac' or None, not {authz!r}")
        # with_cluster=False (or env KUBESIM_CLUSTER=0): the API server alone, no controllers
        self.with_cluster = os.environ.get("KUBESIM_CLUSTER", "1") != "0" if with_cluster is None else with_cluster
        self.host, self.port = host, port
        self.store = Store(history=history)
        self.controls = TestControls()
        self.cluster = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.access = Access(self.store, enforce=authz == "rbac")    # kubesim.authz: tokens, RBAC
        self._api = ApiServer(self.store, self.controls, bookmark_interval, self.access)
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- lifecycle --

    def start(self) -> KubeSim:
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._run, name="kubesim", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError("kubesim failed to start") from self._error
        if not self._ready.is_set():
            raise RuntimeError("kubesim did not start within 30 s")
        return self

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:     # surfaced by start()
            self._error = e
            self._ready.set()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        # handler_cancellation: a client that goes away cancels its handler, so its watch closes at once
        self._runner = web.AppRunner(self._api.app, access_log=None, handle_signals=False,
                                     handler_cancellation=True)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, shutdown_timeout=0.5).start()
        await self._start_cluster()
        self._ready.set()
        await self._stopped.wait()
        self.store.close_watches()
        await self._stop_cluster()
        await self._runner.cleanup()

    async def _start_cluster(self) -> None:
        cls = _cluster_class() if self.with_cluster else None
        if cls is None:
            self.cluster = None
            return
        self.cluster = cls(self.store, nodes=self.nodes, timing=self.timing)
        await self.cluster.start()

    async def _stop_cluster(self) -> None:
        if self.cluster is not None:
            await self.cluster.stop()
            self.cluster = None

    def stop(self) -> None:
        if self._thread is None or self.loop is None:
            return
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(30)
        self._thread = None

    def run(self, coro, timeout: float = 60):
        """Run a coroutine on kubesim's loop from another thread and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def reset(self) -> None:
        """Fresh store (default namespaces), cluster re-installed, faults/latency/stats cleared."""
        async def _reset():
            await self._stop_cluster()
            self.store.clear()
            self.controls.clear()
            self.controls.reset_stats()
            await self._start_cluster()
        self.run(_reset())

    # -- clients and config --

    def write_kubeconfig(self, path) -> Path:
        return write_kubeconfig(self.url, path)

    def api_client(self):
        import kubernetes.client
        cfg = kubernetes.client.Configuration()
        cfg.host = self.url
        return kubernetes.client.ApiClient(cfg)

    # -- fault injection (same as the HTTP test API) --

    def fail(self, verb: str = "*", path: str = ".*", status: int = 500, count: int | None = 1,
             message: str | None = None) -> None:
        """Fail the next `count` requests (None = all) whose verb and path (regex, searched) match."""
        self.loop.call_soon_threadsafe(self.controls.add_fault, verb, path, status, count, message)
        self._sync()

    def add_latency(self, verb: str = "*", path: str = ".*", seconds: float = 0.1,
                    count: int | None = None) -> None:
        self.loop.call_soon_threadsafe(self.controls.add_latency, verb, path, seconds, count)
        self._sync()

    def clear_faults(self) -> None:
        self.loop.call_soon_threadsafe(self.controls.clear)
        self._sync()

    def cut_watches(self) -> int:
        """Close every open watch connection; returns how many there were."""
        return self.store.close_watches()

    def stats(self) -> dict:
        return self.controls.stats()

    def reset_stats(self) -> None:
        self.loop.call_soon_threadsafe(self.controls.reset_stats)
        self._sync()

    def _sync(self) -> None:
        async def noop():
            return None
        self.run(noop())
