"""What the generic registry does to every object's identity and metadata before a write, whatever its kind.

Upstream: k8s.io/apiserver/pkg/registry/rest/create.go (`BeforeCreate`: the kind and namespace must match
the URL, `generateName`, ObjectMeta validation, `FillObjectMetaSystemFields`: uid, creationTimestamp) and
rest/update.go (`BeforeUpdate`: system fields kept from the stored object), with the status subresource's
rule from the kinds' strategies (`PrepareForUpdate`: the main resource cannot change status, `/status`
changes only status). Pure functions: the store passes in the clock's time and what is taken.
"""
from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable

from kubesim.apimachinery import errors, names
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.registry.kinds import ResourceType
from kubesim.apiserver.registry.views import dumps


def has_status_subresource(rt: ResourceType) -> bool:
    return "status" in rt.subresources


def spec_part(rt: ResourceType, obj: dict) -> dict:
    """What a generation bump looks at: everything but metadata (and status, if it is a subresource)."""
    skip = {"metadata", "kind", "apiVersion"}
    if has_status_subresource(rt):
        skip.add("status")
    return {k: v for k, v in obj.items() if k not in skip}


def check_identity(rt: ResourceType, namespace: str | None, obj: dict) -> None:
    """apiVersion, kind and namespace of a body against its URL (then set to the URL's)."""
    if not isinstance(obj, dict):
        raise ApiError(400, "the body of the request must be a JSON object", "BadRequest")
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version and api_version != rt.api_version and not (
            rt.is_custom and api_version.split("/")[0] == rt.group):
        raise ApiError(400, f"the API version in the data ({api_version}) does not match the expected "
                            f"API version ({rt.api_version})", "BadRequest")
    if kind and kind != rt.kind:
        raise ApiError(400, f"{kind} in version \"{rt.version}\" cannot be handled as a {rt.kind}: "
                            f"the kind in the data does not match the URL", "BadRequest")
    obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
    md = obj.get("metadata") or {}
    if rt.namespaced and md.get("namespace") and namespace and md["namespace"] != namespace:
        raise ApiError(400, "the namespace of the provided object does not match the namespace sent on "
                            "the request", "BadRequest")


def check_name(body_name, url_name: str) -> None:
    if body_name != url_name:
        raise ApiError(400, f"the name of the object ({body_name}) does not match the name on the URL "
                            f"({url_name})", "BadRequest")


def fill_for_create(rt: ResourceType, namespace: str | None, obj: dict, *, taken: Callable[[str], bool],
                    now: str) -> dict:
    """A new object's metadata: a name from `generateName` (one `taken` says is free), validated name and
    ObjectMeta, namespace, uid, creationTimestamp, generation 1, no server-owned fields from the client."""
    md = obj.setdefault("metadata", {}) or {}
    obj["metadata"] = md
    if not md.get("name"):
        prefix = md.get("generateName")
        if not prefix:
            raise errors.invalid(rt, "", [("metadata.name", "FieldValueRequired",
                                           "Required value: name or generateName is required")])
        prefix = prefix[:names.MAX_GENERATED_PREFIX]
        while True:
            name = prefix + "".join(random.choices(names.SAFE_ALPHABET, k=names.GENERATED_SUFFIX))
            if not taken(name):
                break
        md["name"] = name
    err = names.object_name_error(rt, md["name"])
    if err:
        raise errors.invalid(rt, md["name"], [("metadata.name", "FieldValueInvalid",
                                               f'Invalid value: "{md["name"]}": {err}')])
    causes = names.metadata_causes(md)
    if causes:
        raise errors.invalid(rt, md["name"], causes)
    if rt.namespaced:
        md["namespace"] = namespace
    else:
        md.pop("namespace", None)
    md["uid"] = str(uuid.uuid4())
    md["creationTimestamp"] = now
    md["generation"] = 1
    for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        md.pop(k, None)
    return md


def prepare_for_update(rt: ResourceType, old: dict, new: dict, subresource: str | None) -> dict:
    """Apply the status-subresource rules and server-owned metadata to an incoming object."""
    old_md = old["metadata"]
    if subresource == "binding":      # built by Store.bind: spec.nodeName and status only
        return new
    if subresource == "status":
        merged = json.loads(dumps(old))
        if "status" in new:
            merged["status"] = new["status"]
        else:
            merged.pop("status", None)
        return merged
    new = dict(new)
    md = dict(new.get("metadata") or {})
    if "managedFields" not in md and old_md.get("managedFields"):
        md["managedFields"] = old_md["managedFields"]   # a write without managedFields keeps them
    for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
              "generation", "namespace", "name"):
        if k in old_md:
            md[k] = old_md[k]
        else:
            md.pop(k, None)
    if old_md.get("deletionTimestamp") is None:
        md.pop("deletionTimestamp", None)
    new["metadata"] = md
    if has_status_subresource(rt):
        if "status" in old:
            new["status"] = json.loads(dumps(old["status"]))
        else:
            new.pop("status", None)
    return new
