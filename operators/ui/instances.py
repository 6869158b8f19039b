"""Development instances and the platform file as the page sees them, for one caller.

Visibility: a user sees their own instances; a team admin (role ``admin`` in the platform file) also sees the
team's; an Airflow admin sees all. Passwords are their owner's only (``password``). Actions never touch the
cluster from here: they are runs of the lifecycle DAGs triggered as the caller (``actions``), after the same
checks the DAG makes (``operators.devinstances``), so bad input is a 400 naming the field and nothing runs.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request

from operators.ui import actions, sources
from operators.ui.actions import LIFECYCLE_DAGS
from operators.ui.auth import Caller, may_trigger

__all__ = ["LIFECYCLE_DAGS", "teams_of", "admin_teams", "gpu_hours", "visible_instances", "form_options",
           "create_conf", "action_conf", "password", "trigger"]


def _platform():
    from operators.platform import load_platform

    return load_platform()


def teams_of(caller: Caller) -> list[str]:
    """Namespaces of the caller's teams (every team for an Airflow admin)."""
    platform = _platform()
    teams = platform.teams if caller.admin else platform.teams_of(caller.name)
    return [t.namespace for t in teams]


def admin_teams(caller: Caller) -> set[str]:
    """Namespaces where the caller may see and act on everyone's instances."""
    platform = _platform()
    if caller.admin:
        return {t.namespace for t in platform.teams}
    return {t.namespace for t in platform.teams_of(caller.name)
            if any(m.user == caller.name and m.role == "admin" for m in t.members)}


def gpu_hours(caller: Caller) -> dict:
    """GPU-hours per user over the last 30 days, from the platform's usage report (caller's teams)."""
    from operators.platform import usage

    report = usage.load_report()
    teams = set(teams_of(caller))
    return usage.gpu_hours_by_user(report, teams=None if caller.admin else teams, days=30)


def visible_instances(caller: Caller) -> list[dict]:
    from operators import devinstances

    admin_of = admin_teams(caller)
    rows = devinstances.list_instances(sources.kube_client(), namespaces=teams_of(caller))
    return [r for r in rows if r["owner"] == caller.name or r["team"] in admin_of]


def form_options(caller: Caller) -> dict:
    """What the New-instance form may offer: the catalogue, the caller's teams with free quota, volumes."""
    platform = _platform()
    teams = teams_of(caller)
    quotas = {q["team"]: q for q in sources.quotas(sources.kube(), teams)}
    from operators.ui.views import free_quota

    return {
        "images": [{"name": i.name, "gpu": i.gpu, "description": i.description, "default": i.default}
                   for i in platform.images],
        "teams": [{"team": t, "free": free_quota(quotas.get(t, {}).get("bars", [])),
                   "volumes": _volumes(platform, caller.name, t)} for t in teams],
        "may_create": may_trigger(caller, LIFECYCLE_DAGS["create"]),
    }


def _volumes(platform, user: str, team: str) -> list[dict]:
    out = []
    for v in platform.volumes:
        try:
            mode = platform.volume_access(user, team, v.name) if platform.team(v.team).namespace == team else None
        except Exception:  # noqa: BLE001 - a volume of a team the caller is not in
            mode = None
        if mode:
            out.append({"pvc": v.name, "mode": mode})
    return out


def create_conf(caller: Caller, body: dict[str, Any]) -> dict:
    from operators import devinstances

    try:
        return devinstances.create_conf_for_ui(caller.name, body)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from exc


def action_conf(caller: Caller, team: str, name: str) -> dict:
    row = next((r for r in visible_instances(caller) if r["team"] == team and r["name"] == name), None)
    if row is None:
        raise HTTPException(404, f"no instance {name!r} of yours in team {team!r}")
    return {"name": name, "team": team, "owner": row["owner"]}


def password(caller: Caller, team: str, name: str) -> str:
    from operators import devinstances

    try:
        return devinstances.read_password(sources.kube_client(), team=team, name=name, owner=caller.name)
    except LookupError as exc:
        raise HTTPException(404, str(exc)) from exc


async def trigger(request: Request, caller: Caller, action: str, conf: dict) -> dict:
    return await actions.trigger_as_user(request, caller.token, LIFECYCLE_DAGS[action], conf)
