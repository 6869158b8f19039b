"""Airflow's authentication and authorization for Skiff's HTTP endpoints: the page's (``operators.ui``) and the
metrics endpoint's (``operators.exporter``), below both.

A plugin's FastAPI app gets none by default: the api-server mounts it as is. Every route here depends on
``current_user``, which is Airflow's own ``get_user`` (the ``Authorization: Bearer`` token, else the ``_token``
cookie the UI sets at login; anonymous -> 401, a bad token -> 403). The caller's token is kept so that actions
reach Airflow's REST API *as that user* (``actions``): Airflow, not Skiff, decides who may trigger a DAG.

CSRF: the UI's cookie is ``SameSite=Lax`` and ``HttpOnly``, no route changes state on GET, and a state-changing
route accepts only ``application/json`` bodies, which a cross-site form cannot send without a CORS preflight that
this app never grants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials

ADMIN_ROLES = {"admin"}


@dataclass(frozen=True)
class Caller:
    """The authenticated user behind a request, with the token that proves it."""

    name: str
    token: str
    admin: bool
    user: object  # the auth manager's user, for authorization questions


def is_airflow_admin(user: object) -> bool:
    """Airflow admin: the simple auth manager's ``admin`` role, or FAB's ``Admin`` role."""
    role = getattr(user, "role", None)
    roles = [role] if isinstance(role, str) else [getattr(r, "name", r) for r in getattr(user, "roles", []) or []]
    return any(str(r).lower() in ADMIN_ROLES for r in roles if r)


async def current_user(request: Request) -> Caller:
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    bearer: HTTPAuthorizationCredentials | None = await bearer_scheme(request)
    user = await get_user(request, None, bearer)  # raises 401 (anonymous, expired) / 403 (invalid token)
    token = bearer.credentials if bearer and bearer.scheme.lower() == "bearer" else request.cookies.get(
        COOKIE_NAME_JWT_TOKEN, "")
    return Caller(name=user.get_name(), token=token, admin=is_airflow_admin(user), user=user)


CallerDep = Annotated[Caller, Depends(current_user)]


def may_trigger(caller: Caller, dag_id: str) -> bool:
    """Airflow's answer to "may this user create a run of ``dag_id``" (the UI greys out what it refuses)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.models.dag import DagModel

    details = DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id))
    return get_auth_manager().is_authorized_dag(method="POST", access_entity=DagAccessEntity.RUN,
                                                details=details, user=caller.user)


def json_body_only(request: Request, _: CallerDep) -> None:
    """State-changing routes take JSON only: a cross-site HTML form cannot send it (CSRF). Authentication
    comes first, so an anonymous caller gets 401 whatever it sends."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                            f"content-type must be application/json, got {ctype or 'none'!r}")
