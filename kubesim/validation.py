"""Admission (first plugin): defaulting and validation as kube-apiserver does them.

- Built-in kinds: API defaulting clients rely on (pod restartPolicy/dnsPolicy/schedulerName/..., container
  imagePullPolicy, Service clusterIP allocation, Job selector + controller-uid/job-name labels, Deployment
  and StatefulSet strategies), then the Kubernetes 1.31 OpenAPI schema shipped by `kubernetes-validate`
  (read offline, one compiled validator per kind), then the checks the schema lacks (container names and
  images, ports, resource quantities, requests <= limits, extended resources, immutable fields).
- Custom resources: structural pruning of fields the CRD's openAPIV3Schema does not declare (unless
  `x-kubernetes-preserve-unknown-fields`), then validation against that schema (`nullable`,
  `x-kubernetes-int-or-string`, `x-kubernetes-embedded-resource` respected).

Every write is validated whole, as the real server does; what makes that cheap is not skipping anything:
the built-in schemas are compiled per node into predicates (`schema_ok`; the causes come from the walk only
when an object is invalid), and a CR's errors per top-level field are kept by the field's content
(`CustomValidator`), so a status write does not re-check a spec it has seen.

Failures raise `Invalid` (422) whose causes name the field path and value, with the real messages.
"""
from __future__ import annotations

import copy
import json
import threading
from decimal import Decimal
from functools import lru_cache
from importlib.resources import files

import jsonschema
from referencing import Registry

from kubesim import names as names_mod
from kubesim.errors import ApiError
from kubesim.resources import qty
from kubesim.selectors import label_selector_from_dict

SCHEMA_VERSION = "v1.31.0-local"
_QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NATIVE_RESOURCES = {"cpu", "memory", "ephemeral-storage", "storage", "pods"}
POD_UPDATE_MSG = ("Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                  "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                  "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                  "to 1 if it was previously negative)")
# kinds whose spec.template is a PodTemplateSpec, and where the template sits
TEMPLATE_PATHS = {("batch", "jobs"): ("spec", "template"),
                  ("apps", "deployments"): ("spec", "template"),
                  ("apps", "replicasets"): ("spec", "template"),
                  ("apps", "statefulsets"): ("spec", "template"),
                  ("apps", "daemonsets"): ("spec", "template"),
                  ("batch", "cronjobs"): ("spec", "jobTemplate", "spec", "template")}


class Causes(list):
    """Collected field errors: (field, reason type, message)."""

    def required(self, field: str, detail: str = "") -> None:
        self.append((field, "FieldValueRequired", "Required value" + (f": {detail}" if detail else "")))

    def invalid(self, field: str, value, detail: str) -> None:
        self.append((field, "FieldValueInvalid", f"Invalid value: {_show(value)}: {detail}"))

    def unsupported(self, field: str, value, supported: list[str]) -> None:
        self.append((field, "FieldValueNotSupported", f"Unsupported value: {_show(value)}: supported values: "
                     + ", ".join(f'"{s}"' for s in supported)))

    def forbidden(self, field: str, detail: str) -> None:
        self.append((field, "FieldValueForbidden", detail))

    def duplicate(self, field: str, value) -> None:
        self.append((field, "FieldValueDuplicate", f"Duplicate value: {_show(value)}"))


def _show(value) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return json.dumps(value)


def qualified_kind(rt) -> str:
    """`Pod`, `Job.batch`, `Model.sedna.io`: how the real server names a kind in Invalid messages."""
    return rt.kind if not rt.group else f"{rt.kind}.{rt.group}"


