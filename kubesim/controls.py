"""kubesim's test controls: fault and latency rules, request counters, and the `/kubesim/` HTTP test API
that drives them (the same API `KubeSim.fail()`, `add_latency()`, `stats()`... offer in-process)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from aiohttp import web

from kubesim.errors import REASONS, ApiError
from kubesim.wire import Target, response


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
    if path == "/kubesim/latency" and m == "POST":
        c.add_latency(body.get("verb", "*"), body.get("path", ".*"), float(body.get("seconds", 0.1)),
                      body.get("count"))
        return response({"ok": True})
    if path in ("/kubesim/faults", "/kubesim/latency") and m == "DELETE":
        c.clear()
        return response({"ok": True})
    if path == "/kubesim/watches/cut" and m == "POST":
        return response({"closed": store.close_watches()})
    raise ApiError(404, f"no kubesim test endpoint {m} {path}", "NotFound")
