"""Skiff's one access layer to Kubernetes: every operator, trigger and DAG task reaches the cluster through it.

* ``connection`` - hooks and API clients from an Airflow connection id (``[skiff] kubernetes_conn_id``,
  default ``kubernetes_default``), through the cncf-kubernetes provider's ``KubernetesHook`` /
  ``AsyncKubernetesHook``, so in-cluster, kubeconfig path or inline kubeconfig all work the same;
* ``resource`` - ``Resource`` (group/version + plural -> URL path) and the built-in resources Skiff uses;
* ``rest`` - ``Kube`` / ``AsyncKube``: plain-JSON requests (no model deserialisation), one error type;
* ``errors`` - ``KubeError`` (status, reason, message) and the one message format;
* ``retry`` - the pure back-off / give-up policy (no I/O, tested without a cluster);
* ``watch`` - ``list_and_watch``: the one list-then-watch loop;
* ``informer`` - shared informers: one ``list_and_watch`` per (resource, namespace, selector) per process,
  with a cache and reference-counted subscribers (the triggerer's training triggers share them).

Names resolve lazily (PEP 562): importing ``operators.k8s`` (e.g. while a DAG file is parsed) imports no
Kubernetes client; the clients load where a task or trigger runs.
"""

from importlib import import_module

from operators.settings import default

DEFAULT_CONN_ID = default("kubernetes_conn_id")

_EXPORTS = {
    "conn_id": "connection", "sync_hook": "connection", "async_hook": "connection",
    "api_client": "connection", "async_api_client": "connection",
    "KubeError": "errors", "api_error_message": "errors",
    "Resource": "resource",
    "Kube": "rest", "AsyncKube": "rest",
    "RetryPolicy": "retry",
    "WatchEvent": "watch", "list_and_watch": "watch",
    "Informers": "informer", "shared_informers": "informer",
}

__all__ = ["DEFAULT_CONN_ID", *sorted(_EXPORTS)]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f"operators.k8s.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'operators.k8s' has no attribute {name!r}")
