"""What the cluster and Airflow should hold for a platform file (pure: ``Platform`` in, manifests out).

Every object carries ``app.kubernetes.io/managed-by: skiff`` and ``skiff.io/team`` labels (how the sync finds
what it manages, and what became orphaned) and a ``skiff.io/applied-hash`` annotation: a hash of the object as
rendered, so the sync can tell "unchanged since the last apply" without a write, and still re-applies when the
file dropped a field (server-side apply then removes it) or someone changed a value by hand.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from operators.platform import kueue
from operators.platform.model import Platform, Team, home_pvc
from operators.templating import render

MANAGED_BY = {"app.kubernetes.io/managed-by": "skiff"}
LABEL_TEAM = "skiff.io/team"
LABEL_VOLUME = "skiff.io/volume"        # home | shared
ANNOTATION_HASH = "skiff.io/applied-hash"
ANNOTATION_OWNER = "skiff.io/owner"


@dataclass(frozen=True)
class TeamObjects:
    """One team's objects in apply order: the namespace and quota first (the PVCs need the quota's status)."""

    team: str
    namespace: str
    setup: tuple[dict, ...]        # Namespace, ResourceQuota
    rest: tuple[dict, ...]         # LimitRange, ServiceAccount, RoleBindings
    volumes: tuple[dict, ...]      # PVCs: members' home PVCs and the team's shared volumes


def quota_hard(platform: Platform, team: Team) -> dict[str, str]:
    """The ResourceQuota's ``spec.hard`` for a team (SPEC §3: requests and limits for cpu/memory)."""
    q = team.quota
    hard = {"limits.cpu": q.cpu, "requests.cpu": q.cpu, "limits.memory": q.memory, "requests.memory": q.memory,
            f"requests.{platform.node_pools.gpu_resource}": q.gpu, "requests.storage": q.storage}
    if platform.queueing == "kueue":  # Kueue's ClusterQueues decide (and may lend); the API server caps at the
        # team's ceiling (nominal + what it may borrow): a pod without Kueue's queue label is not Kueue's to stop
        most = kueue.ceiling(platform, team)
        hard = {"requests.cpu": _quantity(most["cpu"]), "requests.memory": _quantity(most["memory"]),
                f"requests.{platform.node_pools.gpu_resource}": _quantity(most["gpu"]), "requests.storage": q.storage}
    if q.pods is not None:
        hard["pods"] = str(q.pods)
    if q.jobs is not None:
        hard["count/jobs.batch"] = str(q.jobs)
    return hard


def _quantity(amount) -> str:
    """A sum of quantities as a manifest's text: ``30``, ``0.5``, ``114Gi``, ``1536Mi``."""
    for unit, size in (("Gi", 2**30), ("Mi", 2**20)):
        if amount >= size and amount % size == 0:
            return f"{int(amount // size)}{unit}"
    text = f"{amount.normalize():f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def content_hash(doc: dict) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _stamp(doc: dict) -> dict:
    """Set the applied-hash annotation (a hash of the object without it)."""
    doc.setdefault("metadata", {}).setdefault("annotations", {}).pop(ANNOTATION_HASH, None)
    doc["metadata"]["annotations"][ANNOTATION_HASH] = content_hash(doc)
    return doc


def _pvc(name: str, namespace: str, labels: dict, owner: str | None, access_mode: str, size: str,
         storage_class: str | None) -> dict:
    annotations = {ANNOTATION_OWNER: owner} if owner else {}
    return _stamp(render("team/pvc.yaml.j2", name=name, namespace=namespace, labels=labels,
                         annotations=annotations, access_mode=access_mode, size=size,
                         storage_class=storage_class))


def team_objects(platform: Platform, team: Team) -> TeamObjects:
    labels = {**MANAGED_BY, LABEL_TEAM: team.name}
    docs = render("team/team.yaml.j2", namespace=team.namespace, labels=labels, annotations={},
                  namespace_labels={**labels, **team.pod_security.labels()},
                  hard=quota_hard(platform, team), default_cpu=platform.default_cpu,
                  default_memory=platform.default_memory, pull_secrets=list(team.pull_secrets),
                  service_account=team.service_account,
                  admins=list(team.admins),
                  members=[m.user for m in team.members if m.role != "admin"])
    docs = [_stamp(d) for d in docs]
    volumes = [_pvc(home_pvc(m.user), team.namespace, {**labels, LABEL_VOLUME: "home"}, m.user,
                    "ReadWriteOnce", platform.default_pvc_size, platform.storage_class) for m in team.members]
    volumes += [_pvc(v.name, team.namespace, {**labels, LABEL_VOLUME: "shared"}, v.owner, v.access_mode, v.size,
                     v.storage_class) for v in platform.volumes if v.team == team.name]
    if platform.queueing == "kueue":     # the LocalQueues; their ClusterQueues are in cluster_objects
        docs += [_stamp(d) for d in kueue.team_objects(platform, team, labels) if d["kind"] == "LocalQueue"]
    return TeamObjects(team.name, team.namespace, tuple(docs[:2]), tuple(docs[2:]), tuple(volumes))


def desired_objects(platform: Platform) -> list[TeamObjects]:
    return [team_objects(platform, team) for team in platform.teams]


def cluster_objects(platform: Platform) -> list[dict]:
    """Cluster-scoped objects, applied before the teams': with ``queueing: kueue``, Kueue's ResourceFlavors,
    WorkloadPriorityClasses and every team's ClusterQueues (``operators.platform.kueue``)."""
    if platform.queueing != "kueue":
        return []
    docs = kueue.cluster_objects(platform, dict(MANAGED_BY))
    for team in platform.teams:
        docs += [d for d in kueue.team_objects(platform, team, {**MANAGED_BY, LABEL_TEAM: team.name})
                 if d["kind"] == "ClusterQueue"]
    return [_stamp(d) for d in docs]


def desired_pools(platform: Platform) -> dict[str, dict[str, Any]]:
    """Airflow pools ``skiff-<team>``: slots from the quota (or the file), so tasks queue in Airflow. Deferred
    tasks hold their slot (a deferred TrainingJobOperator still has its Job running)."""
    return {team.pool: {"slots": team.pool_slots, "include_deferred": True,
                        "description": f"Skiff team {team.name} (namespace {team.namespace}); managed by "
                                       f"platform_sync from {platform.source}"}
            for team in platform.teams}


def ref(doc: dict) -> str:
    """``Kind/namespace/name`` (``Kind/name`` for cluster-scoped objects) for reports."""
    meta = doc["metadata"]
    return "/".join(p for p in (doc["kind"], meta.get("namespace"), meta["name"]) if p)
