"""Built-in kinds against their OpenAPI schema (Kubernetes 1.31, shipped offline by `kubernetes-validate`):
unknown fields dropped (`drop_unknown_fields`, what the real server does with fieldValidation unset), then
the schema checked. Each schema is compiled once per node into a predicate (`schema_ok`); the causes come
from the walk (`builtin_errors`) only when an object is invalid.

Upstream: k8s.io/kube-openapi/pkg/validation/validate (schema validation and its messages) and
k8s.io/apimachinery/pkg/runtime/serializer/json (unknown fields dropped on decode).
"""
from __future__ import annotations

import json
import threading
from importlib.resources import files

import jsonschema
from referencing import Registry

from kubesim.apimachinery.fielderrors import Causes, field_path

SCHEMA_VERSION = "v1.31.0-local"


def schema_errors(validator, obj: dict, causes: Causes) -> None:
    for _key, found in sorted((error_causes(err) for err in validator.iter_errors(obj)), key=lambda e: e[0]):
        causes.extend(found)


def error_causes(err, prefix: tuple = ()) -> tuple[list[str], Causes]:
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
    times faster than a generic JSON-schema validator, with the same causes as `schema_errors`."""
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