def invalid_error(rt, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    parts = [f"{f}: {m}" for f, _t, m in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return ApiError(422, f'{qualified_kind(rt)} "{name}" is invalid: {text}', "Invalid", name=name,
                    group=rt.group, kind=rt.kind,
                    causes=[{"reason": t, "message": m, "field": f} for f, t, m in causes])


def field_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


# ---------------------------------------------------------------------------------------------------
# JSON schema validation (built-in kinds and custom resources)

def _schema_errors(validator, obj: dict, causes: Causes) -> None:
    for _key, found in sorted((_error_causes(err) for err in validator.iter_errors(obj)), key=lambda e: e[0]):
        causes.extend(found)


def _error_causes(err, prefix: tuple = ()) -> tuple[list[str], Causes]:
    """(sort key, causes) of one jsonschema error whose instance sits at ``prefix`` + its own path."""
    path = [*prefix, *err.absolute_path]
    causes = Causes()
    if err.validator == "required":
        missing = [k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance]
        for k in missing or [err.message.split("'")[1] if "'" in err.message else "?"]:
            causes.required(field_path(path + [k]))
    elif err.validator == "type":
        want = err.validator_value
        want = [t for t in want if t != "null"] if isinstance(want, list) else [want]
        where = field_path(path)
        causes.invalid(where, _type_name(err.instance),
                       f"{where} in body must be of type {' or '.join(want)}: \"{_type_name(err.instance)}\"")
    elif err.validator == "enum":
        causes.unsupported(field_path(path), err.instance, [str(v) for v in err.validator_value])
    elif err.validator in ("oneOf", "anyOf"):
        causes.invalid(field_path(path), err.instance, "must be a string or a number"
                       if _is_quantity_or_intstr(err.validator_value) else "does not match any allowed schema")
    elif err.validator == "additionalProperties" and err.validator_value is False:
        for k in sorted(set(err.instance) - set(err.schema.get("properties", {}))):
            causes.append((field_path(path + [k]), "FieldValueNotSupported", f'Unsupported value: "{k}"'))
    else:
        where = field_path(path)
        causes.invalid(where, err.instance, f"{where} in body {_describe(err)}")
    return list(map(str, path)), causes


def _type_name(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def _is_quantity_or_intstr(options) -> bool:
    return isinstance(options, list) and len(options) == 2


def _describe(err) -> str:
    v, val = err.validator, err.validator_value
    return {
        "minimum": f"should be greater than or equal to {val}",
        "maximum": f"should be less than or equal to {val}",
        "minLength": f"should be at least {val} chars long",
        "maxLength": f"may not be longer than {val}",
        "minItems": f"should have at least {val} items",
        "maxItems": f"must have at most {val} items",
        "pattern": f"should match '{val}'",
        "format": f"must be of type {val}",
    }.get(v, err.message)


def _inline_refs(node, defs: dict, done: dict):
    """Replace every `{"$ref": ".../$defs/X"}` by the (shared, memoized) inlined definition X."""
    if isinstance(node, list):
        return [_inline_refs(x, defs, done) for x in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and "#/$defs/" in ref:
        name = ref.split("#/$defs/", 1)[1]
        if name not in done:
            target: dict = {}
            done[name] = target          # placed before recursing: recursive definitions become cycles
            target.update(_inline_refs(defs[name], defs, done))
        return done[name]
    return {k: _inline_refs(v, defs, done) for k, v in node.items()}


_PY_TYPES = {"string": (str,), "object": (dict,), "array": (list,), "boolean": (bool,),
             "integer": (int,), "number": (int, float), "null": (type(None),)}


def _is_type(value, name: str) -> bool:
    if isinstance(value, bool):
        return name == "boolean"
    if name == "integer" and isinstance(value, float):
        return value.is_integer()     # as JSON schema: 1.0 is an integer
    return isinstance(value, _PY_TYPES.get(name, ()))


def builtin_errors(value, schema: dict, path: list, causes: Causes) -> None:
    """The keywords the Kubernetes OpenAPI schemas use (type, enum, required, properties,
    additionalProperties, items, oneOf of Quantity/IntOrString), checked by a direct walk: several
    times faster than a generic JSON-schema validator, with the same causes as `_schema_errors`."""
    t = schema.get("type")
    if t is not None:
        names = t if isinstance(t, list) else (t,)
        if not any(_is_type(value, n) for n in names):
            want = [n for n in names if n != "null"]
            where = field_path(path)
            causes.invalid(where, _type_name(value),
                           f"{where} in body must be of type {' or '.join(want)}: \"{_type_name(value)}\"")
            return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        causes.unsupported(field_path(path), value, [str(v) for v in enum])
    one_of = schema.get("oneOf")
    if one_of is not None and not any(builtin_ok(value, option) for option in one_of):
        causes.invalid(field_path(path), value, "must be a string or a number")
    if isinstance(value, dict):
        for k in schema.get("required") or ():
            if k not in value:
                causes.required(field_path(path + [k]))
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        if props is not None:
            for k, v in value.items():
                sub = props.get(k)
                if sub is not None:
                    builtin_errors(v, sub, path + [k], causes)
                elif isinstance(additional, dict):
                    builtin_errors(v, additional, path + [k], causes)
        elif isinstance(additional, dict):
            for k, v in value.items():
                builtin_errors(v, additional, path + [k], causes)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, v in enumerate(value):
                builtin_errors(v, items, path + [i], causes)


def builtin_ok(value, schema: dict) -> bool:
    probe = Causes()
    builtin_errors(value, schema, [], probe)
    return not probe


# id(schema node) -> (node, check): `schema_ok(node)(value)` is True exactly when `builtin_errors(value, node,
# ...)` finds nothing. Compiled once per node of the (cached, never freed) built-in schemas: a valid object,
# the usual case, is checked without building paths or causes; an invalid one is walked again by
# `builtin_errors` for its causes. A check is a predicate, or for a leaf whose type one isinstance decides
# (most of them: "string", ["string", "null"]...) the tuple of Python types, tested inline by its parent.
_OK: dict[int, tuple[dict, object]] = {}
_OK_LOCK = threading.RLock()


def schema_ok(schema: dict):
    check = _check_of(schema)
    return (lambda value: isinstance(value, check)) if type(check) is tuple else check


def _check_of(schema: dict):
    hit = _OK.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    with _OK_LOCK:
        hit = _OK.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        cell: list = []

        def cycle(value) -> bool:  # a reference back to this node (recursive types, e.g. JSONSchemaProps)
            check = cell[0]
            return isinstance(value, check) if type(check) is tuple else check(value)
        _OK[id(schema)] = (schema, cycle)
        check = _compile_ok(schema)
        cell.append(check)
        _OK[id(schema)] = (schema, check)
        return check


def _type_check(names: tuple):
    """`_is_type(value, n)` for any n in `names`: the tuple of Python types when a bool cannot be confused
    with an int (no "integer"/"number"), else a predicate."""
    if not {"integer", "number"} & set(names):
        return tuple(t for n in names for t in _PY_TYPES.get(n, ()))

    def ok(value) -> bool:
        if isinstance(value, bool):
            return "boolean" in names
        for n in names:
            if n == "integer" and isinstance(value, float):
                if value.is_integer():
                    return True
            elif isinstance(value, _PY_TYPES.get(n, ())):
                return True
        return False
    return ok


def _compile_ok(schema: dict):
    t = schema.get("type")
    type_ok = None if t is None else _type_check(tuple(t) if isinstance(t, list) else (t,))
    enum = schema.get("enum")
    one_of = schema.get("oneOf")
    options = None if one_of is None else [schema_ok(o) for o in one_of]
    required = tuple(schema.get("required") or ())
    props = schema.get("properties")
    additional = schema.get("additionalProperties")
    add_ok = _check_of(additional) if isinstance(additional, dict) else None
    prop_ok = None if props is None else {k: _check_of(v) for k, v in props.items()}
    items = schema.get("items")
    item_ok = _check_of(items) if isinstance(items, dict) else None
    checks_dict = bool(required) or prop_ok is not None or add_ok is not None

    if type_ok is not None and enum is None and options is None and not checks_dict and item_ok is None:
        return type_ok  # a leaf: string, integer, boolean...
    type_types = type_ok if type(type_ok) is tuple else None
    add_types = add_ok if type(add_ok) is tuple else None
    item_types = item_ok if type(item_ok) is tuple else None

    def ok(value) -> bool:
        if type_types is not None:
            if not isinstance(value, type_types):
                return False
        elif type_ok is not None and not type_ok(value):
            return False
        if enum is not None and value not in enum:
            return False
        if options is not None and not any(o(value) for o in options):
            return False
        if isinstance(value, dict):
            if checks_dict:
                for k in required:
                    if k not in value:
                        return False
                if prop_ok is not None:
                    for k, v in value.items():
                        sub = prop_ok.get(k)
                        if sub is not None:
                            if not (isinstance(v, sub) if type(sub) is tuple else sub(v)):
                                return False
                        elif add_ok is not None and not (
                                isinstance(v, add_types) if add_types is not None else add_ok(v)):
                            return False
                elif add_types is not None:
                    for v in value.values():
                        if not isinstance(v, add_types):
                            return False
                elif add_ok is not None:
                    for v in value.values():
                        if not add_ok(v):
                            return False
        elif isinstance(value, list) and item_ok is not None:
            if item_types is not None:
                for v in value:
                    if not isinstance(v, item_types):
                        return False
            else:
                for v in value:
                    if not item_ok(v):
                        return False
        return True
    return ok


class BuiltinSchemas:
    """Compiled validators for the 1.31 OpenAPI schema of each built-in kind, built on first use."""

    def __init__(self):
        self._base = files("kubernetes_validate").joinpath("kubernetes-json-schema", SCHEMA_VERSION)
        self._defs: dict | None = None
        self._validators: dict[tuple[str, str], object] = {}
        self._lock = threading.Lock()

    def validator(self, api_version: str, kind: str):
        key = (api_version, kind)
        v = self._validators.get(key)
        if v is None and key not in self._validators:
            with self._lock:
                v = self._validators[key] = self._build(api_version, kind)
        return v

    def _build(self, api_version: str, kind: str):
        group, _, version = api_version.rpartition("/")
        suffix = f"{group.split('.')[0]}-{version}" if group else version
        path = self._base.joinpath(f"{kind.lower()}-{suffix}.json")
        if not path.is_file():
            return None
        if self._defs is None:
            self._defs = json.loads(self._base.joinpath("_definitions.json").read_text())["$defs"]
        schema = _inline_refs(json.loads(path.read_text()), self._defs, {})
        # refs are inlined (shared sub-dicts, cycles allowed): no `referencing` lookups per validation
        return jsonschema.Draft202012Validator(schema, registry=Registry())


SCHEMAS = BuiltinSchemas()


# ---------------------------------------------------------------------------------------------------
# custom resources: structural schema -> jsonschema, pruning

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
            _schema_errors(self.whole, obj, causes)
            return
        found = [_error_causes(err) for err in self.root.iter_errors(obj)]
        for key, validator in self.parts.items():
            if key in obj:
                found += self._part(key, validator, obj[key])
        for _key, part in sorted(found, key=lambda e: e[0]):
            causes.extend(part)

    def _part(self, key: str, validator, value) -> list:
        if not isinstance(value, dict | list):
            return [_error_causes(err, (key,)) for err in validator.iter_errors(value)]
        memo_key = (key, json.dumps(value))
        with self._lock:
            hit = self._memo.pop(memo_key, None)
            if hit is not None:
                self._memo[memo_key] = hit  # most recently used last
                return hit
        found = [_error_causes(err, (key,)) for err in validator.iter_errors(value)]
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


# ---------------------------------------------------------------------------------------------------
# defaulting

def image_pull_policy(image: str) -> str:
    tail = (image or "").rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    tag = tail.rpartition(":")[2] if ":" in tail else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def default_container(c: dict) -> None:
    c.setdefault("imagePullPolicy", image_pull_policy(c.get("image", "")))
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    res = c.setdefault("resources", {})
    if isinstance(res, dict) and isinstance(res.get("limits"), dict):
        # requests default to limits for any resource that states only a limit (real API defaulting)
        requests = res.setdefault("requests", {})
        if isinstance(requests, dict):
            for k, v in res["limits"].items():
                requests.setdefault(k, v)
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def default_pod_spec(spec: dict, *, is_pod: bool) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                default_container(c)
    for v in spec.get("volumes") or []:
        for src in ("configMap", "secret"):
            if isinstance(v, dict) and isinstance(v.get(src), dict):
                v[src].setdefault("defaultMode", 420)
    if is_pod:
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        spec.setdefault("priority", 0)
        tolerations = spec.setdefault("tolerations", [])
        keys = {t.get("key") for t in tolerations if isinstance(t, dict)}
        for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if taint not in keys:   # the DefaultTolerationSeconds admission plugin
                tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300})


def _template(obj: dict, path: tuple[str, ...]) -> dict | None:
    cur = obj
    for p in path:
        cur = cur.get(p) if isinstance(cur, dict) else None
    return cur if isinstance(cur, dict) else None


class ClusterIPs:
    """The service-cluster-ip-range allocator: 10.96.0.0/16 (10.96.0.1 is the `kubernetes` Service)."""

    def __init__(self):
        self._next = 10
        self._used: set[str] = set()
        self._fresh: dict[str, bool] = {}
        self._port = 29999
        self._lock = threading.Lock()

    def allocate(self) -> str:
        with self._lock:
            while True:
                n, self._next = self._next, self._next + 1
                ip = f"10.96.{(n >> 8) & 255}.{n & 255}"
                if ip not in self._used:
                    self._used.add(ip)
                    self._fresh[ip] = True
                    return ip

    def node_port(self) -> int:
        """The service-node-port-range allocator (30000-32767), in order."""
        with self._lock:
            self._port += 1
            if self._port > 32767:
                self._port = 30000
            return self._port

    def allocated_here(self, ip: str) -> bool:
        """True once for an IP `allocate()` just handed out (so the caller does not reserve it twice)."""
        with self._lock:
            return self._fresh.pop(ip, False)

    def release(self, ip: str) -> None:
        """A deleted Service's address goes back to the range (the real allocator frees it with the Service)."""
        with self._lock:
            self._used.discard(ip)
            self._fresh.pop(ip, None)

    def reserve(self, ip: str) -> bool:
        with self._lock:
            if ip in self._used:
                return False
            self._used.add(ip)
            return True


def drop_unknown_fields(obj, schema: dict, seen_depth: int = 0) -> None:
    """What the real server does with fields its types do not have (fieldValidation unset = Warn):
    they are dropped, not stored. `schema` is an inlined built-in schema. In place."""
    if not isinstance(schema, dict):
        return
    drop = _dropper(schema)
    if drop is not None:
        drop(obj, seen_depth)


# id(schema node) -> (node, dropper or None when nothing below the node can be dropped); as `_OK`
_DROP: dict[int, tuple[dict, object]] = {}


def _dropper(schema: dict):
    hit = _DROP.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    with _OK_LOCK:
        hit = _DROP.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        cell: list = []
        _DROP[id(schema)] = (schema, lambda obj, depth: cell[0](obj, depth) if cell[0] is not None else None)
        fn = _compile_drop(schema)
        cell.append(fn)
        _DROP[id(schema)] = (schema, fn)
        return fn


def _compile_drop(schema: dict):
    props = schema.get("properties")
    additional = schema.get("additionalProperties")
    items = schema.get("items")
    if props is not None:
        keep_unknown = additional is not None or bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        subs = {k: _dropper(v) if isinstance(v, dict) else None for k, v in props.items()}

        def drop_props(obj, depth: int) -> None:
            if depth > 64:
                return
            if isinstance(obj, dict):
                for k in list(obj):
                    if k in subs:
                        sub = subs[k]
                        if sub is not None:
                            sub(obj[k], depth + 1)
                    elif not keep_unknown:
                        del obj[k]
            elif isinstance(obj, list) and item is not None:
                for v in obj:
                    item(v, depth + 1)
        item = _dropper(items) if isinstance(items, dict) else None
        return drop_props
    add = _dropper(additional) if isinstance(additional, dict) else None
    item = _dropper(items) if isinstance(items, dict) else None
    if add is None and item is None:
        return None

    def drop_rest(obj, depth: int) -> None:
        if depth > 64:
            return
        if isinstance(obj, dict):
            if add is not None:
                for v in obj.values():
                    add(v, depth + 1)
        elif isinstance(obj, list) and item is not None:
            for v in obj:
                item(v, depth + 1)
    return drop_rest


def default_object(rt, obj: dict, old: dict | None, ips: ClusterIPs) -> None:
    kind = (rt.group, rt.plural)
    spec = obj.get("spec")
    if kind == ("", "pods") and isinstance(spec, dict):
        default_pod_spec(spec, is_pod=True)
        return
    if kind in TEMPLATE_PATHS and isinstance(spec, dict):
        tmpl = _template(obj, TEMPLATE_PATHS[kind])
        if tmpl is not None and isinstance(tmpl.get("spec"), dict):
            default_pod_spec(tmpl["spec"], is_pod=False)
    if kind == ("batch", "jobs") and isinstance(spec, dict):
        _default_job(obj, spec, old)
    elif kind == ("apps", "deployments") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("strategy", {"type": "RollingUpdate"})
        if spec["strategy"].get("type", "RollingUpdate") == "RollingUpdate":
            spec["strategy"].setdefault("type", "RollingUpdate")
            ru = spec["strategy"].setdefault("rollingUpdate", {})
            ru.setdefault("maxUnavailable", "25%")
            ru.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    elif kind == ("apps", "replicasets") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
    elif kind == ("apps", "statefulsets") and isinstance(spec, dict):
        spec.setdefault("replicas", 1)
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
        for t in spec.get("volumeClaimTemplates") or []:
            if isinstance(t, dict):
                t.setdefault("apiVersion", "v1")
                t.setdefault("kind", "PersistentVolumeClaim")
                t.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    elif kind == ("", "services") and isinstance(spec, dict):
        _default_service(spec, old, ips)
    elif kind == ("", "persistentvolumeclaims") and isinstance(spec, dict):
        spec.setdefault("volumeMode", "Filesystem")
        if old is None:
            obj["status"] = {"phase": "Pending"}


def _default_job(obj: dict, spec: dict, old: dict | None) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    if old is None and not spec.get("manualSelector"):
        uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
        labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                  "controller-uid": uid, "job-name": name}
        if "selector" not in spec:
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmpl = spec.get("template")
        if isinstance(tmpl, dict):
            md = tmpl.setdefault("metadata", {}) or {}
            tmpl["metadata"] = md
            md["labels"] = {**(md.get("labels") or {}), **labels}


def _default_service(spec: dict, old: dict | None, ips: ClusterIPs) -> None:
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    for p in spec.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
            if "port" in p:
                p.setdefault("targetPort", p["port"])
    if spec["type"] == "ExternalName":
        return
    spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    if old is not None:
        old_ip = (old.get("spec") or {}).get("clusterIP")
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_ip
            spec["clusterIPs"] = (old.get("spec") or {}).get("clusterIPs") or [old_ip]
        return
    if not spec.get("clusterIP"):
        spec["clusterIP"] = ips.allocate()
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    if spec["clusterIP"] == "None":
        spec["clusterIPs"] = ["None"]
    if spec["type"] in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        for p in spec.get("ports") or []:
            if isinstance(p, dict) and not p.get("nodePort"):
                p["nodePort"] = ips.node_port()


# ---------------------------------------------------------------------------------------------------
# checks the schema does not make

def _quantity(causes: Causes, where: str, value) -> Decimal | None:
    try:
        q = qty(value)
    except ValueError:
        causes.invalid(where, value, _QUANTITY_MSG)
        return None
    if q < 0:
        causes.invalid(where, value, "must be greater than or equal to 0")
        return None
    return q


def check_container(c: dict, where: str, causes: Causes, names: set[str]) -> None:
    name = c.get("name")
    if not name:
        causes.required(f"{where}.name")
    elif not isinstance(name, str) or names_mod.dns_label_error(name):
        causes.invalid(f"{where}.name", name, names_mod.DNS_LABEL_MSG)
    elif name in names:
        causes.duplicate(f"{where}.name", name)
    else:
        names.add(name)
    if not c.get("image"):
        causes.required(f"{where}.image")
    port_names: set[str] = set()
    for i, p in enumerate(c.get("ports") or []):
        if not isinstance(p, dict):
            continue
        pw = f"{where}.ports[{i}]"
        cp = p.get("containerPort")
        if cp is None:
            causes.required(f"{pw}.containerPort")
        elif isinstance(cp, int) and not 1 <= cp <= 65535:
            causes.invalid(f"{pw}.containerPort", cp, "must be between 1 and 65535, inclusive")
        pn = p.get("name")
        if pn:
            if err := names_mod.port_name_error(pn):
                causes.invalid(f"{pw}.name", pn, err)
            elif pn in port_names:
                causes.duplicate(f"{pw}.name", pn)
            port_names.add(pn)
    res = c.get("resources") or {}
    if not isinstance(res, dict):
        return
    amounts: dict[str, dict[str, Decimal]] = {"limits": {}, "requests": {}}
    for kind in ("limits", "requests"):
        for r, v in (res.get(kind) or {}).items():
            q = _quantity(causes, f"{where}.resources.{kind}[{r}]", v)
            if q is not None:
                amounts[kind][r] = q
    for r, req in amounts["requests"].items():
        lim = amounts["limits"].get(r)
        extended = r not in NATIVE_RESOURCES and "/" in r and not r.startswith("hugepages-")
        if extended:
            if lim is None:
                causes.required(f"{where}.resources.limits", "Limit must be set for non overcommitable resources")
            elif lim != req:
                causes.invalid(f"{where}.resources.requests", res["requests"][r],
                               f"must be equal to {r} limit of {res['limits'][r]}")
            if req != req.to_integral_value():
                causes.invalid(f"{where}.resources.requests[{r}]", res["requests"][r], "must be an integer")
        elif lim is not None and req > lim:
            causes.invalid(f"{where}.resources.requests", res["requests"][r],
                           f"must be less than or equal to {r} limit of {res['limits'][r]}")
    for r, lim in amounts["limits"].items():
        if r not in NATIVE_RESOURCES and "/" in r and lim != lim.to_integral_value():
            causes.invalid(f"{where}.resources.limits[{r}]", res["limits"][r], "must be an integer")


def check_pod_spec(spec, where: str, causes: Causes) -> None:
    if not isinstance(spec, dict):
        causes.required(where)
        return
    containers = spec.get("containers")
    if not containers:
        causes.required(f"{where}.containers")
    names: set[str] = set()
    for key in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(key) or []):
            if isinstance(c, dict):
                check_container(c, f"{where}.{key}[{i}]", causes, names)
    policy = spec.get("restartPolicy")
    if policy not in (None, "Always", "OnFailure", "Never"):
        causes.unsupported(f"{where}.restartPolicy", policy, ["Always", "OnFailure", "Never"])
    ads = spec.get("activeDeadlineSeconds")
    if isinstance(ads, int) and ads <= 0:
        causes.invalid(f"{where}.activeDeadlineSeconds", ads, "must be between 1 and 2147483647, inclusive")
    for i, t in enumerate(spec.get("tolerations") or []):
        if isinstance(t, dict):
            op = t.get("operator") or "Equal"
            if op not in ("Equal", "Exists"):
                causes.unsupported(f"{where}.tolerations[{i}].operator", op, ["Equal", "Exists"])
            elif op == "Exists" and t.get("value"):
                causes.invalid(f"{where}.tolerations[{i}].operator", t.get("value"),
                               "value must be empty when `operator` is 'Exists'")
            elif op == "Equal" and not t.get("key"):
                causes.invalid(f"{where}.tolerations[{i}].operator", op,
                               "operator must be Exists when `key` is empty, which means \"match all values "
                               "and all keys\"")


