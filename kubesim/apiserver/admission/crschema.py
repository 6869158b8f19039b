"""Custom resources against their CRD's structural openAPIV3Schema: pruning of undeclared fields (unless
`x-kubernetes-preserve-unknown-fields`), then validation (`nullable`, `x-kubernetes-int-or-string`,
`x-kubernetes-embedded-resource` respected), with a CR's errors kept per top-level field by content.

Upstream: k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning/algorithm.go (`Prune`) and
pkg/apiserver/validation/validation.go (`NewSchemaValidator`, the OpenAPI v3 → JSON schema conversion).
"""
from __future__ import annotations

import json
import threading
from functools import lru_cache

import jsonschema

from kubesim.apimachinery.fielderrors import Causes
from kubesim.apiserver.admission.builtin_schema import error_causes, schema_errors


def _to_jsonschema(s):
    """An OpenAPI v3 structural schema as Draft 4 JSON schema (nullable, int-or-string, embedded)."""
    if isinstance(s, list):
        return [_to_jsonschema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out = {}
    for k, v in s.items():
        if k in ("properties", "patternProperties", "definitions"):
            out[k] = {pk: _to_jsonschema(pv) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties", "not") and isinstance(v, dict):
            out[k] = _to_jsonschema(v)
        elif k in ("allOf", "anyOf", "oneOf"):
            out[k] = _to_jsonschema(v)
        elif k.startswith("x-kubernetes-") or k in ("nullable", "default", "example", "externalDocs",
                                                    "description", "format"):
            continue
        else:
            out[k] = v
    if s.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if s.get("x-kubernetes-embedded-resource"):
        out["required"] = sorted(set(out.get("required", [])) | {"apiVersion", "kind"})
    if s.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else list(out["type"]) + ["null"]
    return out


def prune(obj, schema: dict | None, *, root: bool = False):
    """Drop fields the structural schema does not declare (a real server's pruning). In place."""
    if schema is None:
        return obj
    if isinstance(obj, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        embedded = schema.get("x-kubernetes-embedded-resource") or root
        for k in list(obj):
            if embedded and k in ("apiVersion", "kind", "metadata"):
                if k == "metadata" and not root and isinstance(obj[k], dict):
                    keep = ("name", "generateName", "namespace", "labels", "annotations", "finalizers",
                            "ownerReferences", "uid")
                    for mk in [mk for mk in obj[k] if mk not in keep]:
                        del obj[k][mk]
                continue
            if props is not None and k in props:
                prune(obj[k], props[k])
            elif isinstance(additional, dict):
                prune(obj[k], additional)
            elif not preserve and additional is not True:
                del obj[k]
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            prune(item, schema["items"])
    return obj


# root keywords whose errors do not involve the values of the properties: with only these at the root, a
# custom resource's errors are the root's plus, per top-level field, that field's value's against its schema
_SPLIT_ROOT = frozenset({"type", "properties", "required", "additionalProperties", "minProperties",
                         "maxProperties"})
_MEMO_SIZE = 2048


class CustomValidator:
    """A CRD schema's validator. Each top-level field's errors are a function of its value alone, so they are
    kept by content (the JSON of the value): a status write re-validates the status, while the unchanged
    spec (often hundreds of KB of schema: an embedded PodTemplateSpec) is looked up. The causes are exactly
    those of validating the whole object (same fields, messages and order)."""

    def __init__(self, schema_json: str):
        schema = _to_jsonschema(json.loads(schema_json))
        # metadata is validated by the API server itself (ObjectMeta), not by the CRD's schema
        schema.get("properties", {}).pop("metadata", None)
        self.whole = jsonschema.Draft4Validator(schema)
        props = schema.get("properties")
        self.parts: dict | None = None
        if isinstance(props, dict) and set(schema) <= _SPLIT_ROOT and '"$ref"' not in schema_json \
                and not isinstance(schema.get("additionalProperties"), dict):
            self.root = jsonschema.Draft4Validator({**schema, "properties": {k: {} for k in props}})
            self.parts = {k: jsonschema.Draft4Validator(v) for k, v in props.items()}
        self._memo: dict[tuple[str, str], list] = {}
        self._lock = threading.Lock()

    def errors(self, obj: dict, causes: Causes) -> None:
        if self.parts is None or not isinstance(obj, dict):
            schema_errors(self.whole, obj, causes)
            return
        found = [error_causes(err) for err in self.root.iter_errors(obj)]
        for key, validator in self.parts.items():
            if key in obj:
                found += self._part(key, validator, obj[key])
        for _key, part in sorted(found, key=lambda e: e[0]):
            causes.extend(part)

    def _part(self, key: str, validator, value) -> list:
        if not isinstance(value, dict | list):
            return [error_causes(err, (key,)) for err in validator.iter_errors(value)]
        memo_key = (key, json.dumps(value))
        with self._lock:
            hit = self._memo.pop(memo_key, None)
            if hit is not None:
                self._memo[memo_key] = hit  # most recently used last
                return hit
        found = [error_causes(err, (key,)) for err in validator.iter_errors(value)]
        with self._lock:
            self._memo[memo_key] = found
            while len(self._memo) > _MEMO_SIZE:
                del self._memo[next(iter(self._memo))]
        return found


@lru_cache(maxsize=256)
def _cr_validator(schema_json: str) -> CustomValidator:
    return CustomValidator(schema_json)


# id(schema) -> (schema, validator): a CRD's schema object is reused for every write of its CRs, and
# serialising it for the lru_cache key cost milliseconds per write (a CRD embedding a PodTemplateSpec)
_BY_SCHEMA: dict[int, tuple[dict, CustomValidator]] = {}


def _validator_for(schema: dict) -> CustomValidator:
    hit = _BY_SCHEMA.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    validator = _cr_validator(json.dumps(schema, sort_keys=True))
    if len(_BY_SCHEMA) >= 256:
        _BY_SCHEMA.clear()
    _BY_SCHEMA[id(schema)] = (schema, validator)  # holding the schema keeps its id from being reused
    return validator


def validate_custom(rt, obj: dict, causes: Causes) -> None:
    schema = rt.crd_schema
    if not schema:
        return     # (apiextensions/v1 refuses CRDs without a schema; nothing to check against)
    prune(obj, schema, root=True)
    _validator_for(schema).errors(obj, causes)
