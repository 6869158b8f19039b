"""Apply a platform file to the cluster: observe (one list per kind), diff, server-side apply what differs.

Level-triggered and idempotent: an object is applied only when it is missing, its ``skiff.io/applied-hash``
differs from the rendered one (the file changed, so server-side apply also removes fields the file dropped),
or a value was changed by hand (drift). A second run over an unchanged cluster only lists. Applies use field
manager ``skiff`` with ``force=true``: the reviewed file is the source of truth (as Flux and Argo CD apply),
so a hand edit of a field Skiff owns is taken back and its ownership moves to Skiff.

With ``queueing: kueue``, each team's LocalQueues are applied with its other objects; Kueue's cluster-wide
objects (ResourceFlavors, WorkloadPriorityClasses, the teams' ClusterQueues) are a cluster admin's step like a
new team's namespace, and are only checked (an error names the step when one is missing or differs). Per team: Namespace and ResourceQuota first, then wait until the quota controller has filled in the quota's
status (until then the API server refuses or, on a real cluster, does not count creates in the namespace),
then the LimitRange, ServiceAccount, RoleBindings and PVCs. One object's failure is reported and the others go
on (a team whose namespace or quota fails is skipped; a new team's namespace, with Skiff's RoleBindings in it,
is made by a cluster admin: ``python -m operators.rbac teams``). Nothing is ever deleted: namespaces and PVCs that Skiff
made and the file no longer lists are reported as orphaned, for a person to decide.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from operators.core.quantity import parse_quantity
from operators.k8s.resource import Resource
from operators.platform.desired import (
    ANNOTATION_HASH,
    MANAGED_BY,
    TeamObjects,
    cluster_objects,
    desired_objects,
    ref,
)
from operators.platform.kueue import not_served
from operators.platform.model import QUOTA_NAME, Platform

if TYPE_CHECKING:  # the access layer loads the client; importing this module must not
    from operators.k8s.rest import Kube

FIELD_MANAGER = "skiff"
APPLY = "application/apply-patch+yaml"
# Skiff may not create namespaces nor bind its roles outside its team namespaces (k8s_templates/rbac/platform.yaml.j2)
NEW_TEAM = (" (a new team's namespace and Skiff's RoleBindings in it are a cluster admin's step: "
            "python -m operators.rbac teams --platform FILE | kubectl apply -f -)")
# Kueue's cluster-scoped objects: Skiff may only list them (cluster-wide it never writes)
CLUSTER_STEP = (" (a cluster admin applies Kueue's cluster-wide objects: python -m operators.rbac teams --platform FILE"
                " | kubectl apply -f -)")
# queueing: kueue on a cluster whose API does not serve Kueue's kinds: nothing is applied (the teams' ResourceQuotas
# would lose their CPU/GPU limits to queues that do not exist), and the report says so and how to fix it
NO_KUEUE = "nothing was applied"
SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
# kind -> (resource, namespaced), in the access layer's terms (operators.k8s.Resource)
KINDS = {
    "Namespace": (Resource("v1", "namespaces"), False),
    "ResourceQuota": (Resource("v1", "resourcequotas"), True),
    "LimitRange": (Resource("v1", "limitranges"), True),
    "ServiceAccount": (Resource("v1", "serviceaccounts"), True),
    "RoleBinding": (Resource("rbac.authorization.k8s.io/v1", "rolebindings"), True),
    "PersistentVolumeClaim": (Resource("v1", "persistentvolumeclaims"), True),
}
# queueing: kueue (operators.platform.kueue): Kueue's kinds, observed only then (its CRDs may not be installed)
KUEUE_KINDS = {
    "ResourceFlavor": (Resource("kueue.x-k8s.io/v1beta2", "resourceflavors"), False),
    "WorkloadPriorityClass": (Resource("kueue.x-k8s.io/v1beta2", "workloadpriorityclasses"), False),
    "ClusterQueue": (Resource("kueue.x-k8s.io/v1beta2", "clusterqueues"), False),
    "LocalQueue": (Resource("kueue.x-k8s.io/v1beta2", "localqueues"), True),
}


def apply_request(kube, doc: dict, *, force: bool = True) -> dict:
    """One server-side apply of ``doc`` as field manager ``skiff`` (a PATCH through the access layer)."""
    res, namespaced = {**KINDS, **KUEUE_KINDS}[doc["kind"]]
    meta = doc["metadata"]
    path = res.path(meta.get("namespace") if namespaced else None, meta["name"])
    query = [("fieldManager", FIELD_MANAGER)] + ([("force", "true")] if force else [])
    return kube.request("PATCH", path, query=query, body=doc, content_type=APPLY)


@dataclass
class SyncReport:
    applied: list[str] = field(default_factory=list)
    unchanged: int = 0
    orphaned: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    waited_for_quota: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"applied": self.applied, "unchanged": self.unchanged, "orphaned": self.orphaned,
                "errors": self.errors, "waited_for_quota": self.waited_for_quota}


def _key(doc: dict) -> tuple[str, str, str]:
    meta = doc["metadata"]
    return doc["kind"], meta.get("namespace") or "", meta["name"]


def _same(want, have) -> bool:
    """``want`` is contained in ``have`` (the server adds defaults); quantities compare by value."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_same(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_same, want, have))
    if want == have:
        return True
    if isinstance(want, str) and isinstance(have, str):
        try:
            return parse_quantity(want) == parse_quantity(have)
        except ValueError:
            return False
    return False