def check_script_annotations(md: dict, where: str, causes: Causes) -> None:
    """kubesim's test API (`kubesim.io/*` annotations, INTERNALS.md) is checked like any field."""
    ann = (md or {}).get("annotations") or {}
    for key, kind in (("duration", float), ("exit-code", int), ("log-lines", int)):
        value = ann.get(f"kubesim.io/{key}")
        if value in (None, ""):
            continue
        try:
            ok = kind(value) >= 0 and (key != "exit-code" or int(value) <= 255)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            causes.invalid(f"{where}.annotations[kubesim.io/{key}]", value,
                           "must be a non-negative " + ("number of seconds" if kind is float else
                                                        "integer" + (" <= 255" if key == "exit-code" else "")))


_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "In", "NotIn")


def _check_selector(selector: dict, labels: dict, where: str, causes: Causes) -> None:
    """An apps/v1 selector: known operators, not empty, and it selects the template's labels."""
    for i, e in enumerate(selector.get("matchExpressions") or []):
        op = e.get("operator") if isinstance(e, dict) else None
        if op not in _SELECTOR_OPERATORS:
            causes.unsupported(f"spec.selector.matchExpressions[{i}].operator", op, list(_SELECTOR_OPERATORS))
            return
    sel = label_selector_from_dict(selector)
    if sel.empty or not sel.matches(labels):
        causes.invalid(f"{where}.metadata.labels", labels, "`selector` does not match template `labels`")


