"""Check a request (training step or development instance) against the platform file and the live quota,
before anything is created. Pure: ``check_request`` takes the ``Platform``, the request and the quota's
status, and returns a ``Decision`` or raises ``AdmissionError`` naming what is wrong.

* Never fits (more than the team's quota, or the online pool for a team not allowed it, or a volume the user
  may not mount): ``AdmissionError`` at once, e.g. "team recsys asks 4 GPU, quota 2".
* Fits the quota but not what is free now: ``Decision.wait`` says what it waits for ("2 GPU: 1 of 2 in use
  in team recsys"); the caller queues (Airflow pool ``skiff-<team>``) or waits (``quota_wait``).
* Volumes: the user's own home PVC, the team's shared volumes and volumes shared with the user; a read-only
  grant sets ``readOnly`` on both the volume and the mount whatever was asked (``Decision.volumes``).

``enforce_training`` is the one call ``TrainingJobOperator.execute`` makes; development instances call
``check_request`` with their own ``Request``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal

from operators.core.nodepools import NodePools
from operators.core.quantity import cpu_quantity, gpu_count, human, memory_gi, parse_quantity
from operators.core.volumes import Volume, home_pvc, volumes
from operators.platform.model import QUOTA_NAME, Platform

RULE = "a user mounts their own home PVC, their team's volumes and volumes shared with them"


class AdmissionError(ValueError):
    """The request can never be admitted under the platform file; the message names the field and rule."""


@dataclass(frozen=True)
class Request:
    team: str                     # team name or namespace
    user: str
    cpu: str                      # quantities ("2", "500m"); memory like "4Gi"
    memory: str
    gpu: int = 0
    home: str | None = None       # PVC at /root (None: the user's home PVC)
    volumes: tuple[Volume, ...] = ()
    online: bool = False


@dataclass(frozen=True)
class Decision:
    volumes: tuple[Volume, ...]
    wait: str | None = None       # None: fits what is free now


def _resources(platform: Platform, req: Request) -> list[tuple[str, str, Decimal, bool]]:
    """(label, quota key, amount asked, binary units) for what the request asks."""
    gpu_key = f"requests.{platform.node_pools.gpu_resource}"
    return [("GPU", gpu_key, Decimal(req.gpu), False), ("CPU", "requests.cpu", parse_quantity(req.cpu), False),
            ("memory", "requests.memory", parse_quantity(req.memory), True)]


def _check_volumes(platform: Platform, req: Request, team: str) -> tuple[Volume, ...]:
    home = req.home or home_pvc(req.user)
    if platform.volume_access(req.user, team, home) != "rw":
        owner = next((u for u in platform.users() if home_pvc(u) == home), None)
        why = f"it is {owner}'s home PVC" if owner else f"it is not {req.user}'s home PVC in team {team}"
        raise AdmissionError(f"pvc={home!r}: {req.user} may not mount it at /root: {why} ({RULE})")
    out = []
    for i, vol in enumerate(req.volumes):
        access = platform.volume_access(req.user, team, vol.pvc)
        if access is None:
            raise AdmissionError(f"volumes[{i}].pvc={vol.pvc!r}: {req.user} may not mount it in team {team} ({RULE}; "
                                 f"shared volumes are listed under 'volumes' in {platform.source})")
        out.append(replace(vol, read_only=True) if access == "ro" else vol)
    return tuple(out)


def check_request(platform: Platform, req: Request, quota_status: dict | None) -> Decision:
    """``quota_status``: the live ResourceQuota's ``status`` ({"hard", "used"}), or None if unknown."""
    team = platform.team(req.team)
    if req.user not in team.users:
        raise AdmissionError(f"user {req.user!r} is not a member of team {team.name} in {platform.source}")
    if req.online and not team.allow_online:
        raise AdmissionError(f"online=True: team {team.name} may not use the online pool "
                             f"(allow_online is not set for it in {platform.source})")
    volumes = _check_volumes(platform, req, team.name)
    quota = team.quota.amounts()
    limits = {"GPU": quota["gpu"], "CPU": quota["cpu"], "memory": quota["memory"]}
    for label, _key, ask, binary in _resources(platform, req):
        if ask > limits[label]:
            raise AdmissionError(f"team {team.name} asks {human(ask, binary)} {label}, quota "
                                 f"{human(limits[label], binary)}")
    hard = (quota_status or {}).get("hard") or {}
    used = (quota_status or {}).get("used") or {}
    waits = []
    for label, key, ask, binary in _resources(platform, req):
        if ask and key in hard and key in used:
            cap, now = parse_quantity(hard[key]), parse_quantity(used[key])
            if now + ask > cap:
                waits.append(f"{human(ask, binary)} {label} ({human(now, binary)} of {human(cap, binary)} in use)")
    wait = f"team {team.name} waits for " + ", ".join(waits) if waits else None
    return Decision(volumes=volumes, wait=wait)


def enforced_platform() -> Platform | None:
    """The platform file when one is configured (``[skiff] platform_file``); without one nothing is enforced
    (the packaged example is a demo, not a rule)."""
    from operators import settings
    from operators.platform import load_platform

    return load_platform() if settings.get("platform_file") else None


def _how_it_waits(quota_wait: float | None) -> str:
    if quota_wait is None:
        return "the Job waits at the quota until it fits (quota_wait=None)"
    if quota_wait > 0:
        return f"the Job waits at the quota up to {quota_wait:g} s (quota_wait) for it to fit"
    return ("quota_wait is 0: the task fails if the quota is still in use when the Job's pod is created "
            "(queue in the team's Airflow pool or set quota_wait)")


def enforce_training(op, log) -> NodePools | None:
    """Called by ``TrainingJobOperator.execute`` before anything is created: fail fast, log what it waits
    for, and force read-only mounts the file grants read-only (rewrites ``op.volumes``). Returns the file's
    node pools (GPU and online pool taints for the Job), None when no platform file is enforced."""
    from operators.k8s import Kube, api_client
    from operators.k8s.resource import Resource

    platform = enforced_platform()
    if platform is None:
        return None
    asked = volumes(op.volumes)
    req = Request(team=op.namespace, user=op.owner, cpu=cpu_quantity(op.cpu), memory=memory_gi(op.memory) + "Gi",
                  gpu=gpu_count(op.gpu), home=op.pvc, online=bool(op.online), volumes=asked)
    quota = Kube(api_client(op.kubernetes_conn_id)).get(Resource("v1", "resourcequotas"),
                                                        platform.team(op.namespace).namespace, QUOTA_NAME)
    quota_status = (quota or {}).get("status")
    decision = check_request(platform, req, quota_status)
    if decision.wait:
        log.info("%s; %s", decision.wait, _how_it_waits(op.follow_settings.quota_wait))
    for before, after in zip(asked, decision.volumes, strict=True):
        if after.read_only and not before.read_only:
            log.info("volume %s is shared read-only with %s: mounted read-only", after.pvc, op.owner)
    op.volumes = list(decision.volumes)
    return platform.node_pools

