"""The API's OpenAPI documents, built from the schemas kubesim validates with, as kube-apiserver publishes them:
`/openapi/v2` (JSON, or protobuf when asked: what kubectl <= 1.26 reads for `apply` validation and `explain`)
and `/openapi/v3` (an index of group-versions, each `/openapi/v3/apis/<group>/<version>` a document: what
newer kubectl reads for `explain` and to learn that the server does `fieldValidation`).

The built-in definitions are the Kubernetes 1.31 schema `kubernetes-validate` ships (`_definitions.json`, a
JSON-Schema rendering of the upstream swagger) turned back into swagger form: `$ref`s into `#/definitions/`
(v2) or `#/components/schemas/` (v3), `type: [T, "null"]` as `type: T`, IntOrString as `type: string, format:
int-or-string` and Quantity as `type: string` (as in the upstream api/openapi-spec/swagger.json). Each served
custom resource version contributes its CRD's `openAPIV3Schema`, named as the real server names it
(`io.sedna.v1alpha1.FederatedLearningJob`: reversed group, version, kind) with `metadata` an ObjectMeta and its
`x-kubernetes-group-version-kind` (apiextensions-apiserver/pkg/controller/openapi/builder/builder.go).
"""
from __future__ import annotations

import json
from functools import lru_cache
from hashlib import sha512
from importlib.resources import files

from kubesim.apiserver.registry.kinds import ResourceType

SCHEMA_VERSION = "v1.31.0-local"   # the kubernetes-validate schema validation.py uses
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
# the Content-Type of the protobuf answer: kube-openapi's handler.go answers the old `...spec.v2@v1.0+protobuf`
# Accept with this spelling (`@` is not valid in a media type: Go's mime.ParseMediaType refuses it)
V2_PROTO = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


@lru_cache(maxsize=1)
def definitions() -> dict[str, dict]:
    """The built-in definitions (JSON-Schema form, `#/$defs/` refs), read once."""
    base = files("kubernetes_validate").joinpath("kubernetes-json-schema", SCHEMA_VERSION)
    return json.loads(base.joinpath("_definitions.json").read_text())["$defs"]


def field_doc(definition: str, field: str) -> str:
    """A field's description (the SwaggerDoc string kube-apiserver's printers use)."""
    return (((definitions().get(definition) or {}).get("properties") or {}).get(field) or {}).get("description", "")


