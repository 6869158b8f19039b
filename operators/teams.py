"""Team queues (SPEC §3): a namespace per team with a ResourceQuota, and a default volume per user.

``queue_manifests`` is pure (validated inputs in, manifests out); ``ensure_queue`` applies them idempotently:
missing objects are created, the quota's ``spec.hard`` is brought to the desired value, and an existing PVC is
never modified (it holds a user's data).
"""

from __future__ import annotations

import re
from typing import Any

from operators.templating import render
from operators.training.spec import default_pvc

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]i?|Ki)?$")
DEFAULT_QUOTA = {
    "limits.cpu": "2",
    "limits.memory": "5Gi",
    "requests.cpu": "2",
    "requests.memory": "5Gi",
    "requests.nvidia.com/gpu": "1",
    "requests.storage": "10Gi",
}


def default_pvc_name(user: str) -> str:
    """The PVC every user gets in each of their team queues; TrainingJobOperator mounts it at ``/root``."""
    if not isinstance(user, str) or not re.search(r"[A-Za-z0-9]", user):
        raise ValueError(f"users: {user!r} has no character usable in a volume name")
    return default_pvc(user)


def queue_manifests(team: str, users: list[str], quota: dict[str, str] | None = None,
                    user_storage: str = "5Gi", storage_class: str | None = None) -> list[dict[str, Any]]:
    if not isinstance(team, str) or len(team) > 63 or not DNS_LABEL.match(team):
        raise ValueError(f"team: {team!r} is not a valid namespace name (DNS-1123 label, at most 63 characters)")
    quota = dict(DEFAULT_QUOTA if quota is None else quota)
    for resource, value in {**quota, "user_storage": user_storage}.items():
        if not isinstance(value, str) or not QUANTITY.match(value):
            raise ValueError(f"quota: {resource}={value!r} is not a Kubernetes quantity")
    members = [
        {"name": u, "pvc": default_pvc_name(u), "storage": user_storage, "label": default_pvc_name(u)[:-5]}
        for u in users
    ]
    docs = render("team/queue.yaml.j2", team=team, quota=quota, users=members, storage_class=storage_class)
    return docs if isinstance(docs, list) else [docs]


def ensure_queue(api_client, manifests: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Create what is missing, converge the quota; returns ``{"created": [...], "updated": [...]}``."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api_client)
    summary: dict[str, list[str]] = {"created": [], "updated": []}
    for doc in manifests:
        kind, meta = doc["kind"], doc["metadata"]
        ref = f"{kind}/{meta.get('namespace', '')}/{meta['name']}".replace("//", "/")
        try:
            if kind == "Namespace":
                core.create_namespace(doc)
            elif kind == "ResourceQuota":
                core.create_namespaced_resource_quota(meta["namespace"], doc)
            elif kind == "PersistentVolumeClaim":
                core.create_namespaced_persistent_volume_claim(meta["namespace"], doc)
            else:
                raise ValueError(f"kind: {kind!r} is not part of a team queue")
            summary["created"].append(ref)
        except ApiException as exc:
            if exc.status != 409:
                raise
            if kind == "ResourceQuota":
                live = core.read_namespaced_resource_quota(meta["name"], meta["namespace"])
                if dict(live.spec.hard or {}) != doc["spec"]["hard"]:
                    core.patch_namespaced_resource_quota(meta["name"], meta["namespace"],
                                                         {"spec": {"hard": doc["spec"]["hard"]}})
                    summary["updated"].append(ref)
    return summary
