"""Server-side apply with field ownership (`metadata.managedFields`), as kube-apiserver does it.

What the real server does, and kubesim with it:
* Each apply records, under its field manager (operation `Apply`), the set of fields its configuration
  names (`fieldsType: FieldsV1`): map keys as `f:<key>`, items of keyed lists (containers by name, ...) as
  `k:{"<key>":<value>}`, atomic lists and scalars as leaves. Identity (apiVersion, kind, metadata.name,
  namespace, ...) and `status` are not owned by an apply to the main resource.
* A field another manager owns may be applied with the same value (the ownership is then shared); applying a
  different value is a conflict: 409 `Apply failed with N conflict(s): conflict with "<manager>": .spec.x`,
  unless `force=true`, which moves the fields to the applier.
* A field the manager applied before and no longer applies is removed from the object, unless another
  manager still owns it (then only this manager's ownership goes).
* Applying the same configuration again changes nothing: no new resourceVersion, no managedFields change.

Simplifications: only `Apply` operations are tracked (a create/update/merge-patch keeps the managedFields
it is given, or the stored ones when it sends none, and records no `Update` entry of its own); list types
come from kubesim's patch-merge-key table (`mergekeys.MERGE_KEYS`), not from the OpenAPI schema.
"""
from __future__ import annotations

import copy
import json

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.mergekeys import merge_key

Path = tuple[str, ...]
_MISSING = object()
_IDENTITY = {"apiVersion", "kind", "status"}
_META_IDENTITY = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                  "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"}


def _item_token(key: str, item: dict) -> str:
    return "k:" + json.dumps({key: item[key]}, sort_keys=True, separators=(",", ":"))


def _list_key(field: str, items: list) -> str | None:
    key = merge_key(field, items)
    if key and items and all(isinstance(i, dict) and key in i for i in items):
        return key
    return None


def _collect(value, field: str, prefix: Path, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _collect(v, k, prefix + (f"f:{k}",), out)
        return
    key = _list_key(field, value) if isinstance(value, list) else None
    if key:
        for item in value:
            path = prefix + (_item_token(key, item),)
            out.add(path)
            _collect(item, field, path, out)
        return
    out.add(prefix)


def fields_of(config: dict) -> set[Path]:
    """The field paths an applied configuration names (what its manager will own)."""
    out: set[Path] = set()
    for k, v in config.items():
        if k in _IDENTITY:
            continue
        if k == "metadata" and isinstance(v, dict):
            for mk, mv in v.items():
                if mk not in _META_IDENTITY:
                    _collect(mv, mk, ("f:metadata", f"f:{mk}"), out)
            continue
        _collect(v, k, (f"f:{k}",), out)
    return out


def _step(node, token: str):
    if token.startswith("f:"):
        return node.get(token[2:], _MISSING) if isinstance(node, dict) else _MISSING
    want = json.loads(token[2:])
    if isinstance(node, list):
        for item in node:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in want.items()):
                return item
    return _MISSING


def value_at(obj, path: Path):
    node = obj
    for token in path:
        node = _step(node, token)
        if node is _MISSING:
            return _MISSING
    return node


def _remove(obj: dict, path: Path) -> None:
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        item = _step(parent, last)
        if item is not _MISSING:
            parent.remove(item)
    # an emptied map or list the manager created goes too (as the real server prunes empty parents)
    if len(path) > 2 and parent in ({}, []):
        _remove(obj, path[:-1])


def _drop(obj: dict, paths: set[Path], kept: set[Path]) -> None:
    """Remove `paths` (outermost first: a keyed item goes whole, found by its key before its fields go),
    except those with a descendant another manager still owns."""
    removed: list[Path] = []
    for path in sorted(paths, key=len):
        if any(path[:len(r)] == r for r in removed):
            continue
        if any(len(k) > len(path) and k[:len(path)] == path for k in kept):
            continue
        if value_at(obj, path) is not _MISSING:
            _remove(obj, path)
        removed.append(path)


def path_text(path: Path) -> str:
    text = ""
    for token in path:
        if token.startswith("f:"):
            text += "." + token[2:]
        else:
            key, value = next(iter(json.loads(token[2:]).items()))
            text += f"[{key}={json.dumps(value)}]"
    return text


