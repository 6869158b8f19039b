"""Read side of development instances, for the DAGs' logs and the UI: a user's instances and, only through
``password``, an instance's password.

``list_instances(api_client, owner)`` returns ``InstanceView``s (state, image, resources, age, idle time, URLs,
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


def _pods_by_sts(api_client, namespace: str | None, selector: str) -> dict[tuple[str, str], dict]:
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    pods = (core.list_namespaced_pod(namespace, label_selector=selector) if namespace
            else core.list_pod_for_all_namespaces(label_selector=selector)).items
    out = {}
    for pod in pods:
        raw = api_client.sanitize_for_serialization(pod)
        name = raw["metadata"]["name"].rsplit("-", 1)[0]
        out[(raw["metadata"]["namespace"], name)] = raw
    return out


def _views(api_client, stss: list[dict], pods: dict, settings: Settings, with_idle: bool) -> list[InstanceView]:
    now = datetime.now(UTC)
    out = []
    for sts in stss:
        meta = sts["metadata"]
        pod = pods.get((meta["namespace"], meta["name"]))
        first = view(sts, pod, settings.host, now)
        if with_idle and first.state == RUNNING:
            last, _why = idle.read_last_activity(api_client, meta["namespace"], meta["name"])
            first = view(sts, pod, settings.host, now, last)
        out.append(first)
    return out


def list_instances(api_client, owner: str, settings: Settings, *, with_idle: bool = True) -> list[InstanceView]:
    """Every instance of ``owner`` in any team namespace, sorted by namespace and name."""
    from kubernetes import client

    apps = client.AppsV1Api(api_client)
    selector = naming.owner_selector(owner)
    stss = [api_client.sanitize_for_serialization(s)
            for s in apps.list_stateful_set_for_all_namespaces(label_selector=selector).items]
    stss = [s for s in stss if (s["metadata"].get("annotations") or {}).get(naming.ANN_OWNER) == owner]
    stss.sort(key=lambda s: (s["metadata"]["namespace"], s["metadata"]["name"]))
    return _views(api_client, stss, _pods_by_sts(api_client, None, selector), settings, with_idle)


def get_instance(api_client, owner: str, team: str, name: str, settings: Settings,
                 *, with_idle: bool = True) -> InstanceView | None:
    sts = read_instance(api_client, owner, team, name)
    if sts is None:
        return None
    pods = _pods_by_sts(api_client, team, naming.owner_selector(owner))
    return _views(api_client, [sts], pods, settings, with_idle)[0]


def password(api_client, owner: str, team: str, name: str, *, caller: str, caller_is_admin: bool = False) -> str:
    """The instance's current password, for its owner only (``caller`` is the authenticated user)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    if caller != owner and not caller_is_admin:
        raise PermissionError(f"{caller!r} may not read the password of {owner!r}'s instance {name!r}")
    if read_instance(api_client, owner, team, name) is None:
        raise InstanceError(f"no development instance {name!r} of {owner!r} in {team}")
    try:
        secret = client.CoreV1Api(api_client).read_namespaced_secret(naming.secret_name(owner, name), team)
    except ApiException as exc:
        if exc.status == 404:
            raise InstanceError(f"{owner!r}'s instance {name!r} has no password yet (never started)") from None
        raise
    return base64.b64decode((secret.data or {})["password"]).decode()
