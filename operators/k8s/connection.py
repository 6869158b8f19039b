"""Hooks and API clients from an Airflow connection id, through the cncf-kubernetes provider.

Whatever the connection says (in-cluster, ``kube_config_path``, ``kube_config`` in the extras, a context)
applies the same way in sync and deferrable mode. The id is the caller's, else ``[skiff] kubernetes_conn_id``
(default ``kubernetes_default``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from operators import settings

if TYPE_CHECKING:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook, KubernetesHook


def conn_id(explicit: str | None = None) -> str:
    """The connection to use: ``explicit`` if given, else ``[skiff] kubernetes_conn_id``, else the default."""
    return explicit or settings.get("kubernetes_conn_id")


def sync_hook(conn: str | None = None) -> KubernetesHook:
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook

    return KubernetesHook(conn_id=conn_id(conn))


def async_hook(conn: str | None = None, *, connection_extras: dict | None = None,
               max_connections: int | None = None) -> AsyncKubernetesHook:
    """The async hook; pass ``connection_extras`` (from the sync hook) when no async connection lookup is wanted,
    e.g. a worker running an event loop of its own. ``max_connections``: its clients' connection limit
    (kubernetes_asyncio's default is 100; 0 = none: a client shared by long-lived watches and log streams)."""
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

    config = None
    if max_connections is not None:
        from kubernetes_asyncio.client import Configuration

        config = Configuration()
        config.connection_pool_maxsize = max_connections
    return AsyncKubernetesHook(conn_id=conn_id(conn), connection_extras=connection_extras,
                               client_configuration=config)


def api_client(conn: str | None = None):
    """A ``kubernetes.client.ApiClient`` for the connection (sync)."""
    return sync_hook(conn).api_client


@asynccontextmanager
async def async_api_client(conn: str | None = None, *, connection_extras: dict | None = None,
                           max_connections: int | None = None) -> AsyncIterator:
    """A ``kubernetes_asyncio`` ``ApiClient`` for the connection, closed on exit."""
    hook = async_hook(conn, connection_extras=connection_extras, max_connections=max_connections)
    async with hook.get_conn() as api:
        yield api