def _check_config_keys(obj: dict, causes: Causes) -> None:
    """Secret and ConfigMap `data`/`binaryData` keys must be config keys (they become file names)."""
    for f in ("data", "binaryData"):
        entries = obj.get(f)
        for k in entries if isinstance(entries, dict) else ():
            err = names_mod.config_key_error(k)
            if err:
                causes.invalid(f"{f}[{k}]", k, err)


def check_object(rt, obj: dict, old: dict | None, causes: Causes) -> None:
    kind = (rt.group, rt.plural)
    if kind in (("", "secrets"), ("", "configmaps")):
        _check_config_keys(obj, causes)
        return
    if kind == ("", "pods"):
        check_script_annotations(obj.get("metadata"), "metadata", causes)
        check_pod_spec(obj.get("spec"), "spec", causes)
        if old is not None:
            _check_pod_update(obj, old, causes)
        return
    if kind in TEMPLATE_PATHS:
        path = TEMPLATE_PATHS[kind]
        tmpl = _template(obj, path)
        where = ".".join(path)
        if tmpl is None:
            causes.required(where)
        else:
            check_script_annotations(tmpl.get("metadata"), f"{where}.metadata", causes)
            check_pod_spec(tmpl.get("spec"), f"{where}.spec", causes)
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            selector = (obj.get("spec") or {}).get("selector")
            if kind[0] == "apps":
                if not selector:
                    causes.required("spec.selector")
                else:
                    _check_selector(selector, labels, where, causes)
            if kind == ("batch", "jobs"):
                policy = (tmpl.get("spec") or {}).get("restartPolicy")
                if policy not in ("OnFailure", "Never"):
                    causes.unsupported(f"{where}.spec.restartPolicy", policy, ["OnFailure", "Never"])
    spec = obj.get("spec") or {}
    old_spec = (old or {}).get("spec") or {}
    for where, amounts in _quantity_maps(kind, spec):
        for r, v in (amounts or {}).items() if isinstance(amounts, dict) else ():
            _quantity(causes, f"{where}[{r}]", v)
    if kind == ("batch", "jobs"):
        for f in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
            v = spec.get(f)
            if isinstance(v, int) and v < (1 if f == "activeDeadlineSeconds" else 0):
                causes.invalid(f"spec.{f}", v, "must be greater than or equal to "
                               + ("1" if f == "activeDeadlineSeconds" else "0"))
        if old is not None:
            for f in ("selector", "completionMode"):
                if spec.get(f) != old_spec.get(f):
                    causes.invalid(f"spec.{f}", spec.get(f), "field is immutable")
            if _job_template_changed(spec, old_spec, (old.get("status") or {}).get("startTime")):
                causes.invalid("spec.template", spec.get("template"), "field is immutable")
    elif kind in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
        if isinstance(spec.get("replicas"), int) and spec["replicas"] < 0:
            causes.invalid("spec.replicas", spec["replicas"], "must be greater than or equal to 0")
        if old is not None and spec.get("selector") != old_spec.get("selector"):
            causes.invalid("spec.selector", spec.get("selector"), "field is immutable")
    elif kind == ("", "services"):
        if old is not None and old_spec.get("clusterIP") and spec.get("clusterIP") != old_spec.get("clusterIP"):
            causes.invalid("spec.clusterIP", spec.get("clusterIP"), "field is immutable")
    elif kind in (("rbac.authorization.k8s.io", "rolebindings"), ("rbac.authorization.k8s.io", "clusterrolebindings")):
        # ValidateRoleBindingUpdate: a binding's role is fixed for its life (delete and recreate to change it)
        if old is not None and obj.get("roleRef") != old.get("roleRef"):
            causes.invalid("roleRef", obj.get("roleRef"), "cannot change roleRef")
    elif kind == ("apiextensions.k8s.io", "customresourcedefinitions"):
        for i, ver in enumerate(spec.get("versions") or []):
            if isinstance(ver, dict) and not ((ver.get("schema") or {}).get("openAPIV3Schema")):
                causes.required(f"spec.versions[{i}].schema.openAPIV3Schema", "schemas are required")


