"""Patch types kube-apiserver accepts: strategic merge, JSON merge (RFC 7386), JSON patch (RFC 6902), apply.

Pure functions over JSON-shaped dicts; they never mutate their inputs.
"""
from __future__ import annotations

import copy
import json
import re

import yaml

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.mergekeys import PRIMITIVE_MERGE, merge_key
from kubesim.apiserver.registry import apply

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"
PATCH_TYPES = (STRATEGIC, MERGE, JSON_PATCH, APPLY)

def json_merge(target, patch):
    """RFC 7386: maps merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = json_merge(out.get(k), v)
    return out


def strategic_merge(target, patch):
    """Strategic merge patch: like JSON merge, but known lists merge by key, with `$patch` directives."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            out[field] = [x for x in out.get(field) or [] if x not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list):
            out[k] = _merge_list(k, out.get(k), v)
        elif isinstance(v, dict):
            merged = strategic_merge(out.get(k), v)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        else:
            out[k] = v
    if retain is not None:
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _merge_list(field, current, patch_list):
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch_list):
        return [copy.deepcopy(i) for i in patch_list if not (isinstance(i, dict) and "$patch" in i)]
    if field in PRIMITIVE_MERGE:
        out = list(current or [])
        for item in patch_list:
            if item not in out:
                out.append(item)
        return out
    key = merge_key(field, current, patch_list)
    if key is None or not all(isinstance(i, dict) for i in patch_list):
        return [copy.deepcopy(i) for i in patch_list]
    out = [copy.deepcopy(i) for i in current or []]
    for item in patch_list:
        if key not in item:
            raise ApiError(422, f"map: {item} does not contain declared merge key: {key}", "Invalid")
        idx = next((n for n, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(strategic_merge({}, item))
        else:
            out[idx] = strategic_merge(out[idx], item)
    return out


# ---- JSON patch ---------------------------------------------------------------------------------------

def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f'the server rejected our request due to an error in our request: '
                            f'JSON pointer must be empty or start with a "/": {path!r}', "Invalid")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _fail(msg: str) -> ApiError:
    return ApiError(422, msg, "Invalid")


_GO_INT = re.compile(r"[+-]?[0-9]+\Z")   # what Go's strconv.Atoi reads (no spaces, no `_`)


def _index(key: str, size: int, path: str, op: str) -> int:
    """An array index as kube-apiserver's JSON patch reads it (gopkg.in/evanphx/json-patch.v4, patch.go
    `partialArray.get/set/add/remove`, with its default `SupportNegativeIndices = true`): `strconv.Atoi`, and a
    negative index counts from the end, `-size` the first. `size` is the array's length, one more for add (so an
    add at -1 appends)."""
    if not _GO_INT.match(key):
        raise _fail(f"jsonpatch: {op} operation: value was not a proper array index: {key!r} in {path!r}")
    i = int(key)
    if i < 0 and i >= -size:
        i += size
    if not 0 <= i < size:
        raise _fail(f"jsonpatch: {op} operation: Unable to access invalid index: {int(key)}: invalid index "
                    f"referenced in {path!r}")
    return i


def _resolve(doc, parts, path):
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise _fail(f"jsonpatch: path {path!r} not found: missing key {p!r}")
            cur = cur[p]
        elif isinstance(cur, list):
            cur = cur[_index(p, len(cur), path, "get")]
        else:
            raise _fail(f"jsonpatch: path {path!r} not found")
    return cur


def _add(doc, parts, value, path):
    if not parts:
        return value
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            parent.insert(_index(last, len(parent) + 1, path, "add"), value)
    else:
        raise _fail(f"jsonpatch: add: path {path!r} not found")
    return doc


def _remove(doc, parts, path):
    if not parts:
        raise _fail("jsonpatch: remove: cannot remove the whole document")
    parent = _resolve(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _fail(f"jsonpatch: remove operation does not apply: doc is missing path: {path!r}")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), path, "remove"))
    raise _fail(f"jsonpatch: remove: path {path!r} not found")


