"""Admission: may this request run in this team, and now? A pure decision (no I/O, no Airflow, no operator).

``decide(platform, request, quota_status)`` takes an ``AdmissionRequest`` (a frozen value: team, user, what it
asks), the ``Platform`` and what the caller observed (the team's ResourceQuota ``status``), and returns a
``Decision``, as controller-runtime's ``Reconcile(request)`` returns a ``Result``: it never reaches into its
caller. Each feature observes the quota through ``operators.k8s``, calls it, and applies the decision in its
own package (``operators.training.admission``, ``operators.devinstances.admission``).

* ``refuse``, it can never be admitted: more than the team's quota, the online pool for a team not allowed it, a
  volume the user may not mount, a user not in the team (``reason``: e.g. "team recsys asks 4 GPU, quota 2").
  Features raise ``AdmissionError(reason)``.
* ``wait``, it fits the quota but not what is free now (``reason``: "team recsys waits for 2 GPU (1 of 2 in
  use)"): a training step queues (its Job waits at the quota, ``quota_wait``); an interactive instance is
  refused, saying what is in use.
* ``admit``, it fits now.

Every decision carries the team namespace's enforced Pod Security level (``pod_security``, the platform file's
``pod_security.enforce``): under ``restricted`` a training step runs as a non-root user with no capabilities
(``k8s_templates/training/job.yaml.j2``), and a development instance is refused (its sshd needs ``baseline``).

An admitted or waiting request carries what to apply: ``volumes`` (the user's own home PVC, the team's shared
volumes and volumes shared with the user; a read-only grant sets ``readOnly`` whatever was asked) and
``node_pools`` (the GPU resource and taints, the online pool) for the placement.

With ``queueing: kueue`` Kueue's ClusterQueues decide when a workload runs, and may lend it the cohort's idle
quota: the request is never refused for its size nor made to wait on the ResourceQuota (which keeps storage
and counts only). It is admitted with ``queue_labels`` (``operators.platform.kueue.queue_labels``): the team's
LocalQueue (``skiff`` for training steps, ``skiff-dev`` for development instances) and the priority class -
``skiff-online`` for online steps, else ``skiff-scheduled``, ``skiff-dev`` for instances; a training step may
ask another class (``priority_class``), never ``skiff-online`` in a team without ``allow_online``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal

from operators.core.nodepools import NodePools
from operators.core.quantity import human, parse_quantity
from operators.core.volumes import Volume, home_pvc
from operators.platform import kueue
from operators.platform.model import Platform, PlatformError, Team

RULE = "a user mounts their own home PVC, their team's volumes and volumes shared with them"
ADMIT, WAIT, REFUSE = "admit", "wait", "refuse"


class AdmissionError(ValueError):
    """The request can never be admitted under the platform file; the message names the field and rule."""


@dataclass(frozen=True)
class AdmissionRequest:
    """What a training step or a development instance asks, as plain values (already validated)."""

    team: str                     # team name or namespace
    user: str
    cpu: str                      # quantities ("2", "500m"); memory like "4Gi"
    memory: str
    gpu: int = 0
    home: str | None = None       # PVC at /root (None: the user's home PVC)
    volumes: tuple[Volume, ...] = ()
    online: bool = False          # the online (production) pool
    instance: bool = False        # a development instance (else a training step)
    priority_class: str | None = None  # queueing: kueue: a training step's own choice of WorkloadPriorityClass
    workers: int = 1              # pods of a training step, each asking cpu/memory/gpu: all N or none


@dataclass(frozen=True)
class Decision:
    verdict: str                              # ADMIT, WAIT or REFUSE
    reason: str | None = None                 # WAIT: what it waits for; REFUSE: why never
    volumes: tuple[Volume, ...] = ()          # the mounts to apply (read-only where granted read-only)
    node_pools: NodePools = NodePools()       # where it is placed (GPU resource and taints, online pool)
    waiting_for: tuple[str, ...] = ()         # WAIT: the request's fields short of quota ("gpu", "cpu", "memory")
    queue_labels: tuple[tuple[str, str], ...] = ()  # queueing: kueue: Kueue's queue-name and priority-class
    pod_security: str = "baseline"            # the team namespace's enforced Pod Security level

    @property
    def restricted(self) -> bool:
        """The namespace enforces Pod Security ``restricted``: the pod must run as non-root, without
        capabilities, privilege escalation or an unconfined seccomp profile."""
        return self.pod_security == "restricted"

    @property
    def queued(self) -> bool:
        """Kueue admits it: created with ``queue_labels`` (a Job suspended), it runs when Kueue says."""
        return bool(self.queue_labels)

    @property
    def refused(self) -> bool:
        return self.verdict == REFUSE

    @property
    def waits(self) -> bool:
        return self.verdict == WAIT


def _refuse(reason: str) -> Decision:
    return Decision(REFUSE, reason)


def _asks(platform: Platform, req: AdmissionRequest) -> list[tuple[str, str, Decimal, bool]]:
    """(label, quota key, amount asked, binary units) for what the request asks: a gang's N pods together."""
    gpu_key = f"requests.{platform.node_pools.gpu_resource}"
    n = Decimal(req.workers)
    return [("GPU", gpu_key, n * Decimal(req.gpu), False), ("CPU", "requests.cpu", n * parse_quantity(req.cpu), False),
            ("memory", "requests.memory", n * parse_quantity(req.memory), True)]


