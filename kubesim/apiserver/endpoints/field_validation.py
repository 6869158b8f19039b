"""`fieldValidation=Strict`: a write naming a field its type does not have is refused, with kube-apiserver's
message, before anything is written (without it the field is dropped, as validation.py does).

The message is the decoder's: `Job in version "v1" cannot be handled as a Job: strict decoding error: unknown
field "spec.template.spec.containers[0].imagee"` (400 BadRequest) - apiserver/pkg/endpoints/handlers/rest.go
`transformDecodeError` around apimachinery/pkg/runtime/error.go `strictDecodingError` (the unknown fields
joined by ", ", paths as sigs.k8s.io/json reports them). Custom resources are checked against their CRD's
schema, fields under `x-kubernetes-preserve-unknown-fields` being known; metadata against ObjectMeta.
"""
from __future__ import annotations

import json

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.endpoints import openapi
from kubesim.apiserver.registry.kinds import ResourceType

_TEXT_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json",
                 "application/apply-patch+yaml", "application/json", "application/yaml")


def unknown_fields(obj, schema: dict, defs: dict, path: str = "", depth: int = 0) -> list[str]:
    """Paths of `obj`'s fields that `schema` (JSON-Schema form, `#/$defs/` refs) does not declare."""
    if depth > 64 or not isinstance(schema, dict):
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return unknown_fields(obj, defs.get(ref.rsplit("/", 1)[-1]) or {}, defs, path, depth + 1)
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-embedded-resource"):
        return []
    out: list[str] = []
    if isinstance(obj, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, value in obj.items():
            if key.startswith("$"):          # strategic merge patch directives ($patch, $setElementOrder/...)
                continue
            sub = f"{path}.{key}" if path else key
            if props is not None and key in props:
                out += unknown_fields(value, props[key], defs, sub, depth + 1)
            elif isinstance(extra, dict):
                out += unknown_fields(value, extra, defs, sub, depth + 1)
            elif props is not None and extra is None:
                out.append(sub)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(obj):
            out += unknown_fields(value, schema["items"], defs, f"{path}[{i}]", depth + 1)
    return out


def _schema_of(rt: ResourceType) -> dict | None:
    if rt.crd_schema is not None:
        schema = json.loads(json.dumps(rt.crd_schema))
        schema.setdefault("properties", {})["metadata"] = {"$ref": "#/$defs/" + openapi.META}
        schema["properties"].setdefault("apiVersion", {"type": "string"})
        schema["properties"].setdefault("kind", {"type": "string"})
        return schema
    kinds = [n for n, s in openapi.definitions().items()
             if {"group": rt.group, "version": rt.version, "kind": rt.kind} in (s.get("x-kubernetes-group-version-kind") or [])]
    return {"$ref": "#/$defs/" + kinds[0]} if kinds else None


def check_strict(rt: ResourceType, body, subresource: str | None = None) -> None:
    """Raise the real 400 when `body` (a decoded write, or a merge/apply patch) has unknown fields."""
    if not isinstance(body, dict) or subresource not in (None, "status"):
        return
    schema = _schema_of(rt)
    if schema is None:
        return
    found = unknown_fields(body, schema, openapi.definitions())
    if found:
        errs = ", ".join(f'unknown field "{p}"' for p in found)
        raise ApiError(400, f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                            f"strict decoding error: {errs}", "BadRequest")


async def check_request(request, rt: ResourceType, subresource: str | None) -> None:
    """The hook on POST/PUT/PATCH: only with `fieldValidation=Strict` and a body shaped like the object."""
    if request.query.get("fieldValidation") != "Strict" or request.method not in ("POST", "PUT", "PATCH"):
        return
    if request.method == "PATCH" and request.content_type not in _TEXT_PATCHES:
        return       # a JSON patch is a list of operations, checked once applied by validation
    from kubesim.apiserver.endpoints.wire import read_body
    check_strict(rt, await read_body(request), subresource)
