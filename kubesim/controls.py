"""kubesim's test controls over HTTP: the `/kubesim/` test API (stats, faults, latency, lost answers, chaos, cutting
watches), the same the harness offers in-process (`KubeSim.fail()`, `add_latency()`, `stats()`...). The engine it
drives, a filter in the API server's handler chain, is kubesim/apiserver/endpoints/faults.py."""
from __future__ import annotations

import json

from aiohttp import web

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.endpoints.faults import (  # noqa: F401 - the engine's names, as kubesim.controls had them
    CHAOS_KINDS,
    EXPIRE,
    Chaos,
    Rule,
    TestControls,
    chaos_from,
)
from kubesim.apiserver.endpoints.wire import error, response


async def handle(controls: TestControls, store, request: web.Request, path: str) -> web.Response:
    """The `/kubesim/` test API: stats, faults, latency, cutting watches."""
    c = controls
    m = request.method
    body = {}
    if m in ("POST", "PUT"):
        raw = await request.read()
        body = json.loads(raw) if raw else {}
    if path == "/kubesim/stats" and m == "GET":
        return response({**c.stats(), "watches_open": store.watch_count})
    if path == "/kubesim/stats/reset" and m == "POST":
        c.reset_stats()
        return response({"ok": True})
    if path == "/kubesim/faults" and m == "POST":
        c.add_fault(body.get("verb", "*"), body.get("path", ".*"), int(body.get("status", 500)),
                    body.get("count", 1), body.get("message"))
        return response({"ok": True})
    if path == "/kubesim/lost" and m == "POST":
        c.add_lost(body.get("verb", "*"), body.get("path", ".*"), body.get("count", 1))
        return response({"ok": True})
    if path == "/kubesim/latency" and m == "POST":
        c.add_latency(body.get("verb", "*"), body.get("path", ".*"), float(body.get("seconds", 0.1)),
                      body.get("count"))
        return response({"ok": True})
    if path == "/kubesim/chaos" and m == "POST":
        try:
            c.set_chaos(chaos_from(body), store)
        except ApiError as e:
            return error(e)
        return response({"ok": True, **c.chaos_stats()})
    if path == "/kubesim/chaos" and m == "GET":
        return response(c.chaos_stats())
    if path in ("/kubesim/faults", "/kubesim/latency", "/kubesim/lost", "/kubesim/chaos") and m == "DELETE":
        c.clear()
        return response({"ok": True})
    if path == "/kubesim/watches/cut" and m == "POST":
        return response({"closed": store.close_watches()})
    raise ApiError(404, f"no kubesim test endpoint {m} {path}", "NotFound")