def _asked(req: AdmissionRequest, ask: Decimal, binary: bool, label: str) -> str:
    """The amount asked, as the sum of the gang's pods when there are several: "8 CPU (4 workers x 2 CPU)"."""
    if req.workers == 1:
        return f"{human(ask, binary)} {label}"
    return f"{human(ask, binary)} {label} ({req.workers} workers x {human(ask / req.workers, binary)} {label})"


def _volume_refusal(platform: Platform, req: AdmissionRequest, team: str) -> str | None:
    home = req.home or home_pvc(req.user)
    if platform.volume_access(req.user, team, home) != "rw":
        owner = next((u for u in platform.users() if home_pvc(u) == home), None)
        why = f"it is {owner}'s home PVC" if owner else f"it is not {req.user}'s home PVC in team {team}"
        return f"pvc={home!r}: {req.user} may not mount it at /root: {why} ({RULE})"
    for i, vol in enumerate(req.volumes):
        if platform.volume_access(req.user, team, vol.pvc) is None:
            return (f"volumes[{i}].pvc={vol.pvc!r}: {req.user} may not mount it in team {team} ({RULE}; "
                    f"shared volumes are listed under 'volumes' in {platform.source})")
    return None


def _granted(platform: Platform, req: AdmissionRequest, team: str) -> tuple[Volume, ...]:
    """The asked volumes, read-only where the file grants the user read-only access."""
    return tuple(replace(v, read_only=True) if platform.volume_access(req.user, team, v.pvc) == "ro" else v
                 for v in req.volumes)


def _refusal(platform: Platform, req: AdmissionRequest, team: Team) -> str | None:
    if req.user not in team.users:
        return f"user {req.user!r} is not a member of team {team.name} in {platform.source}"
    if req.instance and team.pod_security.enforce == "restricted":
        return (f"team {team.name} enforces Pod Security 'restricted' (pod_security.enforce in {platform.source}): "
                "a development instance runs sshd and chpasswd as root, which needs 'baseline'")
    if req.online and not team.allow_online:
        return (f"online=True: team {team.name} may not use the online pool "
                f"(allow_online is not set for it in {platform.source})")
    refused = _volume_refusal(platform, req, team.name)
    if refused:
        return refused
    if platform.queueing == "kueue":
        return None          # Kueue's ClusterQueues decide, and may lend idle quota beyond the team's own
    quota = team.quota.amounts()
    limits = {"GPU": quota["gpu"], "CPU": quota["cpu"], "memory": quota["memory"]}
    for label, _key, ask, binary in _asks(platform, req):
        if ask > limits[label]:
            return f"team {team.name} asks {_asked(req, ask, binary, label)}, quota {human(limits[label], binary)}"
    return None


def _waits_for(platform: Platform, req: AdmissionRequest, team: Team,
               quota_status: dict | None) -> tuple[str | None, tuple[str, ...]]:
    """(the reason, the request's fields short of quota)."""
    hard = (quota_status or {}).get("hard") or {}
    used = (quota_status or {}).get("used") or {}
    waits, fields = [], []
    for label, key, ask, binary in _asks(platform, req):
        if ask and key in hard and key in used:
            cap, now = parse_quantity(hard[key]), parse_quantity(used[key])
            if now + ask > cap:
                waits.append(f"{_asked(req, ask, binary, label)} ({human(now, binary)} of {human(cap, binary)} in use)")
                fields.append(label.lower())
    return (f"team {team.name} waits for " + ", ".join(waits) if waits else None), tuple(fields)


def _priority(req: AdmissionRequest, team: Team) -> tuple[str | None, str | None]:
    """(priority class, refusal) of a queued workload."""
    if req.instance:
        return kueue.DEV, None
    chosen = req.priority_class or kueue.priority_class(req.online)
    if chosen not in kueue.PRIORITY_NAMES:
        return None, f"priority_class={chosen!r}: not one of Skiff's priority classes {', '.join(kueue.PRIORITY_NAMES)}"
    if chosen == kueue.ONLINE and not team.allow_online:
        return None, (f"priority_class={chosen!r}: team {team.name} may not use the online priority "
                      "(allow_online is not set for it in the platform file)")
    return chosen, None


def decide(platform: Platform, req: AdmissionRequest, quota_status: dict | None) -> Decision:
    """``quota_status``: the team's live ResourceQuota ``status`` ({"hard", "used"}), None if unknown (then
    nothing is waited for: the API server's quota admission still has the last word)."""
    try:
        team = platform.team(req.team)
    except PlatformError as exc:
        return _refuse(str(exc))
    refused = _refusal(platform, req, team)
    if refused:
        return _refuse(refused)
    if platform.queueing == "kueue":
        priority, refused = _priority(req, team)
        if refused:
            return _refuse(refused)
        return Decision(ADMIT, None, _granted(platform, req, team.name), platform.node_pools,
                        queue_labels=kueue.queue_labels(req.instance, priority),
                        pod_security=team.pod_security.enforce)
    waits, fields = _waits_for(platform, req, team, quota_status)
    return Decision(WAIT if waits else ADMIT, waits, _granted(platform, req, team.name), platform.node_pools, fields,
                    pod_security=team.pod_security.enforce)


def enforced_platform() -> Platform | None:
    """The platform file when one is configured (``[skiff] platform_file``); without one nothing is enforced
    (the packaged example is a demo, not a rule)."""
    from operators import settings
    from operators.platform import load_platform

    return load_platform() if settings.get("platform_file") else None
