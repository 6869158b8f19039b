"""Development instances and the platform file as the page sees them, for one caller.

Visibility and actions: a user sees and acts on their own instances, a team admin (role ``admin`` in the platform
file) also on the team's, an Airflow admin on every one (the lifecycle DAGs' own rule, ``operators.devinstances
.owners``). A password is its owner's only (``password``, through
``operators.devinstances.inventory.password``). Actions never touch the cluster from here: they are runs of the
lifecycle DAGs triggered as the caller (``actions``), after the checks the create DAG itself makes
(``request_from_params``) plus the team's free quota and the per-user limit, so bad input is a 400 naming the
field and nothing is triggered.

Listing is one StatefulSet list and one pod list for everybody (not one per owner); the idle time, which costs a
service-proxy call per running instance, comes from ``idle_times`` (read in the background, not by the request).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import HTTPException, Request

from operators.auth import Caller, may_trigger
from operators.core.checks import bounded, short_repr
from operators.devinstances.spec import MAX_EXTRA_PORTS
from operators.ui import actions, idle_times, sources, views
from operators.ui.actions import LIFECYCLE_DAGS
from operators.ui.views import free_quota

SELECTOR = "app.kubernetes.io/managed-by=skiff,skiff.io/kind=dev-instance"


def _platform():
    from operators.platform import load_platform

    return load_platform()


def teams_of(caller: Caller) -> list[str]:
    """Namespaces of the caller's teams (every team for an Airflow admin)."""
    platform = _platform()
    return [t.namespace for t in (platform.teams if caller.admin else platform.teams_of(caller.name))]


def admin_teams(caller: Caller, platform=None) -> set[str]:
    """Namespaces where the caller sees everyone's instances."""
    platform = platform or _platform()
    if caller.admin:
        return {t.namespace for t in platform.teams}
    return {t.namespace for t in platform.teams_of(caller.name) if caller.name in t.admins}


def gpu_hours(caller: Caller) -> dict:
    """GPU-hours per user of the caller's teams (every team for an Airflow admin) from the last usage report
    (the platform's ``usage_report`` DAG writes it)."""
    from operators.platform.usage import read_report

    platform = _platform()
    teams = None if caller.admin else {t.name for t in platform.teams_of(caller.name)}
    return views.gpu_hours_by_user(read_report(), teams)


def _visible(caller: Caller, sts: dict, admin_of: set[str]) -> bool:
    from operators.devinstances import naming

    owner = (sts["metadata"].get("annotations") or {}).get(naming.ANN_OWNER)
    return owner == caller.name or sts["metadata"]["namespace"] in admin_of