def compact_json(value) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def to_swagger(schema, prefix: str):
    """One JSON-Schema node in swagger form, refs pointing under `prefix` (`#/definitions/`)."""
    if isinstance(schema, list):
        return [to_swagger(s, prefix) for s in schema]
    if not isinstance(schema, dict):
        return schema
    one_of = schema.get("oneOf")
    if one_of and {t for s in one_of for t in (s.get("type") or [])} >= {"string", "integer"}:
        return {"type": "string", "format": "int-or-string"}
    if one_of and {t for s in one_of for t in (s.get("type") or [])} >= {"string", "number"}:
        return {"type": "string"}
    out = {}
    for key, value in schema.items():
        if key == "$ref":
            out[key] = prefix + value.rsplit("/", 1)[-1]
        elif key == "type":
            types = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
            if types:
                out[key] = types[0]
        elif key == "properties":
            out[key] = {name: to_swagger(sub, prefix) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = to_swagger(value, prefix) if isinstance(value, (dict, list)) else value
        elif key == "nullable":
            continue
        else:
            out[key] = value
    return out


def crd_definition_name(rt: ResourceType) -> str:
    return ".".join(reversed(rt.group.split("."))) + f".{rt.version}.{rt.kind}"


def _crd_schema(rt: ResourceType) -> dict:
    schema = json.loads(json.dumps(rt.crd_schema or {"type": "object"}))
    schema.setdefault("type", "object")
    props = schema.setdefault("properties", {})
    props["metadata"] = {"$ref": "#/$defs/" + META, "description": "Standard object's metadata."}
    props.setdefault("apiVersion", {"type": "string", "description": field_doc(
        "io.k8s.api.core.v1.Pod", "apiVersion")})
    props.setdefault("kind", {"type": "string", "description": field_doc("io.k8s.api.core.v1.Pod", "kind")})
    schema["x-kubernetes-group-version-kind"] = [{"group": rt.group, "kind": rt.kind, "version": rt.version}]
    return _strip_crd_only(schema)


def _strip_crd_only(schema):
    """What a CRD schema has and the published swagger does not: nullable, int-or-string as a type."""
    if isinstance(schema, list):
        return [_strip_crd_only(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: (_strip_crd_only(v) if k != "properties" else {n: _strip_crd_only(s) for n, s in v.items()})
           for k, v in schema.items() if k != "nullable"}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("anyOf", None)
        out.update(type="string", format="int-or-string")
    return out


def all_definitions(custom: list[ResourceType]) -> dict[str, dict]:
    """Built-in definitions plus the served custom resource versions' (JSON-Schema form)."""
    defs = dict(definitions())
    for rt in custom:
        if rt.crd_schema is not None:
            defs[crd_definition_name(rt)] = _crd_schema(rt)
    return defs


def v2_document(custom: list[ResourceType]) -> dict:
    defs = all_definitions(custom)
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": SCHEMA_VERSION.split("-")[0]},
            "paths": {}, "definitions": {n: to_swagger(s, "#/definitions/") for n, s in sorted(defs.items())}}


def _refs(schema, out: set) -> None:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            out.add(ref.rsplit("/", 1)[-1])
        for key, value in schema.items():
            if key == "properties":
                for sub in value.values():
                    _refs(sub, out)
            elif isinstance(value, (dict, list)):
                _refs(value, out)
    elif isinstance(schema, list):
        for s in schema:
            _refs(s, out)


def _closure(defs: dict[str, dict], roots: list[str]) -> list[str]:
    seen: set[str] = set()
    todo = [r for r in roots if r in defs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        found: set[str] = set()
        _refs(defs[name], found)
        todo.extend(f for f in found if f in defs and f not in seen)
    return sorted(seen)


def _kind_definitions(defs: dict[str, dict], group: str, version: str) -> dict[str, str]:
    """kind -> definition name, from the definitions' x-kubernetes-group-version-kind."""
    out = {}
    for name, schema in defs.items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            if gvk.get("group", "") == group and gvk.get("version") == version:
                out[gvk.get("kind")] = name
    return out


def v3_paths_index(rts: list[ResourceType], digest) -> dict:
    """`/openapi/v3`: one entry per served group-version, its URL carrying the document's hash."""
    gvs = sorted({(rt.group, rt.version) for rt in rts})
    paths = {}
    for group, version in gvs:
        key = f"api/{version}" if not group else f"apis/{group}/{version}"
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest(group, version)}"}
    return {"paths": paths}


def v3_document(rts: list[ResourceType], group: str, version: str) -> dict:
    """The OpenAPI 3 document of one group-version: its resources' paths (PATCH declares `fieldValidation`,
    which kubectl looks for before sending `fieldValidation=Strict`: cli-runtime query_param_verifier_v3.go)
    and the schemas they reach."""
    served = [rt for rt in rts if rt.group == group and rt.version == version]
    defs = all_definitions([rt for rt in rts if rt.crd_schema is not None])
    kinds = _kind_definitions(defs, group, version)
    roots = [kinds[rt.kind] for rt in served if rt.kind in kinds]
    names = _closure(defs, roots + ["io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"])
    schemas = {n: to_swagger(defs[n], "#/components/schemas/") for n in names}
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    paths = {}
    for rt in served:
        if rt.kind not in kinds:
            continue
        item = f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced else \
            f"{base}/{rt.plural}/{{name}}"
        paths[item] = {"patch": _operation(rt, kinds[rt.kind], "patch"), "get": _operation(rt, kinds[rt.kind], "get")}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": SCHEMA_VERSION.split("-")[0]},
            "paths": paths, "components": {"schemas": schemas}}


def _operation(rt: ResourceType, definition: str, verb: str) -> dict:
    params = [{"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
              {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
    if verb == "patch":
        params.append({"name": "fieldValidation", "in": "query", "description": (
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing "
            "unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict"),
            "schema": {"type": "string", "uniqueItems": True}})
    ref = {"$ref": "#/components/schemas/" + definition}
    return {"operationId": f"{verb}{rt.kind}", "parameters": params,
            "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}},
            "x-kubernetes-action": verb,
            "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind}}


def etag(doc: dict) -> str:
    return sha512(compact_json(doc).encode()).hexdigest()[:32].upper()
