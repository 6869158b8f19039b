"""The api-server's first Execution API request, made at start-up rather than by the first task.

Airflow's Execution API (mounted at ``/execution``, what every task worker calls) is a Cadwyn app, and Cadwyn
builds its versioned routers on the app's first request, synchronously, on the api-server's event loop
(cadwyn/applications.py, ``Cadwyn.__call__`` -> ``_cadwyn_initialize``; no setting makes it eager). While it
builds, the api-server answers nothing: py-spy on the loaded benchmark (issue 29) showed the loop's thread in
``_cadwyn_initialize`` for 22-24 s after the first task's call, and every request that came meanwhile waited
it out (a health poll 24 s; in earlier runs the demo's ``GET /api/v2/dags/...`` 40.7 s, a ``POST /auth/token``
54 s). The plugin app's lifespan runs before uvicorn listens, so the cost is paid there, where no request waits.
"""

from __future__ import annotations

import logging
import sys
import time

import httpx
from starlette.routing import Mount

log = logging.getLogger("skiff.ui")
EXECUTION_PREFIX = "/execution"  # where airflow.api_fastapi.app.create_app mounts the Execution API


def served_app():
    """The app the api-server serves (uvicorn and gunicorn both load ``airflow.api_fastapi.main:app``), or
    ``None`` in a process that serves none (a test's app)."""
    return getattr(sys.modules.get("airflow.api_fastapi.main"), "app", None)


async def warm_execution_api(root=None) -> int | None:
    """Send ``GET /health`` in-process to ``root``'s Execution API (default: the served app's), so that what it
    builds on its first request is built now. Returns the answer's status, ``None`` when there is no such app."""
    root = served_app() if root is None else root
    for route in getattr(root, "routes", ()):
        if isinstance(route, Mount) and route.path == EXECUTION_PREFIX:
            t0 = time.perf_counter()
            transport = httpx.ASGITransport(app=route.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://api-server") as client:
                status = (await client.get("/health")).status_code
            log.info("Execution API built before serving: %.1f s (GET /health -> %d)",
                     time.perf_counter() - t0, status)
            return status
    return None
