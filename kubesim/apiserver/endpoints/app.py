"""`ApiServer`: kubesim's aiohttp application. One catch-all route; the middleware counts requests and
applies the injected faults and latency (faults.py) and turns `ApiError` into a Status response;
`_dispatch` routes to the test API (`test_api`: the harness's, kubesim/controls.py), extra routes, discovery, then resources (routes_*.py).

To add an endpoint (e.g. a service proxy), append `(re.compile(path_regex), async handler(request, match))`
to `ApiServer.routes` (for `KubeSim`: `sim.api.routes`); it runs behind the same middleware.
"""
from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable

from aiohttp import web

from kubesim.apimachinery.errors import REASONS, ApiError
from kubesim.apiserver.auth.access_review import add_review_routes
from kubesim.apiserver.auth.authz import Access, add_token_route
from kubesim.apiserver.endpoints import faults
from kubesim.apiserver.endpoints.metrics_api import add_metrics_routes
from kubesim.apiserver.endpoints.node_metrics import add_node_metrics_route
from kubesim.apiserver.endpoints.proxy import add_proxy_route
from kubesim.apiserver.endpoints.routes_discovery import simple_get
from kubesim.apiserver.endpoints.routes_openapi import add_openapi_routes
from kubesim.apiserver.endpoints.routes_resources import ResourceRoutes
from kubesim.apiserver.endpoints.routes_streams import add_stream_routes
from kubesim.apiserver.endpoints.wire import error, kube_verb, parse_path, response
from kubesim.apiserver.registry.store import Store

log = logging.getLogger("kubesim")


class ApiServer:
    """Routes bound to one Store and one TestControls."""

    def __init__(self, store: Store, controls: faults.TestControls | None = None, bookmark_interval: float = 5.0,
                 access: Access | None = None):
        self.store = store
        self.access = access or Access(store)     # TokenRequest; authn + RBAC when access.enforce (authz.py)
        self.controls = controls or faults.TestControls()
        self.resources = ResourceRoutes(store, bookmark_interval)
        # the /kubesim/ test API, async handler(request, path): set by the harness (server.py: controls.handle)
        self.test_api: Callable | None = None
        # extra routes (e.g. a service proxy): (compiled regex on the path, async handler(request, match));
        # tried before the resource paths, behind the same middleware (stats, faults, latency, errors)
        self.routes: list[tuple[re.Pattern, Callable]] = []
        add_proxy_route(self)  # services/<name>:<port>/proxy/<path> (proxy.py)
        add_stream_routes(self)  # pods/<name>/exec and /portforward of process pods (routes_streams.py)
        add_token_route(self)  # serviceaccounts/<name>/token: TokenRequest (authz.py)
        add_review_routes(self)  # authorization.k8s.io access and rules reviews (access_review.py)
        add_openapi_routes(self)  # /openapi/v2, /openapi/v3 (routes_openapi.py)
        add_metrics_routes(self)  # metrics.k8s.io/v1beta1 NodeMetrics, PodMetrics (metrics_api.py)
        add_node_metrics_route(self)  # nodes/<n>/proxy/metrics/cadvisor, nodes/<n>:9400/proxy/metrics (node_metrics.py)
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
            return error(ApiError(rule.status, rule.message))
        chaos = self.controls.chaos
        kind = chaos.decide(verb, request.method, path, request.query) if chaos is not None else None
        if kind is not None:
            early = await self._chaos(kind, request, chaos.slow_seconds)
            if early is not None:
                return early
        lose = self.controls.lost_for(verb, request.method, path)
        try:
            await self.access.check(request)
            answer = await handler(request)
        except ApiError as e:
            answer = error(e)
        except (asyncio.CancelledError, ConnectionResetError, web.HTTPException):
            raise
        except Exception as e:      # a kubesim bug: answer like the real server's 500, and log it
            log.exception("kubesim: %s %s failed", request.method, path)
            answer = error(ApiError(500, f"kubesim internal error: {type(e).__name__}: {e}", "InternalError"))
        if lose is not None:        # done (committed), but the answer never arrives: a proxy dying mid-reply
            request.transport.close()
            raise ConnectionResetError("kubesim: injected lost answer")
        return answer

    @staticmethod
    async def _chaos(kind: str, request: web.Request, slow_seconds: float):
        """Apply one rate-based fault: an answer to send instead, or None to go on serving the request."""
        if kind == "slow":
            await asyncio.sleep(slow_seconds)
            return None
        if kind == "gone":                  # the watch handler answers it as an ERROR event, like a compacted RV
            request[faults.EXPIRE] = True
            return None
        if kind == "reset":                 # a load balancer or apiserver dying mid-request: no answer at all
            request.transport.close()
            raise ConnectionResetError("kubesim: injected connection reset")
        status = int(kind)
        return error(ApiError(status, f"kubesim: injected fault ({status} {REASONS.get(status, 'Unknown')})"))

    async def _dispatch(self, request: web.Request):
        path = request.path.rstrip("/") or "/"
        if path == "/kubesim/denials" and request.method == "GET":   # every 403 answered by RBAC (authz.py)
            return response(self.access.denials_body())
        if path.startswith("/kubesim/") and self.test_api is not None:
            return await self.test_api(request, path)
        if path.startswith("/kubesim/"):
            raise ApiError(404, f"no kubesim test endpoint {request.method} {path}", "NotFound")
        for pattern, route in self.routes:
            m = pattern.match(path)
            if m is not None:
                return await route(request, m)
        if request.method == "GET":
            simple = simple_get(self.store, path)
            if simple is not None:
                return simple
        target = parse_path(path)
        if target is None:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return await self.resources.handle(request, target)