# pod template fields a suspended Job that never started may change (JobMutableNodeSchedulingDirectives, GA
# in 1.27: pkg/registry/batch/job/strategy.go AllowMutableSchedulingDirectives) - what Kueue sets on start
_SCHEDULING_DIRECTIVES = (("spec", "nodeSelector"), ("spec", "tolerations"), ("spec", "affinity"),
                          ("spec", "schedulingGates"), ("metadata", "labels"), ("metadata", "annotations"))


def _job_template_changed(spec: dict, old_spec: dict, started: str | None) -> bool:
    new, old = spec.get("template"), old_spec.get("template")
    if new == old:
        return False
    if not old_spec.get("suspend") or started or not isinstance(new, dict) or not isinstance(old, dict):
        return True
    new, old = copy.deepcopy(new), copy.deepcopy(old)
    for part, field in _SCHEDULING_DIRECTIVES:
        for t in (new, old):
            (t.get(part) or {}).pop(field, None)
    return new != old


def _quantity_maps(kind: tuple[str, str], spec: dict):
    """(field path, {resource: quantity}) of the kinds whose quantities the schema leaves unchecked."""
    if kind == ("", "resourcequotas"):
        yield "spec.hard", spec.get("hard")
    elif kind == ("", "persistentvolumeclaims"):
        res = spec.get("resources") or {}
        yield "spec.resources.requests", res.get("requests")
        yield "spec.resources.limits", res.get("limits")
    elif kind == ("", "limitranges"):
        for i, item in enumerate(spec.get("limits") or []):
            if isinstance(item, dict):
                for f in ("default", "defaultRequest", "max", "min", "maxLimitRequestRatio"):
                    yield f"spec.limits[{i}].{f}", item.get(f)


