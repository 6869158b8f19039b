"""Namespace rules of the registry: what a new namespace gets, which cannot be deleted, and the namespace
lifecycle (a deleted namespace is Terminating until everything in it is gone, then removed).

Upstream: pkg/registry/core/namespace/strategy.go (`PrepareForCreate`: the `kubernetes` finalizer, phase
Active; the `kubernetes.io/metadata.name` label), plugin/pkg/admission/namespace/lifecycle (the immortal
namespaces; no new content in a Terminating one), pkg/registry/core/namespace/storage/storage.go (`Delete`
sets Terminating) and pkg/controller/namespace/deletion (deletes the content). kubesim empties the
namespace at once, synchronously, where the real namespace controller does it over a few seconds.
"""
from __future__ import annotations

import json

from kubesim.apimachinery import errors
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.registry.kinds import ResourceType

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE = ("default", "kube-system", "kube-public")   # the NamespaceLifecycle admission


def is_namespace(rt: ResourceType) -> bool:
    return rt.plural == "namespaces" and not rt.group


def prepare_for_create(obj: dict) -> None:
    md = obj["metadata"]
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj["status"] = {"phase": "Active"}
    md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md["name"]


def check_delete(name: str) -> None:
    if name in UNDELETABLE:
        raise ApiError(403, f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                       "Forbidden", name=name, kind="namespaces")


def check_namespace(storage, rt: ResourceType, namespace: str | None, *, creating: str | None = None) -> None:
    """The namespace must exist; `creating` (the new object's name) must not go into a Terminating one."""
    if not rt.namespaced:
        return
    if not namespace:
        raise ApiError(400, "the server could not find the requested resource: a namespace is required",
                       "BadRequest")
    ns = storage.data.get(("", "namespaces"), {}).get(("", namespace))
    if ns is None:
        raise errors.namespace_not_found(namespace)
    if creating is not None and ns[0].get("status", {}).get("phase") == "Terminating":
        raise ApiError(403, f'{rt.plural} "{creating}" is forbidden: unable to create new content in '
                            f"namespace {namespace} because it is being terminated", "Forbidden",
                       name=creating, kind=rt.plural)


def empty(store, namespace: str) -> None:
    """The namespace controller's job, done at once: delete everything in a Terminating namespace."""
    for rt in store.registry.all():
        if not rt.namespaced:
            continue
        bucket = store.storage.bucket(rt)
        for key in [k for k in list(bucket) if k[0] == namespace]:
            if key in bucket:
                try:
                    store.delete(rt, namespace, key[1], propagation="Background")
                except ApiError:
                    pass
    maybe_finish(store, namespace)


def maybe_finish(store, namespace: str) -> None:
    """Remove a Terminating namespace once nothing is left in it and its finalizers are done."""
    ns_rt = store.registry.lookup("", "v1", "namespaces")
    entry = store.storage.bucket(ns_rt).get(("", namespace))
    if entry is None or entry[0].get("status", {}).get("phase") != "Terminating":
        return
    for key, bucket in store.storage.data.items():
        if key != ("", "namespaces") and any(k[0] == namespace for k in bucket):
            return
    if entry[0]["metadata"].get("finalizers"):
        return
    store.finalize_removal(ns_rt, ("", namespace), json.loads(entry[1]))
