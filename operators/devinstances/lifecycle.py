"""Create, stop, start and delete development instances: the thin shell over the pure parts.

Every action is idempotent and checks ownership first:
* ``create``: at most ``max_per_owner`` instances per owner (stopped ones count), PVCs must exist; ports are
  allocated, then the StatefulSet (replicas 0), its Service and start-up ConfigMap, then ``start``. A failure
  before the instance is complete removes what this call wrote. Creating an instance that exists (same owner,
  team and name) repairs missing parts and starts it; its spec is not changed.
* ``start``: a new password in the Secret, then replicas 1 (a running instance is left as it is).
* ``stop``: replicas 0; the PVCs, the Service and the ports stay.
* ``delete``: the StatefulSet (its Service, Secret and ConfigMap are deleted too) and the port entries;
  never a PVC. Deleting a missing instance says so and succeeds.

Every request goes through Skiff's access layer (``operators.k8s.Kube``: plain JSON, transient failures sent
again under the one retry policy); callers build the ``Kube`` from the connection.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from operators.devinstances import admission, desired, naming, tcp_services
from operators.devinstances.settings import Settings
from operators.devinstances.spec import InstanceRequest
from operators.k8s.resource import CONFIGMAPS, PVCS, SECRETS, SERVICES, STATEFULSETS
from operators.k8s.rest import Kube
from operators.platform.admission import AdmissionError
from operators.platform.model import Platform

log = logging.getLogger("skiff.devinstances")
PASSWORD_BYTES = 24  # 192 bits from the OS's CSPRNG


class InstanceError(Exception):
    """An action was refused (limit reached, not the owner's, missing volume...): the message says why."""


@dataclass(frozen=True)
class Outcome:
    action: str
    changed: bool
    message: str


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_password() -> str:
    """192 random bits, registered with Airflow's secrets masker at once: should an API error echo the Secret
    body into the task log (a 422 quotes the object), the masker prints ``***`` instead of the password."""
    password = secrets.token_urlsafe(PASSWORD_BYTES)
    try:
        from airflow.sdk.log import mask_secret
    except ImportError:  # outside an Airflow install (the kubesim-only tools): nothing logs through Airflow
        return password
    mask_secret(password)
    return password


def read_instance(kube: Kube, owner: str, team: str, name: str) -> dict | None:
    """The instance's StatefulSet as a dict, None if missing; raises if it is not ``owner``'s. An instance made
    before names were injective is found under its first-rule name, and only when it is exactly ``owner``'s
    (that name may be another owner's instance: then it is simply not this one)."""
    sts = kube.get(STATEFULSETS, team, naming.statefulset_name(owner, name))
    legacy = naming.legacy_statefulset_name(owner, name)
    if sts is None and legacy is not None:
        old = kube.get(STATEFULSETS, team, legacy)
        if old is not None and (old["metadata"].get("annotations") or {}).get(naming.ANN_OWNER) == owner \
                and (old["metadata"].get("labels") or {}).get(naming.LABEL_INSTANCE) == name:
            sts = old
    if sts is None:
        return None
    meta = sts["metadata"]
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    if labels.get(naming.LABEL_KIND) != naming.KIND or ann.get(naming.ANN_OWNER) != owner:
        raise InstanceError(f"{team}/{meta['name']} is not a development instance of {owner!r}")
    return sts


def count_instances(kube: Kube, owner: str) -> list[str]:
    """``namespace/name`` of every instance of ``owner`` in any namespace, stopped ones included."""
    found = kube.list(STATEFULSETS, label_selector=naming.owner_selector(owner))
    return sorted(f"{s['metadata']['namespace']}/{s['metadata']['name']}" for s in found
                  if (s["metadata"].get("annotations") or {}).get(naming.ANN_OWNER) == owner)


def check_volumes(kube: Kube, req: InstanceRequest) -> None:
    wanted = [("home volume", req.home_pvc)] + [(f"mounts[{i}].pvc", m.pvc) for i, m in enumerate(req.mounts)]
    for field, claim in wanted:
        if kube.get(PVCS, req.namespace, claim) is None:
            raise InstanceError(f"{field}={claim!r}: no such PersistentVolumeClaim in {req.namespace}")


def _over_limit(owner: str, instances: list[str], limit: int) -> InstanceError:
    return InstanceError(f"{owner} already has {len(instances)} development instances ({', '.join(instances)}); "
                         f"the limit is {limit}, stopped ones included: delete one first")


def admit(kube: Kube, platform: Platform, req: InstanceRequest) -> dict[str, str]:
    """Apply the platform's admission decision: a refusal raises ``AdmissionError``; an instance is interactive,
    so one that would only wait for quota is refused too (saying what is in use), not queued. Returns the
    labels the StatefulSet carries (with ``queueing: kueue``: the skiff-dev LocalQueue and priority)."""
    decision = admission.decision(kube, platform, req)
    if decision.refused:
        raise AdmissionError(decision.reason)
    if decision.waits:
        raise InstanceError(f"not enough free quota to start it now: {decision.reason}")
    return dict(decision.queue_labels)


def create(kube: Kube, req: InstanceRequest, settings: Settings, platform: Platform | None = None) -> Outcome:
    """``platform``: the platform file to admit a new instance under (None: no admission check).

    The per-owner limit holds under concurrency without a lock: the count before creating refuses the
    common case with no write; after creating the StatefulSet this call counts again and, if the owner now
    has more than the limit, removes its own instance and fails (``_ensure``). Of any set of concurrent
    creates, the last one created sees all the others, so never more than the limit remain (docs/security.md)."""
    existing = read_instance(kube, req.owner, req.namespace, req.name)
    queue_labels: dict[str, str] = {}
    if existing is None:
        others = count_instances(kube, req.owner)
        if len(others) >= settings.max_per_owner:
            raise _over_limit(req.owner, others, settings.max_per_owner)
        check_volumes(kube, req)
        if platform is not None:
            queue_labels = admit(kube, platform, req)
    return _ensure(kube, req, settings, existing, queue_labels)


def _ensure(kube: Kube, req: InstanceRequest, settings: Settings, existing: dict | None,
            queue_labels: dict[str, str] | None = None) -> Outcome:
    sts_name = existing["metadata"]["name"] if existing else naming.statefulset_name(req.owner, req.name)
    service = naming.service_of(sts_name)
    external = tcp_services.allocate(kube, settings, req.namespace, service, req.ports.values())
    created_sts = False
    try:
        if existing is None:
            made = kube.create(STATEFULSETS, req.namespace,
                               desired.statefulset(req, external, replicas=0, started=None,
                                                   queue_labels=queue_labels))
            created_sts = made is not None
            # None: it exists (a concurrent create, or this very request sent again after a lost answer)
            existing = made or read_instance(kube, req.owner, req.namespace, req.name)
            if existing is None:
                raise InstanceError(f"{req.namespace}/{service}: created and gone at once; try again")
            if created_sts:  # count again, this one included: a concurrent create may have passed the first count
                now = count_instances(kube, req.owner)
                if len(now) > settings.max_per_owner:
                    raise _over_limit(req.owner, [i for i in now if i != f"{req.namespace}/{sts_name}"],
                                      settings.max_per_owner)
        uid = existing["metadata"]["uid"]
        kube.create(SERVICES, req.namespace, desired.service(req, uid, sts_name))  # None: already there
        kube.create(CONFIGMAPS, req.namespace,
                    desired.startup_configmap(req.owner, req.name, req.namespace, uid, sts_name))
    except Exception:
        _rollback(kube, req, settings, created_sts, existing is None or created_sts, sts_name)
        raise
    started = start(kube, req.owner, req.namespace, req.name)
    verb = "created" if created_sts else "already existed"
    return Outcome("create", created_sts or started.changed,
                   f"{req.namespace}/{service} {verb}; {started.message}")


def _rollback(kube: Kube, req: InstanceRequest, settings: Settings, created_sts: bool, free_ports: bool,
              sts_name: str) -> None:
    """Undo a create that failed half-way (best effort; the original error is what the caller sees)."""
    try:
        if created_sts:
            _delete_objects(kube, req.namespace, sts_name)
        if free_ports:
            tcp_services.release(kube, settings, req.namespace, naming.service_of(sts_name))
    except Exception as exc:  # noqa: BLE001 - keep the first error
        log.warning("rollback of %s/%s incomplete: %s", req.namespace, req.name, exc)


def _scale(kube: Kube, sts: dict, replicas: int, annotation: str) -> None:
    meta = sts["metadata"]
    kube.merge_patch(STATEFULSETS, meta["namespace"], meta["name"], {
        "metadata": {"annotations": {annotation: now_text()}},
        "spec": {"replicas": replicas}})


def start(kube: Kube, owner: str, team: str, name: str) -> Outcome:
    """Replicas 1 with a new password; a running instance is left alone (its password stays)."""
    sts = read_instance(kube, owner, team, name)
    if sts is None:
        raise InstanceError(f"no development instance {name!r} of {owner!r} in {team}")
    if int(sts["spec"].get("replicas") or 0) >= 1:
        return Outcome("start", False, "already running (password unchanged)")
    body = desired.secret(owner, name, team, sts["metadata"]["uid"], new_password(), sts["metadata"]["name"])
    if kube.create(SECRETS, team, body) is None:  # the last start's: replaced (no resourceVersion: last write wins)
        kube.replace(SECRETS, team, body["metadata"]["name"], body)
    _scale(kube, sts, 1, naming.ANN_STARTED)
    return Outcome("start", True, "starting with a new password")


def stop(kube: Kube, owner: str, team: str, name: str) -> Outcome:
    """Replicas 0; volumes, Service and ports stay. Stopping a stopped instance changes nothing."""
    sts = read_instance(kube, owner, team, name)
    if sts is None:
        raise InstanceError(f"no development instance {name!r} of {owner!r} in {team}")
    if int(sts["spec"].get("replicas") or 0) == 0:
        return Outcome("stop", False, "already stopped")
    _scale(kube, sts, 0, naming.ANN_STOPPED)
    return Outcome("stop", True, "stopped; its volumes, Service and ports are kept")


def _delete_objects(kube: Kube, team: str, sts_name: str) -> list[str]:
    removed = []
    for kind, res, obj in (
        ("StatefulSet", STATEFULSETS, sts_name),
        ("Service", SERVICES, naming.service_of(sts_name)),
        ("Secret", SECRETS, naming.secret_of(sts_name)),
        ("ConfigMap", CONFIGMAPS, naming.startup_configmap_of(sts_name)),
    ):
        if kube.delete(res, team, obj):  # False: already gone
            removed.append(f"{kind}/{obj}")
    return removed


def delete(kube: Kube, owner: str, team: str, name: str, settings: Settings) -> Outcome:
    """Remove everything but the PVCs; a missing instance is reported, not an error."""
    sts = read_instance(kube, owner, team, name)  # raises if it is somebody else's
    # gone already: what a half-done delete left has this owner's injective name (never a first-rule name,
    # which may be another owner's)
    sts_name = sts["metadata"]["name"] if sts else naming.statefulset_name(owner, name)
    removed = _delete_objects(kube, team, sts_name)
    freed = tcp_services.release(kube, settings, team, naming.service_of(sts_name))
    if sts is None and not removed and not freed:
        return Outcome("delete", False, f"no development instance {name!r} of {owner!r} in {team}: nothing to do")
    ports = ", ".join(str(p) for p in sorted(freed.values())) or "none"
    return Outcome("delete", True, f"deleted {', '.join(removed) or 'nothing left'}; freed ports {ports}; "
                                   "volumes kept")
