"""Lifecycle actions as the user: a run of ``dev_instance_<action>`` created through Airflow's REST API with the
caller's own token, so Airflow's authorization applies and the run's ``triggering_user_name`` is the caller
(the lifecycle DAGs take the owner from it; see ``operators.devinstances``).

The API is the api-server serving this request, reached at the address the request came in on (or
``[skiff] airflow_api_url`` when a proxy or TLS set-up needs another one).
"""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import HTTPException, Request

LIFECYCLE_DAGS = {action: f"dev_instance_{action}" for action in ("create", "stop", "start", "delete")}


def airflow_api_url(request: Request) -> str:
    from airflow.api_fastapi.app import API_ROOT_PATH

    from operators import settings

    configured = settings.get("airflow_api_url")
    if configured:
        return configured.rstrip("/")
    host, port = request.scope.get("server") or (request.url.hostname, request.url.port)
    host = f"[{host}]" if ":" in str(host) else host
    return f"{request.url.scheme}://{host}:{port}{API_ROOT_PATH.rstrip('/')}"


def paused(dag_ids) -> set[str]:
    """Which of ``dag_ids`` are paused or not parsed yet: a run triggered there would wait forever."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        active = set(session.scalars(select(DagModel.dag_id).where(
            DagModel.dag_id.in_(list(dag_ids)), DagModel.is_paused.is_(False), DagModel.is_stale.is_(False))))
    return set(dag_ids) - active


async def trigger_as_user(request: Request, token: str, dag_id: str, conf: dict[str, Any]) -> dict:
    """POST /api/v2/dags/{dag_id}/dagRuns as the caller; Airflow's refusals come back with their status, and a
    paused DAG is a 409 here instead of a run that never starts."""
    import asyncio

    if await asyncio.to_thread(paused, [dag_id]):
        raise HTTPException(409, f"{dag_id} is paused (or not deployed): an Airflow admin must unpause it")
    url = f"{airflow_api_url(request)}/api/v2/dags/{dag_id}/dagRuns"
    async with httpx.AsyncClient(timeout=30) as client:
        r = await client.post(url, json={"logical_date": None, "conf": conf},
                              headers={"Authorization": f"Bearer {token}"})
    if r.status_code >= 400:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        raise HTTPException(r.status_code, f"Airflow refused to trigger {dag_id}: {detail}")
    run = r.json()
    return {"dag_id": dag_id, "dag_run_id": run.get("dag_run_id"), "state": run.get("state")}