def json_patch(doc, ops):
    """RFC 6902: add, remove, replace, move, copy, test. A failing op → 422 and nothing applied."""
    if not isinstance(ops, list):
        raise ApiError(400, "json patch must be a list of operations", "BadRequest")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _fail(f"jsonpatch: invalid operation {op!r}")
        kind, path = op["op"], op["path"]
        parts = _pointer(path)
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")), path)
        elif kind == "remove":
            _remove(doc, parts, path)
        elif kind == "replace":
            _resolve(doc, parts, path)    # must exist
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                parent = _resolve(doc, parts[:-1], path)
                key = parts[-1] if isinstance(parent, dict) else _index(parts[-1], len(parent), path, "replace")
                parent[key] = copy.deepcopy(op.get("value"))
        elif kind in ("move", "copy"):
            src = op.get("from")
            if src is None:
                raise _fail(f"jsonpatch: {kind} operation missing 'from'")
            src_parts = _pointer(src)
            value = _remove(doc, src_parts, src) if kind == "move" else copy.deepcopy(
                _resolve(doc, src_parts, src))
            doc = _add(doc, parts, value, path)
        elif kind == "test":
            if _resolve(doc, parts, path) != op.get("value"):
                raise _fail(f"jsonpatch: test operation does not apply: doc is missing path: {path!r} "
                            f"or value is not equal: {json.dumps(op.get('value'))}")
        else:
            raise _fail(f"jsonpatch: unexpected operation {kind!r}")
    return doc


def require_field_manager(field_manager: str | None) -> None:
    """An apply patch names its field manager (PatchOptions validation)."""
    if not field_manager:
        raise ApiError(400, "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required "
                            "value: is required for apply patch", "BadRequest")


def decode_body(patch_type: str, raw) -> object:
    """Body bytes/str (or an already-decoded object) → JSON value; apply bodies may be YAML."""
    if not isinstance(raw, (bytes, str)):
        return raw
    try:
        if patch_type == APPLY:
            return yaml.safe_load(raw)
        return json.loads(raw)
    except (ValueError, yaml.YAMLError) as e:
        raise ApiError(400, f"error decoding patch: {e}", "BadRequest") from None


def apply_patch(obj: dict, patch_type: str, body, *, custom: bool, manager: str | None = None,
                force: bool = False, now: str = "") -> dict:
    """The patched object. Custom resources have no strategic merge (415, as the real server)."""
    if patch_type == STRATEGIC:
        if custom:
            raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                                f"include: {JSON_PATCH}, {MERGE}, {APPLY}", "UnsupportedMediaType")
        if not isinstance(body, dict):
            raise ApiError(400, "strategic merge patch must be a JSON object", "BadRequest")
        return strategic_merge(obj, body)
    if patch_type == MERGE:
        return json_merge(obj, body)
    if patch_type == JSON_PATCH:
        return json_patch(obj, body)
    if patch_type == APPLY:
        if manager is not None:      # field ownership (kubesim/apiserver/registry/apply.py)
            if not isinstance(body, dict):
                raise ApiError(400, "apply patch must be a YAML or JSON object", "BadRequest")
            return apply.server_side_apply(obj, body, manager=manager, force=force, now=now,
                                           merge=json_merge if custom else strategic_merge)
        return server_side_apply(obj, body, custom=custom)
    raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                        f"{', '.join(PATCH_TYPES)}", "UnsupportedMediaType")


def server_side_apply(obj: dict | None, body: dict, *, custom: bool) -> dict:
    """Server-side apply without a field manager (views such as events.k8s.io): the applied configuration is
    merged into the live object (strategic merge for built-in kinds, JSON merge for custom resources), or is
    the new object if none exists. With a manager, ``apply_patch`` tracks ownership (kubesim/apiserver/registry/apply.py)."""
    if not isinstance(body, dict):
        raise ApiError(400, "apply patch must be a YAML or JSON object", "BadRequest")
    if obj is None:
        return copy.deepcopy(body)
    return json_merge(obj, body) if custom else strategic_merge(obj, body)
