"""`Storage`: kubesim's etcd. Every object under one key per storage resource and name, with its serialized
JSON (so reads serialize nothing), one resourceVersion counter for all of them, and a label index that
answers `k=v` selector requirements without a scan.

Upstream: k8s.io/apiserver/pkg/storage/etcd3/store.go (one revision counter for the whole keyspace, an
object's resourceVersion is the revision of its last write) and pkg/storage/selection_predicate.go (a list
filtered by label and field selectors). No locking here: `Store` (the generic registry) holds its lock
around every call.
"""
from __future__ import annotations

import base64
import itertools
import json

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from kubesim.apiserver.registry.kinds import ResourceType
from kubesim.apiserver.registry.views import dumps, is_view, view
from kubesim.apiserver.storage.watch import Event

Key = tuple[str, str]                 # (namespace or "", name)
Entry = tuple[dict, bytes]            # the stored object and its JSON


class Storage:
    def __init__(self) -> None:
        self._rv = itertools.count(1)
        self.current_rv = 0
        self.data: dict[tuple[str, str], dict[Key, Entry]] = {}
        # label index: storage key -> (label key, value) -> object keys (answers `k=v` selectors)
        self.labels: dict[tuple[str, str], dict[tuple[str, str], set]] = {}

    def reset(self) -> None:
        """Drop every object; the resourceVersion counter keeps going (a resumed watch gets 410)."""
        self.data = {}
        self.labels = {}

    def bucket(self, rt: ResourceType) -> dict[Key, Entry]:
        return self.data.setdefault(rt.storage_key, {})

    @staticmethod
    def key(rt: ResourceType, namespace: str | None, name: str) -> Key:
        return (namespace or "" if rt.namespaced else "", name)

    def commit(self, rt: ResourceType, key: Key, obj: dict | None, old: dict | None, etype: str) -> Event:
        """Stamp the next resourceVersion on `obj` (on `old` for a DELETED), store or remove it, and return the
        event: `ev.old` is the stored object it replaced (watch selectors use it, snapshots undo with it)."""
        rv = next(self._rv)
        self.current_rv = rv
        target = obj if obj is not None else old
        target["metadata"]["resourceVersion"] = str(rv)
        data = dumps(target)
        bucket = self.bucket(rt)
        before = bucket.get(key)
        self._index(rt.storage_key, key, before, obj)
        prev, prev_data = None, None
        if etype == "DELETED":
            bucket.pop(key, None)
            prev, prev_data = before if before else (old, None)
        else:
            bucket[key] = (obj, data)
            if etype == "MODIFIED":
                prev, prev_data = old, before[1] if before and before[0] is old else None
        if prev is not None and prev_data is None:
            prev_data = dumps(prev)
        return Event(rv, etype, rt.storage_key, key[0], key[1], data, prev_data, target, prev)

    def _index(self, skey, key: Key, before: Entry | None, after: dict | None) -> None:
        """Move `key` in the label index from the stored object's labels to the new object's."""
        index = self.labels.setdefault(skey, {})
        old_labels = (before[0]["metadata"].get("labels") or {}) if before else {}
        new_labels = (after["metadata"].get("labels") or {}) if after is not None else {}
        for pair in old_labels.items():
            if new_labels.get(pair[0]) != pair[1]:
                keys = index.get(pair)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[pair]
        for pair in new_labels.items():
            if old_labels.get(pair[0]) != pair[1]:
                index.setdefault(pair, set()).add(key)

    def select(self, rt: ResourceType, namespace, label_selector, field_selector,
               bucket: dict | None = None) -> list[tuple[Key, dict, bytes]]:
        """(key, object, JSON) of `rt` in `namespace` (None: all) matching both selectors, in key order;
        from `bucket` (a snapshot) when given."""
        label = label_selector if isinstance(label_selector, LabelSelector) else parse_label_selector(
            label_selector)
        field = field_selector if isinstance(field_selector, FieldSelector) else parse_field_selector(
            field_selector, rt)
        current = bucket is None
        bucket = self.bucket(rt) if bucket is None else bucket
        name = field.exact_name()
        pairs = label.equality_pairs() if current else []
        if name is not None and (namespace is not None or not rt.namespaced):
            e = bucket.get(self.key(rt, namespace, name))
            entries = [(self.key(rt, namespace, name), e)] if e else []
        elif pairs:      # the label index narrows the candidates; every requirement is still checked below
            index = self.labels.get(rt.storage_key, {})
            keys = set.intersection(*(index.get(p, set()) for p in pairs))
            entries = sorted((k, bucket[k]) for k in keys if namespace is None or k[0] == namespace)
        else:
            entries = sorted(bucket.items()) if namespace is None else sorted(
                (k, v) for k, v in bucket.items() if k[0] == namespace)
        out = []
        for key, (obj, data) in entries:
            if not label.empty and not label.matches(obj["metadata"].get("labels")):
                continue
            if not field.empty and not field.matches(view(rt, obj) if is_view(rt) else obj):
                continue
            out.append((key, obj, data))
        return out


def encode_continue(last_key: Key, rv: int) -> str:
    """A list page's continue token: the last key sent and the list's resourceVersion
    (k8s.io/apiserver/pkg/storage/continue.go `EncodeContinue`)."""
    return base64.urlsafe_b64encode(json.dumps({"k": list(last_key), "rv": rv}).encode()).decode()


def decode_continue(token: str) -> tuple[Key, int]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        return tuple(decoded["k"]), int(decoded["rv"])
    except Exception:
        raise ApiError(400, "continue key is not valid: illegal base64 data", "BadRequest") from None
