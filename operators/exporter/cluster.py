"""Cluster-state gauges per team, computed from plain object lists (pure: no I/O, tested on dicts).

Input: what ``endpoint`` lists cluster-wide, one request per kind: the teams' ResourceQuotas
(``skiff-quota``), Skiff's training Jobs, development-instance StatefulSets and the Sedna CRs. Output: the
samples of ``catalogue``'s gauges. A team's label is its namespace (the name the cluster knows).

* GPU/CPU/memory requested and allowed: the quota's ``status.used`` and ``status.hard`` (what the quota
  controller counts, so the numbers are Kubernetes' own, the same ``kubectl describe quota`` shows);
* training Jobs not finished: ``running`` when a pod is ready (``status.ready``), else ``queued``
  (suspended by Kueue, pods pending, refused by the quota);
* instances: ``stopped`` (scaled to 0), ``running`` (a ready replica), else ``starting``. Idle ones are
  not a state here: telling idle from busy costs one request per instance (the culler's read), so the
  culler's stops are counted instead (``skiff_instances_culled_total``);
* Sedna CRs by ``status.phase`` (FederatedLearningJob), else by their Failed/Running conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from operators.core.nodepools import GPU_RESOURCE
from operators.core.quantity import parse_quantity
from operators.metrics import catalogue as c
from operators.training.failure import job_state


@dataclass(frozen=True)
class Sample:
    metric: c.Metric
    labels: tuple[tuple[str, str], ...]
    value: float


def _ns(obj: Mapping) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def _amount(values: Mapping, *keys: str) -> float | None:
    for key in keys:
        if key in values:
            try:
                return float(parse_quantity(values[key]))
            except (ValueError, ArithmeticError):
                return None
    return None


def quota_samples(quotas: Iterable[Mapping], gpu_resource: str = GPU_RESOURCE) -> list[Sample]:
    out = []
    pairs = ((c.TEAM_GPU_REQUESTS, c.TEAM_GPU_QUOTA, (f"requests.{gpu_resource}",)),
             (c.TEAM_CPU_REQUESTS, c.TEAM_CPU_QUOTA, ("requests.cpu", "cpu")),
             (c.TEAM_MEMORY_REQUESTS, c.TEAM_MEMORY_QUOTA, ("requests.memory", "memory")))
    for q in quotas:
        status, team = q.get("status") or {}, (("team", _ns(q)),)
        for used_metric, hard_metric, keys in pairs:
            hard = _amount(status.get("hard") or {}, *keys)
            if hard is None:  # the quota does not limit it: no quota, no "at quota"
                continue
            out.append(Sample(hard_metric, team, hard))
            out.append(Sample(used_metric, team, _amount(status.get("used") or {}, *keys) or 0.0))
    return out


def _count(metric: c.Metric, states: tuple[str, ...], teams: Iterable[str], found: Mapping) -> list[Sample]:
    return [Sample(metric, (("team", t), ("state", s)), found.get((t, s), 0)) for t in sorted(teams) for s in states]


def training_samples(jobs: Iterable[Mapping], teams: set[str]) -> list[Sample]:
    found: dict[tuple[str, str], int] = {}
    for job in jobs:
        if job_state(dict(job)) != "active":
            continue
        state = "running" if ((job.get("status") or {}).get("ready") or 0) > 0 else "queued"
        found[(_ns(job), state)] = found.get((_ns(job), state), 0) + 1
    return _count(c.TRAINING_JOBS, c.TRAINING_STATES, teams | {t for t, _ in found}, found)


def instance_samples(statefulsets: Iterable[Mapping], teams: set[str]) -> list[Sample]:
    found: dict[tuple[str, str], int] = {}
    for sts in statefulsets:
        if not ((sts.get("spec") or {}).get("replicas") or 0):
            state = "stopped"
        else:
            state = "running" if ((sts.get("status") or {}).get("readyReplicas") or 0) > 0 else "starting"
        found[(_ns(sts), state)] = found.get((_ns(sts), state), 0) + 1
    return _count(c.INSTANCES, c.INSTANCE_STATES, teams | {t for t, _ in found}, found)


def sedna_phase(cr: Mapping) -> str:
    status = cr.get("status") or {}
    if status.get("phase"):
        return str(status["phase"])
    true = {x.get("type") for x in status.get("conditions") or [] if str(x.get("status")) == "True"}
    return "Failed" if "Failed" in true else "Running" if "Running" in true else "Pending"


def sedna_samples(crs_by_kind: Mapping[str, Iterable[Mapping]]) -> list[Sample]:
    found: dict[tuple[str, str, str], int] = {}
    for kind, crs in crs_by_kind.items():
        for cr in crs:
            key = (_ns(cr), kind, sedna_phase(cr))
            found[key] = found.get(key, 0) + 1
    return [Sample(c.SEDNA_CRS, (("team", t), ("kind", k), ("phase", p)), n) for (t, k, p), n in sorted(found.items())]


def gauges(quotas: list[Mapping], jobs: list[Mapping], statefulsets: list[Mapping],
           crs_by_kind: Mapping[str, list[Mapping]], gpu_resource: str = GPU_RESOURCE) -> list[Sample]:
    """Every cluster-state sample; every team with a quota gets its training and instance counts (zeros
    included), so a dashboard shows "0 queued" rather than no line."""
    teams = {_ns(q) for q in quotas}
    return (quota_samples(quotas, gpu_resource) + training_samples(jobs, teams)
            + instance_samples(statefulsets, teams) + sedna_samples(crs_by_kind))