def needs_apply(want: dict, live: dict | None) -> bool:
    if live is None:
        return True
    have_hash = ((live.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_HASH)
    if have_hash != want["metadata"]["annotations"][ANNOTATION_HASH]:
        return True
    return not _same({k: v for k, v in want.items() if k not in ("apiVersion", "kind")}, live)


def quota_ready(quota: dict) -> bool:
    """The quota controller has caught up with the quota's spec (its status names every hard resource)."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    status = quota.get("status") or {}
    return _same(hard, status.get("hard") or {}) and set(hard) <= set(status.get("used") or {})


class ClusterSync:
    """The thin shell: the access layer's ``Kube`` (plain JSON), the report, and the live view."""

    def __init__(self, kube, *, quota_timeout: float = 60.0, poll: float = 0.1) -> None:
        self.kube = kube
        self.quota_timeout, self.poll = quota_timeout, poll
        self.report = SyncReport()
        self.live: dict[tuple[str, str, str], dict] = {}

    def observe(self, kinds: dict = KINDS) -> None:
        for kind, (res, _) in kinds.items():
            for item in self.kube.list(res, label_selector=SELECTOR):
                item["kind"] = kind
                self.live[_key(item)] = item

    def observe_kueue(self) -> str | None:
        """Observe Kueue's kinds; the first the API does not serve (404: Kueue not installed), else None."""
        from operators.k8s import KubeError

        for kind, spec in KUEUE_KINDS.items():
            try:
                self.observe({kind: spec})
            except KubeError as exc:
                if exc.status == 404:
                    return kind
                raise
        return None

    def apply(self, doc: dict) -> bool:
        from operators.k8s import KubeError

        key = _key(doc)
        if not needs_apply(doc, self.live.get(key)):
            self.report.unchanged += 1
            return True
        try:
            applied = apply_request(self.kube, doc)
        except KubeError as exc:
            self.report.errors.append(f"{ref(doc)}: {exc}" + (NEW_TEAM if doc["kind"] == "Namespace" and
                                                              exc.status == 403 else ""))
            return False
        self.live[key] = {**applied, "kind": doc["kind"]}
        self.report.applied.append(ref(doc))
        return True

    def wait_for_quota(self, namespace: str) -> bool:
        """Poll the team's quota until its status is filled in (bounded by ``quota_timeout``)."""
        live = self.live.get(("ResourceQuota", namespace, QUOTA_NAME))
        if live is not None and quota_ready(live):
            return True
        self.report.waited_for_quota.append(namespace)
        deadline = time.monotonic() + self.quota_timeout
        while time.monotonic() < deadline:
            quota = self.kube.get(KINDS["ResourceQuota"][0], namespace, QUOTA_NAME)
            if quota is not None and quota_ready(quota):
                return True
            time.sleep(self.poll)
        self.report.errors.append(f"ResourceQuota/{namespace}/{QUOTA_NAME}: the quota controller did not fill in "
                                  f"its status within {self.quota_timeout:g} s; the team's PVCs were not applied")
        return False

    def sync_team(self, team: TeamObjects) -> None:
        if not all([self.apply(doc) for doc in team.setup]) or not self.wait_for_quota(team.namespace):
            return
        for doc in team.rest + team.volumes:
            self.apply(doc)

    def orphans(self, teams: list[TeamObjects]) -> list[str]:
        wanted = {_key(doc) for t in teams for doc in t.setup + t.rest + t.volumes}
        return sorted(ref(obj) for key, obj in self.live.items()
                      if key[0] in ("Namespace", "PersistentVolumeClaim") and key not in wanted)


def sync_cluster(kube: Kube, platform: Platform, *, quota_timeout: float = 60.0) -> SyncReport:
    """Bring the cluster to the platform file; returns what was applied, orphaned and refused."""
    teams = desired_objects(platform)
    shell = ClusterSync(kube, quota_timeout=quota_timeout)
    shell.observe()
    if platform.queueing == "kueue" and (missing := shell.observe_kueue()):
        shell.report.errors.append(not_served(missing, NO_KUEUE))
        return shell.report
    for doc in cluster_objects(platform):       # Kueue's flavors, priorities, ClusterQueues: a cluster admin's
        if needs_apply(doc, shell.live.get(_key(doc))):
            shell.report.errors.append(f"{ref(doc)}: missing or not as the platform file says" + CLUSTER_STEP)
        else:
            shell.report.unchanged += 1
    for team in teams:
        shell.sync_team(team)
    shell.report.orphaned = shell.orphans(teams)
    return shell.report
