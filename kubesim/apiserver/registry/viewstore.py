"""The verbs on a resource served as a view of another one's storage: events.k8s.io/v1 Events over the stored
core/v1 Events (`ResourceType.storage`). A write is converted to the stored version, done there, and its
answer converted back; a PATCH patches the object as this version serves it.

Upstream: pkg/registry/core/event/storage and the events.k8s.io REST storage share one etcd prefix
(pkg/registry/events/rest/storage_events.go wires the core event storage), with the conversions of
pkg/apis/events/v1/conversion.go. The store is kubesim's `Store` (the one caller): no import of it here.
"""
from __future__ import annotations

import json

from kubesim.apimachinery import errors
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.registry import namespaces
from kubesim.apiserver.registry import patch as patchmod
from kubesim.apiserver.registry.kinds import ResourceType
from kubesim.apiserver.registry.objectmeta import check_identity
from kubesim.apiserver.registry.views import dumps, event_to_core, view


def storage_rt(store, rt: ResourceType) -> ResourceType:
    return store.registry.versions_of(*rt.storage)[0]


def to_storage(rt: ResourceType, namespace: str | None, obj: dict) -> dict:
    """An events.k8s.io/v1 body, checked against its URL, as the stored core/v1 Event."""
    obj = json.loads(dumps(obj))
    check_identity(rt, namespace, obj)
    return event_to_core(obj)


def create(store, rt: ResourceType, namespace: str | None, obj: dict, *, dry_run: bool) -> dict:
    return view(rt, store.create(storage_rt(store, rt), namespace, to_storage(rt, namespace, obj),
                                 dry_run=dry_run))


def update(store, rt: ResourceType, namespace: str | None, name: str, obj: dict, *, subresource, dry_run) -> dict:
    return view(rt, store.update(storage_rt(store, rt), namespace, name, to_storage(rt, namespace, obj),
                                 subresource=subresource, dry_run=dry_run))


def delete(store, rt: ResourceType, namespace: str | None, name: str, **kw) -> dict:
    return view(rt, store.delete(storage_rt(store, rt), namespace, name, **kw))


def patch(store, rt, namespace, name, patch_type, body, field_manager, dry_run) -> dict:
    """PATCH through a view (events.k8s.io/v1): patch the object as served, store it converted back."""
    with store.lock:
        namespaces.check_namespace(store.storage, rt, namespace)
        entry = store.storage.bucket(rt).get(store.storage.key(rt, namespace, name))
        if patch_type == patchmod.APPLY:
            patchmod.require_field_manager(field_manager)
        if entry is None:
            if patch_type != patchmod.APPLY or not isinstance(body, dict):
                raise errors.not_found(rt, name)
            body.setdefault("metadata", {})["name"] = name
            return store.create(rt, namespace, body, dry_run=dry_run)
        current = view(rt, json.loads(entry[1]))
        new = patchmod.apply_patch(current, patch_type, body, custom=False)
        if not isinstance(new, dict):
            raise ApiError(422, "the patched object is not a JSON object", "Invalid")
        return store.update(rt, namespace, name, new, dry_run=dry_run)
