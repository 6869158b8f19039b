"""kubesim's fault engine, a filter in the API server's handler chain (app.py's middleware): fault, lost-answer
and latency rules, rate-based chaos and request counters. Driven by the harness: `KubeSim.fail()`,
`add_latency()`, `stats()`... in-process, or the `/kubesim/` test API over HTTP (kubesim/controls.py)."""
from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field

from aiohttp import web

from kubesim.apimachinery.errors import REASONS, ApiError
from kubesim.apiserver.endpoints.wire import Target


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


EXPIRE = web.RequestKey("kubesim_expire", bool)   # set on a watch request the chaos answers 410 Gone
CHAOS_KINDS = ("500", "503", "429", "reset", "slow")


@dataclass
class Chaos:
    """Rate-based faults (a soak's weather): each matching request fails with probability ``rate``, with a
    kind drawn evenly from ``kinds``; a resumed watch (resourceVersion given) is answered 410 Gone with the same
    probability; open watches are cut every ``cut_every`` seconds. Seeded: the same seed and request sequence
    give the same faults."""
    rate: float
    seed: int = 0
    kinds: tuple[str, ...] = CHAOS_KINDS
    verb: str = "*"
    path: re.Pattern = field(default_factory=lambda: re.compile(".*"))
    slow_seconds: float = 1.0
    cut_every: float = 0.0
    injected: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"faults rate must be within [0, 1], got {self.rate!r}")
        bad = [k for k in self.kinds if k not in CHAOS_KINDS]
        if bad or not self.kinds:
            raise ValueError(f"fault kinds {list(self.kinds)!r}: expected a non-empty subset of {list(CHAOS_KINDS)}")
        self.rng = random.Random(self.seed)

    def decide(self, verb: str, method: str, path: str, query) -> str | None:
        """The fault for this request ("500", "503", "429", "reset", "slow", "gone") or None."""
        if not (self.verb in ("*", verb, method.lower()) and self.path.search(path)):
            return None
        if self.rng.random() >= self.rate:
            return None
        if verb == "watch" and query.get("resourceVersion") not in (None, "", "0"):
            kind = "gone"
        else:
            kind = self.kinds[self.rng.randrange(len(self.kinds))]
        self.injected[kind] = self.injected.get(kind, 0) + 1
        return kind


class TestControls:
    """Fault rules, latency rules and request counters (the /kubesim/ test API)."""

    def __init__(self):
        self.faults: list[Rule] = []
        self.latencies: list[Rule] = []
        self.lost: list[Rule] = []     # served, then the connection closed before the answer
        self.chaos: Chaos | None = None
        self._cutter: asyncio.Task | None = None
        self.reset_stats()

    def reset_stats(self) -> None:
        self.total = 0
        self.by_verb: dict[str, int] = {}
        self.by_path: dict[str, int] = {}
        self.by_resource: dict[str, int] = {}

    def clear(self) -> None:
        self.faults.clear()
        self.latencies.clear()
        self.lost.clear()
        self.set_chaos(None)

    def stats(self) -> dict:
        return {"total": self.total, "by_verb": dict(self.by_verb), "by_path": dict(self.by_path),
                "by_resource": dict(self.by_resource), "chaos": self.chaos_stats()}

    def chaos_stats(self) -> dict:
        c = self.chaos
        return {} if c is None else {"rate": c.rate, "seed": c.seed, "kinds": list(c.kinds),
                                     "cut_every": c.cut_every, "injected": dict(c.injected)}

    def set_chaos(self, chaos: Chaos | None, store=None) -> None:
        """Install (or with None remove) rate-based faults; runs on kubesim's loop (it starts the watch cutter)."""
        if self._cutter is not None:
            self._cutter.cancel()
            self._cutter = None
        self.chaos = chaos
        if chaos is not None and chaos.cut_every > 0 and store is not None:
            self._cutter = asyncio.get_running_loop().create_task(self._cut_watches(chaos, store))

    async def _cut_watches(self, chaos: Chaos, store) -> None:
        while True:
            await asyncio.sleep(chaos.cut_every)
            chaos.injected["watch-cut"] = chaos.injected.get("watch-cut", 0) + store.close_watches()

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

    def lost_for(self, verb, method, path) -> Rule | None:
        return self._take(self.lost, verb, method, path)

    def latency_for(self, verb, method, path) -> float:
        rule = self._take(self.latencies, verb, method, path)
        return rule.seconds if rule else 0.0

    def add_fault(self, verb="*", path=".*", status=500, count=1, message=None) -> None:
        reason = REASONS.get(status, "Unknown")
        self.faults.append(Rule(verb, re.compile(path), count, status,
                                message or f"kubesim: injected fault ({status} {reason})"))

    def add_latency(self, verb="*", path=".*", seconds=0.1, count=None) -> None:
        self.latencies.append(Rule(verb, re.compile(path), count, seconds=seconds))

    def add_lost(self, verb="*", path=".*", count=1) -> None:
        self.lost.append(Rule(verb, re.compile(path), count))



def chaos_from(body: dict) -> Chaos:
    """A Chaos from the JSON body of POST /kubesim/chaos (field names as Chaos's), a 400 naming a bad field."""
    try:
        return Chaos(rate=float(body.get("rate", 0.2)), seed=int(body.get("seed", 0)),
                     kinds=tuple(body.get("kinds", CHAOS_KINDS)), verb=str(body.get("verb", "*")),
                     path=re.compile(body.get("path", ".*")), slow_seconds=float(body.get("slow_seconds", 1.0)),
                     cut_every=float(body.get("cut_every", 0.0)))
    except (TypeError, ValueError, re.error) as e:
        raise ApiError(400, f"kubesim: bad chaos body {body!r}: {e}", "BadRequest") from None
