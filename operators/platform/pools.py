"""Airflow pools per team (``skiff-<team>``, slots from the quota), so that a team's tasks queue in Airflow
instead of failing at the API server's quota.

``plan_pools`` is pure. ``AirflowPools`` talks to Airflow's public REST API (``/api/v2/pools``): Airflow 3
tasks may not touch the metadata database, so the ``platform_sync`` task goes through the API server like any
client, with the credentials of the Airflow connection ``skiff_airflow_api`` (``http://user:password@host:port``).
A pool the file no longer lists is reported as orphaned, never deleted (it may hold queued tasks).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from operators import settings
from operators.core.quantity import parse_quantity
from operators.platform.model import POOL_PREFIX, Quota

DEFAULT_API_CONN_ID = settings.default("airflow_api_conn_id")
LOGIN_WAIT_S = 300.0  # how long a login waits for an api-server that is starting or busy
log = logging.getLogger(__name__)


def pool_slots(quota: Quota, default_cpu: str) -> int:
    """Airflow pool size from the quota: the Job count cap when there is one, else how many default-sized
    containers the CPU quota holds (at least 1)."""
    if quota.jobs is not None:
        return max(1, quota.jobs)
    return max(1, math.floor(parse_quantity(quota.cpu) / parse_quantity(default_cpu)))


def send_retrying_database_errors(send):
    """``send()`` (an httpx request), again after a 500 "Database error", with back-off (~15 s in all).

    On a SQLite metadata DB (airflow standalone) a busy timeout (devstack: ``?timeout=60``) makes a write wait
    for another's lock, but not always: in WAL mode a transaction that read before another writer committed
    gets SQLITE_BUSY at once, whatever the timeout; the API server rolls it back and answers 500 "Database
    error" (seen in CI on POST /api/v2/pools), so sending it again is safe."""
    for delay in (0.5, 1, 2, 4, 8, 0):
        r = send()
        if not (r.status_code == 500 and "Database error" in r.text) or not delay:
            return r
        time.sleep(delay)
    return r


@dataclass
class PoolPlan:
    create: dict[str, dict[str, Any]] = field(default_factory=dict)
    update: dict[str, dict[str, Any]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)


def plan_pools(desired: dict[str, dict[str, Any]], live: dict[str, dict[str, Any]]) -> PoolPlan:
    """``desired``/``live``: pool name -> {"slots", "description", "include_deferred"}."""
    plan = PoolPlan()
    for name, want in sorted(desired.items()):
        have = live.get(name)
        if have is None:
            plan.create[name] = want
        elif any(have.get(k) != v for k, v in want.items()):
            plan.update[name] = want
        else:
            plan.unchanged.append(name)
    plan.orphaned = sorted(n for n in live if n.startswith(POOL_PREFIX) and n not in desired)
    return plan


class AirflowPools:
    """Airflow's pools through its REST API (``httpx``, installed with Airflow)."""

    # a write may wait for the metadata DB's lock (SQLite: its busy timeout, 60 s in devstack) before answering
    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = 90.0) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)

    @classmethod
    def login(cls, base_url: str, username: str, password: str, *, wait_s: float = LOGIN_WAIT_S) -> AirflowPools:
        """A token for ``username``. An api-server that is not listening yet or too busy to answer (a
        stack's start: platform_sync is due at once, issue 29's ``ReadTimeout`` on ``POST /auth/token``) is
        waited for, up to ``wait_s`` in all; a refusal (401, 403) is final at once."""
        import httpx

        url = f"{base_url.rstrip('/')}/auth/token"
        deadline = time.monotonic() + wait_s
        delay = 1.0
        while True:
            try:
                r = httpx.post(url, json={"username": username, "password": password}, timeout=30.0)
                if r.status_code < 500 or time.monotonic() >= deadline:
                    break
                why = f"HTTP {r.status_code}"
            except httpx.TransportError as exc:  # connection refused, ReadTimeout, ...
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"Airflow API login as {username!r} at {base_url}: no answer within "
                                       f"{wait_s:.0f} s ({type(exc).__name__})") from exc
                why = type(exc).__name__
            log.info("Airflow API at %s not answering the login yet (%s); trying again in %.0f s", base_url, why,
                     delay)
            time.sleep(delay)
            delay = min(delay * 2, 15.0)
        if r.status_code not in (200, 201):
            raise RuntimeError(f"Airflow API login as {username!r} at {base_url} failed: HTTP {r.status_code}")
        return cls(base_url, r.json()["access_token"])

    @classmethod
    def from_connection(cls, conn_id: str = DEFAULT_API_CONN_ID) -> AirflowPools:
        from airflow.sdk import BaseHook

        conn = BaseHook.get_connection(conn_id)
        base = f"{conn.schema or 'http'}://{conn.host}" + (f":{conn.port}" if conn.port else "")
        if conn.login:
            return cls.login(base, conn.login, conn.password or "")
        return cls(base)

    def _call(self, method: str, path: str, body: dict | None = None, *, ok: tuple[int, ...] = ()) -> dict | None:
        r = send_retrying_database_errors(lambda: self.http.request(method, path, json=body))
        if r.status_code in ok:
            return None
        if r.status_code >= 300:
            raise RuntimeError(f"Airflow API {method} {path}: HTTP {r.status_code} {r.text[:300]}")
        return r.json() if r.content else {}

    def live(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        offset = 0
        while True:
            page = self._call("GET", f"/api/v2/pools?limit=100&offset={offset}")
            for pool in page.get("pools", []):
                out[pool["name"]] = {k: pool.get(k) for k in ("slots", "description", "include_deferred")}
            offset += 100
            if offset >= page.get("total_entries", 0):
                return out

    def sync(self, desired: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
        plan = plan_pools(desired, self.live())
        for name, want in plan.create.items():
            # 409: another writer (the platform_sync DAG beside `make demo`, or a retried POST whose first try
            # committed) created it after our read: level-triggered, so converge it with a PATCH instead
            if self._call("POST", "/api/v2/pools", {"name": name, **want}, ok=(409,)) is None:
                self._call("PATCH", f"/api/v2/pools/{name}", {"name": name, **want})
        for name, want in plan.update.items():
            self._call("PATCH", f"/api/v2/pools/{name}", {"name": name, **want})
        return {"created": sorted(plan.create), "updated": sorted(plan.update), "unchanged": plan.unchanged,
                "orphaned": plan.orphaned}
