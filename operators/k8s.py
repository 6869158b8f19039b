"""Cluster access shared by Skiff's operators: hooks from a connection id, readable API errors.

All access goes through the cncf-kubernetes provider's hooks, so whatever the connection says (in-cluster,
``kube_config_path``, ``kube_config`` in the extras, a context) applies the same way in sync and deferrable mode.
"""

from __future__ import annotations

import json
from typing import Any

from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook

DEFAULT_CONN_ID = "kubernetes_default"


def sync_hook(conn_id: str = DEFAULT_CONN_ID) -> KubernetesHook:
    return KubernetesHook(conn_id=conn_id)


def async_hook(conn_id: str = DEFAULT_CONN_ID, *, connection_extras: dict | None = None) -> AsyncKubernetesHook:
    """The async hook; pass ``connection_extras`` (from the sync hook) when no async connection lookup is wanted,
    e.g. a worker running an event loop of its own."""
    return AsyncKubernetesHook(conn_id=conn_id, connection_extras=connection_extras)


def api_error_message(exc: Any) -> str:
    """``ApiException`` (sync or async client) -> "409 AlreadyExists: jobs.batch "x" already exists"."""
    status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    try:
        parsed = json.loads(body) if body else {}
    except (TypeError, ValueError):
        parsed = {}
    if isinstance(parsed, dict) and parsed.get("message"):
        return f"{status} {parsed.get('reason') or getattr(exc, 'reason', '')}: {parsed['message']}".strip()
    return f"{status} {getattr(exc, 'reason', '') or ''} {body or ''}".strip()
