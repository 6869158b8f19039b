"""The Kubernetes API on resource paths: create, get, list (pages, resourceVersion reads), update, patch,
delete and deletecollection, watch streaming (bookmarks, timeouts, 410 as an ERROR event), and the
scale, binding, eviction and log subresources."""
from __future__ import annotations

import asyncio

from aiohttp import web

from kubesim.apimachinery.errors import ApiError, gone, no_route
from kubesim.apiserver import warning
from kubesim.apiserver.endpoints import field_validation, printers
from kubesim.apiserver.endpoints.faults import EXPIRE
from kubesim.apiserver.endpoints.routes_logs import pod_log
from kubesim.apiserver.endpoints.wire import JSON, TRUE, Target, body_bytes, read_body, response
from kubesim.apiserver.registry import patch as patchmod
from kubesim.apiserver.registry.kinds import ResourceType
from kubesim.apiserver.registry.store import Store


class ResourceRoutes:
    """Resource requests on one Store."""

    def __init__(self, store: Store, bookmark_interval: float = 5.0):
        self.store = store
        self.bookmark_interval = bookmark_interval

    async def handle(self, request: web.Request, t: Target) -> web.StreamResponse:
        """A request on a resource path: collection, object, or subresource; the admission plugins'
        warnings (warning.py) go back as `Warning` headers."""
        with warning.recording() as warnings:
            resp = await self._handle(request, t)
        if warnings and not resp.prepared:
            for text in warnings:
                resp.headers.add("Warning", warning.header_value(text))
        return resp

    async def _handle(self, request: web.Request, t: Target) -> web.StreamResponse:
        store = self.store
        rt = store.registry.lookup(t.group, t.version, t.plural)
        if rt is None:
            raise no_route()
        if t.namespace is not None and not rt.namespaced:
            raise no_route()
        if t.subresource and t.subresource not in rt.subresources:
            raise no_route()
        await field_validation.check_request(request, rt, t.subresource)   # fieldValidation=Strict
        dry_run = request.query.get("dryRun") == "All"
        ns = t.namespace
        if rt.namespaced and t.name is not None and ns is None:
            raise no_route()

        if t.name is None:
            return await self._collection(request, rt, ns, dry_run)
        if t.subresource in ("log", "scale", "binding", "eviction"):
            return await self._subresource(request, rt, ns, t.name, t.subresource, dry_run)
        return await self._object(request, rt, ns, t.name, t.subresource, dry_run)

    async def _collection(self, request: web.Request, rt: ResourceType, ns: str | None, dry_run: bool):
        """list, watch, create, deletecollection."""
        store, q, method = self.store, request.query, request.method
        if method == "GET":
            if q.get("watch") in TRUE:
                return await self._watch(request, rt, ns)
            return self._table_if_asked(request, rt, self._list(rt, ns, q))
        if method == "POST":
            if rt.namespaced and ns is None:
                raise ApiError(405, "the server does not allow this method on the requested resource",
                               "MethodNotAllowed")
            body = await read_body(request)
            if body is None:
                raise ApiError(400, "the body of the request is empty", "BadRequest")
            obj = store.create(rt, ns, body, dry_run=dry_run)
            return response(obj, 201)
        if method == "DELETE":
            opts = await read_body(request) or {}
            items = store.delete_collection(rt, ns, q.get("labelSelector"), q.get("fieldSelector"),
                                            propagation=self._propagation(q, opts), dry_run=dry_run)
            return response({"kind": rt.list_kind, "apiVersion": rt.api_version,
                         "metadata": {"resourceVersion": store.resource_version}, "items": items})
        raise ApiError(405, "the server does not allow this method on the requested resource",
                       "MethodNotAllowed")

    async def _subresource(self, request: web.Request, rt: ResourceType, ns: str | None, name: str, sub: str,
                           dry_run: bool):
        """pods/log, <workload>/scale, pods/binding, pods/eviction."""
        store, method = self.store, request.method
        if sub == "log":
            return await pod_log(self.store, request, ns, name)
        if sub == "scale":
            return await self._scale(request, rt, ns, name, dry_run)
        if sub in ("binding", "eviction"):
            if method != "POST":
                raise ApiError(405, "the server does not allow this method on the requested resource",
                               "MethodNotAllowed")
            body = await read_body(request) or {}
            if sub == "binding":
                target = body.get("target") or {}
                if not target.get("name"):
                    raise ApiError(422, f'Binding "{name}" is invalid: target.name: Required value', "Invalid")
                store.bind(ns, name, target["name"], dry_run=dry_run)
            else:
                opts = body.get("deleteOptions") or {}
                store.delete(rt, ns, name, propagation=opts.get("propagationPolicy"),
                             preconditions=opts.get("preconditions"), dry_run=dry_run)
            return response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "code": 201}, 201)

    async def _object(self, request: web.Request, rt: ResourceType, ns: str | None, name: str,
                      sub: str | None, dry_run: bool):
        """get, update, patch, delete of one object (or its status)."""
        store, q, method = self.store, request.query, request.method
        if sub not in (None, "status"):
            raise ApiError(405, "the server does not allow this method on the requested resource",
                           "MethodNotAllowed")
        if method == "GET":
            return self._table_if_asked(request, rt, response(store.get_bytes(rt, ns, name)))
        if method == "PUT":
            body = await read_body(request)
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
            return response(store.update(rt, ns, name, body, subresource=sub, dry_run=dry_run))
        if method == "PATCH":
            ptype = request.content_type
            if ptype not in patchmod.PATCH_TYPES:
                raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                                    f"include: {', '.join(patchmod.PATCH_TYPES)}", "UnsupportedMediaType")
            raw = await request.read()
            existed = True
            if ptype == patchmod.APPLY:
                try:
                    store.get_bytes(rt, ns, name)
                except ApiError:
                    existed = False
            obj = store.patch(rt, ns, name, ptype, raw, subresource=sub, field_manager=q.get("fieldManager"),
                              force=q.get("force") in TRUE, dry_run=dry_run)
            return response(obj, 200 if existed else 201)
        if method == "DELETE" and sub is None:
            opts = await read_body(request) or {}
            obj = store.delete(rt, ns, name, propagation=self._propagation(q, opts),
                               preconditions=opts.get("preconditions"),
                               dry_run=dry_run or "All" in (opts.get("dryRun") or []),
                               grace_period_seconds=self._grace(q, opts))
            pending = bool(obj.get("metadata", {}).get("deletionTimestamp")) and \
                self._exists(rt, ns, name)
            return response(obj, 202 if pending else 200)
        raise ApiError(405, "the server does not allow this method on the requested resource",
                       "MethodNotAllowed")

    def _table_if_asked(self, request: web.Request, rt: ResourceType, resp: web.Response) -> web.Response:
        """`Accept: ...;as=Table;g=meta.k8s.io;v=v1` (kubectl get): the same answer as a Table (printers.py)."""
        if not printers.wants_table(request.headers.get("Accept")):
            return resp
        return response(printers.as_table(self.store, rt, resp.body, request.query))

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
        head = body_bytes({"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta})[:-1]
        return response(head + b',"items":[' + b",".join(items) + b"]}")

    # -- watch --

    async def _watch(self, request: web.Request, rt: ResourceType, ns: str | None):
        q = request.query
        timeout = q.get("timeoutSeconds")
        bookmarks = q.get("allowWatchBookmarks") in TRUE
        tables = printers.watch_tables(self.store, rt, request)   # kubectl get -w: each object as a Table
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        resp.enable_chunked_encoding()
        try:
            if request.get(EXPIRE):   # injected by the chaos controls (faults.py)
                raise gone(f"too old resource version: {q.get('resourceVersion')} (injected)")
            w = self.store.watch(rt, ns, q.get("resourceVersion"), q.get("labelSelector"), q.get("fieldSelector"))
        except ApiError as e:
            if e.code != 410:
                raise
            await resp.prepare(request)
            await resp.write(b'{"type":"ERROR","object":' + body_bytes(e.status()) + b"}\n")
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
                        rv = await w.progress()
                        if rv is not None:
                            bm = {"kind": rt.kind, "apiVersion": rt.api_version,
                                  "metadata": {"resourceVersion": str(rv)}}
                            await resp.write(b'{"type":"BOOKMARK","object":' + body_bytes(bm) + b"}\n")
                    continue
                if item is None:
                    break
                etype, obj, data, _rv = item
                if tables is not None:
                    data = tables(obj)
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
            return response(to_scale(obj))
        if request.method not in ("PUT", "PATCH"):
            raise ApiError(405, "the server does not allow this method on the requested resource",
                           "MethodNotAllowed")
        current = to_scale(obj)
        if request.method == "PUT":
            new = await read_body(request)
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
        return response(to_scale(updated))