def visible_instances(caller: Caller) -> list[dict]:
    from operators.devinstances.settings import Settings
    from operators.devinstances.view import RUNNING, view

    k = sources.kube()
    admin_of = admin_teams(caller)
    stss = [s for s in sources.list_all(k, "apps/v1", "statefulsets", labels=SELECTOR)
            if _visible(caller, s, admin_of)]
    if not stss:
        return []
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"].rsplit("-", 1)[0]): p
            for p in sources.list_all(k, "v1", "pods", labels=SELECTOR)}
    host, now = Settings.from_config().host, datetime.now(UTC)
    seen = [(sts, view(sts, pods.get(_key(sts)), host, now))
              for sts in sorted(stss, key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"]))]
    idle = idle_times.last_activities(k, [_key(sts) for sts, v in seen if v.state == RUNNING])
    rows, live = [], []
    for sts, first in seen:
        last, why = idle.get(_key(sts), (None, None))
        if last is not None:
            first = view(sts, pods.get(_key(sts)), host, now, last)
        row = first.as_dict()
        row["idle_detail"] = why[:200] if why else None  # why the idle time is not known (the page's tooltip)
        row["team"] = row["namespace"]
        row["mine"] = row["owner"] == caller.name
        row["start_epoch"] = start_epoch(sts)
        rows.append(row)
        live.append((row, pods.get(_key(sts))))
    sources.with_live_usage(k, live)  # CPU and memory now beside what it holds (one metrics request)
    return rows


def _key(sts: dict) -> tuple[str, str]:
    return sts["metadata"]["namespace"], sts["metadata"]["name"]


def form_options(caller: Caller) -> dict:
    """What the New-instance form offers: the catalogue, the caller's teams with their free quota, volumes."""
    platform = _platform()
    teams = [t for t in platform.teams_of(caller.name)]
    quotas = {q["team"]: q for q in sources.quotas(sources.kube(), [t.namespace for t in teams])}
    default = platform.default_image()
    return {
        "images": [{"name": i.name, "gpu": i.gpu, "description": i.description,
                    "default": default is not None and i.name == default.name} for i in platform.images],
        "teams": [{"team": t.namespace, "free": free_quota(quotas.get(t.namespace, {}).get("bars", [])),
                   "volumes": [{"pvc": v.name, "mode": m} for v in platform.volumes
                               if v.team == t.name and (m := platform.volume_access(caller.name, t.name, v.name))]}
                  for t in teams],
        "may_create": may_trigger(caller, LIFECYCLE_DAGS["create"]),
        "max_extra_ports": MAX_EXTRA_PORTS,  # declared once, in operators.devinstances.spec (the DAG's too)
    }


FORM_FIELDS = ("name", "team", "image", "cpu", "memory", "gpu", "mounts", "extra_ports")


def create_conf(caller: Caller, body: dict[str, Any]) -> dict:
    """The create DAG's conf from the form, checked as the DAG checks it plus free quota and the 3-per-user
    limit; a 400 naming the field and the value otherwise, a 409 for a name the caller already has in the team
    (the DAG would find it and change nothing)."""
    from operators.devinstances import admission
    from operators.devinstances.lifecycle import count_instances, read_instance
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings

    unknown = sorted(set(body) - set(FORM_FIELDS))
    if unknown:
        raise HTTPException(400, f"{bounded(unknown[0], 64)}={short_repr(body[unknown[0]])}: not a field of the form "
                                 f"({', '.join(FORM_FIELDS)})")
    try:
        req = request_from_params(_platform(), caller.name, body)
    except (ValueError, PermissionError) as exc:
        raise HTTPException(400, str(exc)) from exc
    k = sources.kube()
    # the platform's one decision (operators.platform.admission), as the create DAG applies it: an instance is
    # interactive, so one that would wait for quota is refused here too, saying what is in use
    decided = admission.decision(k, _platform(), req)
    if decided.refused:  # its reason names the field ("pvc=...: ...")
        raise HTTPException(400, decided.reason)
    if decided.waits:
        field = decided.waiting_for[0]
        raise HTTPException(400, f"{field}={short_repr(body.get(field))}: {decided.reason}")
    settings = Settings.from_config()
    existing = count_instances(k, caller.name)
    if read_instance(k, caller.name, req.namespace, req.name) is not None:  # the DAG would change nothing
        raise HTTPException(409, f"name={req.name!r}: you already have an instance with this name in team "
                                 f"{req.namespace!r}; start it from its row, or choose another name")
    if len(existing) >= settings.max_per_owner:
        raise HTTPException(400, f"name={req.name!r}: {caller.name} already has {len(existing)} instances "
                                 f"({', '.join(existing)}), the most allowed is {settings.max_per_owner}")
    return {f: body[f] for f in FORM_FIELDS if f in body}


def _find(caller: Caller, team: str, name: str) -> dict:
    row = next((r for r in visible_instances(caller) if r["team"] == team and r["name"] == name), None)
    if row is None:
        # path parameters are the caller's text: echoed cut to 80 characters with their size (issue 30, class 7)
        raise HTTPException(404, f"name={short_repr(name)}: no instance of yours with this name in team "
                                 f"{short_repr(team)}")
    return row


def action_conf(caller: Caller, team: str, name: str) -> dict:
    """The lifecycle DAG's conf for an instance the caller may act on: every one they see (their own, their
    teams' as a team admin, any as an Airflow admin: the DAGs' owner rule, ``operators.devinstances.owners``)."""
    row = _find(caller, team, name)  # 404 unless visible, and visible is what the caller may act on
    if row["owner"] == caller.name:
        return {"name": name, "team": team}
    return {"name": name, "team": team, "owner": row["owner"]}


def start_epoch(sts: dict) -> str:
    """Which start a revealed password belongs to (issue 37 item 9): the StatefulSet's last start and its
    generation, which every stop and start bumps (they scale it). The page keeps a revealed password with its
    epoch and shows it only while the listing says the same epoch and Running, so a password read before a
    stop, or before a start that made a new one, is never shown after it, however the page's polls interleave
    with the clicks (the card showed the old password after Start in 1 of 2 runs)."""
    from operators.devinstances import naming

    meta = sts["metadata"]
    return f"{(meta.get('annotations') or {}).get(naming.ANN_STARTED) or ''}#{meta.get('generation') or 0}"


def password(caller: Caller, team: str, name: str) -> dict:
    """The owner's password and its epoch: nobody else's, admins included (it is shown only to its owner). A
    stopped (or stopping) instance has none to show: its Secret is the last start's, and the next start
    replaces it (409)."""
    from operators.devinstances import inventory
    from operators.devinstances.lifecycle import InstanceError
    from operators.devinstances.view import STOPPED, STOPPING

    row = _find(caller, team, name)
    if row["owner"] == caller.name and row["state"] in (STOPPED, STOPPING):
        raise HTTPException(409, f"instance {short_repr(name)} is {row['state'].lower()}: it has a new password "
                                 "once started")
    try:
        secret = inventory.password(sources.kube(), row["owner"], team, name, caller=caller.name)
        return {"password": secret, "start_epoch": row["start_epoch"]}
    except PermissionError as exc:
        raise HTTPException(403, str(exc)) from exc
    except InstanceError as exc:
        raise HTTPException(404, str(exc)) from exc


async def trigger(request: Request, caller: Caller, action: str, conf: dict) -> dict:
    return await actions.trigger_as_user(request, caller.token, LIFECYCLE_DAGS[action], conf)
