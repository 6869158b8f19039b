"""Read side of development instances, for the DAGs' logs and the UI: a user's instances and, only through
``password``, an instance's password.

``list_instances(kube, owner)`` returns ``InstanceView``s (state, image, resources, age, idle time, URLs,
ssh line); it never reads a Secret. ``password`` is the one function that does, and only for the owner (or an
admin acting explicitly as one).
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

from operators.devinstances import idle, naming
from operators.devinstances.lifecycle import InstanceError, read_instance
from operators.devinstances.settings import Settings
from operators.devinstances.view import RUNNING, InstanceView, view
from operators.k8s.resource import PODS, SECRETS, STATEFULSETS
from operators.k8s.rest import Kube


def _pods_by_sts(kube: Kube, namespace: str | None, selector: str) -> dict[tuple[str, str], dict]:
    return {(pod["metadata"]["namespace"], pod["metadata"]["name"].rsplit("-", 1)[0]): pod
            for pod in kube.list(PODS, namespace, label_selector=selector)}


def _views(kube: Kube, stss: list[dict], pods: dict, settings: Settings, with_idle: bool) -> list[InstanceView]:
    now = datetime.now(UTC)
    out = []
    for sts in stss:
        meta = sts["metadata"]
        pod = pods.get((meta["namespace"], meta["name"]))
        first = view(sts, pod, settings.host, now)
        if with_idle and first.state == RUNNING:
            last, _why = idle.read_last_activity(kube, meta["namespace"], meta["name"])
            first = view(sts, pod, settings.host, now, last)
        out.append(first)
    return out


def list_instances(kube: Kube, owner: str, settings: Settings, *, with_idle: bool = True) -> list[InstanceView]:
    """Every instance of ``owner`` in any team namespace, sorted by namespace and name."""
    selector = naming.owner_selector(owner)
    stss = [s for s in kube.list(STATEFULSETS, label_selector=selector)
            if (s["metadata"].get("annotations") or {}).get(naming.ANN_OWNER) == owner]
    stss.sort(key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"]))
    return _views(kube, stss, _pods_by_sts(kube, None, selector), settings, with_idle)


def get_instance(kube: Kube, owner: str, team: str, name: str, settings: Settings,
                 *, with_idle: bool = True) -> InstanceView | None:
    sts = read_instance(kube, owner, team, name)
    if sts is None:
        return None
    pods = _pods_by_sts(kube, team, naming.owner_selector(owner))
    return _views(kube, [sts], pods, settings, with_idle)[0]


def password(kube: Kube, owner: str, team: str, name: str, *, caller: str, caller_is_admin: bool = False) -> str:
    """The instance's current password, for its owner only (``caller`` is the authenticated user)."""
    if caller != owner and not caller_is_admin:
        raise PermissionError(f"{caller!r} may not read the password of {owner!r}'s instance {name!r}")
    sts = read_instance(kube, owner, team, name)
    if sts is None:
        raise InstanceError(f"no development instance {name!r} of {owner!r} in {team}")
    secret = kube.get(SECRETS, team, naming.secret_of(sts["metadata"]["name"]))
    if secret is None:
        raise InstanceError(f"{owner!r}'s instance {name!r} has no password yet (never started)")
    return base64.b64decode((secret.get("data") or {})["password"]).decode()