# ---- FieldsV1 encoding ------------------------------------------------------------------------------

def encode(paths: set[Path]) -> dict:
    root: dict = {}
    for path in sorted(paths):
        node = root
        for token in path:
            node = node.setdefault(token, {})
    for path in paths:               # a path that is also a parent of others is marked with "."
        node = value_at_tree(root, path)
        if node:
            node["."] = {}
    return root


def value_at_tree(tree: dict, path: Path) -> dict:
    for token in path:
        tree = tree[token]
    return tree


def decode(tree: dict, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for token, child in (tree or {}).items():
        if token == ".":
            continue
        path = prefix + (token,)
        if not child or "." in child:
            out.add(path)
        out |= decode(child, path)
    return out


# ---- apply ------------------------------------------------------------------------------------------

def _entries(obj: dict) -> list[dict]:
    return copy.deepcopy(obj.get("metadata", {}).get("managedFields") or [])


def _conflicts(live: dict, config: dict, applied: set[Path], entries: list[dict], manager: str):
    found: dict[int, list[Path]] = {}
    for i, entry in enumerate(entries):
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            continue
        for path in sorted(decode(entry.get("fieldsV1") or {}) & applied):
            if value_at(live, path) != value_at(config, path):
                found.setdefault(i, []).append(path)
    return found


def _conflict_error(found: dict[int, list[Path]], entries: list[dict]) -> ApiError:
    lines = []
    for i, paths in found.items():
        entry = entries[i]
        who = f'"{entry.get("manager")}"' + (f" using {entry.get('apiVersion')}"
                                               if entry.get("operation") == "Update" else "")
        lines += [(f"conflict with {who}: {path_text(p)}", path_text(p)) for p in paths]
    n = len(lines)
    text = lines[0][0] if n == 1 else "\n".join("- " + msg for msg, _ in lines)
    return ApiError(409, f"Apply failed with {n} conflict{'s' if n > 1 else ''}: {text}", "Conflict",
                    causes=[{"reason": "FieldManagerConflict", "message": msg, "field": field}
                            for msg, field in lines])


def managed_entry(manager: str, api_version: str, paths: set[Path], now: str) -> dict:
    return {"manager": manager, "operation": "Apply", "apiVersion": api_version, "time": now,
            "fieldsType": "FieldsV1", "fieldsV1": encode(paths)}


def on_create(config: dict, manager: str, now: str) -> dict:
    """The object an apply creates: the configuration plus the manager's ownership of its fields."""
    obj = copy.deepcopy(config)
    obj.setdefault("metadata", {})["managedFields"] = [
        managed_entry(manager, obj.get("apiVersion", ""), fields_of(config), now)]
    return obj


def server_side_apply(live: dict, config: dict, *, manager: str, force: bool, now: str, merge) -> dict:
    """The object after `manager` applies `config` to `live`; `merge(live, config)` is the kind's merge
    (strategic for built-in kinds, JSON merge for custom resources)."""
    applied = fields_of(config)
    entries = _entries(live)
    found = _conflicts(live, config, applied, entries, manager)
    if found and not force:
        raise _conflict_error(found, entries)
    mine = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"), None)
    before = decode(mine.get("fieldsV1") or {}) if mine else set()
    others: set[Path] = set()
    for i, entry in enumerate(entries):
        if entry is mine:
            continue
        owned = decode(entry.get("fieldsV1") or {})
        if i in found:                     # forced: the conflicting fields move to this manager
            owned -= set(found[i])
            entry["fieldsV1"] = encode(owned)
        others |= owned
    bare = copy.deepcopy(live)
    bare.get("metadata", {}).pop("managedFields", None)
    new = merge(bare, config)
    _drop(new, before - applied - others, others)
    kept = [e for e in entries if e is not mine and decode(e.get("fieldsV1") or {})]
    if mine is not None and before == applied and new == bare:
        entry = mine                                   # nothing changed: keep the entry (and its time)
    else:
        entry = managed_entry(manager, config.get("apiVersion") or live.get("apiVersion", ""), applied, now)
    position = entries.index(mine) if mine is not None else len(kept)
    new.setdefault("metadata", {})["managedFields"] = kept[:position] + [entry] + kept[position:]
    return new