def _check_pod_update(new: dict, old: dict, causes: Causes) -> None:
    """A pod's spec is immutable but for images, activeDeadlineSeconds, added tolerations (and binding)."""
    ns, os_ = copy.deepcopy(new.get("spec") or {}), old.get("spec") or {}
    for key in ("containers", "initContainers"):
        for c_new, c_old in zip(ns.get(key) or [], os_.get(key) or [], strict=False):
            if isinstance(c_new, dict) and isinstance(c_old, dict) and "image" in c_old:
                c_new["image"] = c_old["image"]
    old_ads, new_ads = os_.get("activeDeadlineSeconds"), ns.get("activeDeadlineSeconds")
    if new_ads is not None and (old_ads is None or new_ads <= old_ads):
        ns["activeDeadlineSeconds"] = old_ads
        if old_ads is None:
            ns.pop("activeDeadlineSeconds")
    old_tol = os_.get("tolerations") or []
    new_tol = ns.get("tolerations") or []
    if all(t in new_tol for t in old_tol):
        if old_tol:
            ns["tolerations"] = old_tol
        else:
            ns.pop("tolerations", None)
    if os_.get("schedulingGates"):
        # a gated pod: gates may be removed (not added) and nodeSelector entries added (PodSchedulingReadiness,
        # pkg/apis/core/validation ValidatePodUpdate with AllowMutableSchedulingDirectives)
        new_gates, old_gates = ns.get("schedulingGates") or [], os_.get("schedulingGates") or []
        if all(g in old_gates for g in new_gates):
            ns["schedulingGates"] = old_gates
        old_sel, new_sel = os_.get("nodeSelector") or {}, ns.get("nodeSelector") or {}
        if all(new_sel.get(k) == v for k, v in old_sel.items()):
            if old_sel:
                ns["nodeSelector"] = old_sel
            else:
                ns.pop("nodeSelector", None)
    if not os_.get("nodeName") and ns.get("nodeName"):
        ns.pop("nodeName")     # binding (kubesim's scheduler binds with an update)
    if ns != os_:
        causes.forbidden("spec", POD_UPDATE_MSG)


