"""The plugin's FastAPI app, mounted by the api-server at ``/skiff`` (under ``[api] base_url``'s path).

``GET /`` is the page alone (the Airflow UI renders the same module as a React app, ``plugin``), ``/static/*`` its script and styles, ``/api/*``
the JSON the page polls. Every route depends on ``auth.current_user``; routes that change something are POSTs
with a JSON body (``auth.json_body_only``). The page uses relative URLs only, so a sub-path base URL works.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from operators.auth import Caller, CallerDep, json_body_only, may_trigger
from operators.core.checks import short_repr
from operators.ui import actions, heap, instances, sources, views, warmup

STATIC = files("operators.ui") / "static"
# the allow-list of /static/*: the entry module (skiff.js, the react_app's bundle_url), the modules it imports by
# relative URL (shared helpers, one per card, the words), the styles and the icon; any other name is a 404
MODULES = ("skiff.js", "skiff-common.js", "skiff-quota.js", "skiff-usage.js", "skiff-instances.js", "skiff-training.js",
           "skiff-sedna.js", "skiff-i18n.js")
ASSETS = {**{m: "text/javascript" for m in MODULES}, "skiff.css": "text/css", "skiff.svg": "image/svg+xml"}
NO_STORE = {"Cache-Control": "no-store"}
log = logging.getLogger("skiff.ui")


def readable_dag_ids(caller: Caller) -> set[str] | None:
    """DAGs whose task instances the caller may read (Airflow's answer); ``None`` = every DAG."""
    from airflow.api_fastapi.app import get_auth_manager

    if caller.admin:
        return None
    return set(get_auth_manager().get_authorized_dag_ids(user=caller.user, method="GET"))


async def _off_loop(fn, *args):
    """Blocking reads (cluster, metadata DB) run in a worker thread so the api-server's loop stays free."""
    return await asyncio.to_thread(fn, *args)


@asynccontextmanager
async def lifespan(_: FastAPI):
    """At the api-server's start-up (Airflow enters each mounted app's lifespan once every plugin is mounted, in
    each worker process, before uvicorn listens): the Execution API is built (``warmup``: else the first task's
    call builds it on the event loop and every request waits), then the loaded heap, that included, leaves the
    collected generations (``heap``)."""
    try:
        await warmup.warm_execution_api()
    except Exception:  # the first task's call builds it then, as without the warm-up; the api-server still starts
        log.warning("could not build the Execution API before serving", exc_info=True)
    heap.freeze()
    heap.watch_pauses()  # after the freeze's own full collection: from here on, what a request waits for
    yield


def create_app() -> FastAPI:
    app = FastAPI(title="Skiff", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    @app.get("/", response_class=HTMLResponse)
    async def page(_: CallerDep) -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text(), headers=NO_STORE)

    @app.get("/static/{name}")
    async def asset(name: str, _: CallerDep) -> Response:
        if name not in ASSETS:
            raise HTTPException(404, f"no asset {short_repr(name)}")
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name])

    @app.get("/api/me")
    async def me(caller: CallerDep) -> dict:
        from airflow.api_fastapi.app import API_ROOT_PATH

        teams = await _off_loop(instances.teams_of, caller)
        paused = await _off_loop(actions.paused, instances.LIFECYCLE_DAGS.values())
        # may_trigger reads the metadata DB (the DAG's team): never on the api-server's event loop, which every
        # request of this worker shares (Airflow's own trigger included, which the page's create calls)
        allowed = await _off_loop(lambda: {a: may_trigger(caller, dag) for a, dag in instances.LIFECYCLE_DAGS.items()})
        return {"user": caller.name, "admin": caller.admin, "teams": teams, "ui_root": API_ROOT_PATH,
                "may_trigger": allowed, "paused": sorted(paused)}

    @app.get("/api/quota")
    async def quota(caller: CallerDep) -> dict:
        teams = None if caller.admin else await _off_loop(instances.teams_of, caller)
        return {"teams": await _off_loop(sources.quotas, sources.kube(), teams),
                "queues": await _off_loop(sources.queues, sources.kube(), teams)}

    @app.get("/api/usage")
    async def usage(caller: CallerDep) -> dict:
        return await _off_loop(instances.gpu_hours, caller)

    @app.get("/api/training")
    async def training(caller: CallerDep, scope: str = "teams") -> dict:
        """The caller's teams' training by default; ``scope=all``: every DAG Airflow lets them read (Airflow's
        rule, wider: the simple auth manager lets every user read every DAG)."""
        if scope not in ("teams", "all"):
            raise HTTPException(400, f"scope={short_repr(scope)}: expected 'teams' or 'all'")
        dag_ids = await _off_loop(readable_dag_ids, caller)
        rows = await _off_loop(sources.training, sources.kube(), dag_ids)
        teams = None if caller.admin else await _off_loop(instances.teams_of, caller)
        mine, others = views.split_by_team(rows, teams)
        return {"tasks": mine if scope == "teams" else rows, "scope": scope, "teams": teams,
                "other_teams": len(others)}

    @app.get("/api/sedna")
    async def sedna(_: CallerDep) -> dict:
        return await _off_loop(sources.sedna, sources.kube())

    @app.get("/api/instances")
    async def list_instances(caller: CallerDep) -> dict:
        return {"instances": await _off_loop(instances.visible_instances, caller),
                "now": datetime.now(UTC).isoformat()}

    @app.get("/api/instances/options")
    async def options(caller: CallerDep) -> dict:
        return await _off_loop(instances.form_options, caller)

    @app.post("/api/instances", status_code=202, dependencies=[Depends(json_body_only)])
    async def create(request: Request, caller: CallerDep) -> dict:
        body = await _json_object(request)
        conf = await _off_loop(instances.create_conf, caller, body)  # 400 naming the field, nothing triggered
        return await instances.trigger(request, caller, "create", conf)

    @app.post("/api/instances/{team}/{name}/{action}", status_code=202, dependencies=[Depends(json_body_only)])
    async def act(team: str, name: str, action: str, request: Request, caller: CallerDep) -> dict:
        await _json_object(request)
        if action not in ("stop", "start", "delete"):
            raise HTTPException(404, f"action: {short_repr(action)} is not one of stop, start, delete")
        conf = await _off_loop(instances.action_conf, caller, team, name)  # 404 unless the caller may see it
        return await instances.trigger(request, caller, action, conf)

    @app.get("/api/instances/{team}/{name}/password")
    async def password(team: str, name: str, caller: CallerDep) -> JSONResponse:
        secret = await _off_loop(instances.password, caller, team, name)
        return JSONResponse({"team": team, "name": name, **secret}, headers=NO_STORE)

    return app


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as exc:
        raise HTTPException(400, f"body: not JSON ({exc})") from exc
    if not isinstance(body, dict):
        raise HTTPException(400, f"body: expected a JSON object, got {type(body).__name__}")
    return body