class Validator:
    """The admission plugin: default, validate, and refuse with 422 Invalid before anything is written."""

    def __init__(self, store):
        self.store = store
        self.ips = ClusterIPs()
        svc = store.registry.lookup("", "v1", "services")
        for s in store.list(svc)[0]:
            ip = (s.get("spec") or {}).get("clusterIP")
            if ip and ip != "None":
                self.ips.reserve(ip)

    def __call__(self, req) -> None:
        if req.operation == "DELETE" and req.rt.plural == "services" and not req.rt.group and not req.dry_run \
                and not (req.old or {}).get("metadata", {}).get("finalizers"):
            ip = ((req.old or {}).get("spec") or {}).get("clusterIP")
            if ip and ip != "None":
                self.ips.release(ip)
        if req.operation == "DELETE" or req.obj is None:
            return
        rt, obj, old = req.rt, req.obj, req.old
        name = (obj.get("metadata") or {}).get("name", "")
        causes = Causes()
        if rt.crd_schema is not None:
            if req.subresource not in (None, "status"):
                return
            validate_custom(rt, obj, causes)
        else:
            if req.subresource is not None:
                return    # status writes come from controllers; spec rules do not apply
            validator = SCHEMAS.validator(rt.api_version, rt.kind)
            if validator is not None:
                drop_unknown_fields(obj, validator.schema)
            default_object(rt, obj, old, self.ips)
            if validator is not None and not schema_ok(validator.schema)(obj):
                builtin_errors(obj, validator.schema, [], causes)
            if not causes:
                check_object(rt, obj, old, causes)
            if not causes and (rt.group, rt.plural) == ("", "services") and old is None and not req.dry_run:
                ip = obj["spec"].get("clusterIP")
                if ip and ip != "None" and not self.ips.allocated_here(ip) and not self.ips.reserve(ip):
                    causes.invalid("spec.clusterIPs", [ip], f"failed to allocate IP {ip}: provided IP is "
                                   "already allocated")
        if causes:
            raise invalid_error(rt, name, causes)
