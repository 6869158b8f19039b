"""Serialization and served views of stored objects: events.k8s.io/v1 Events are a view of the stored core/v1
Events (one storage, as on the real server), and a CRD's other served versions return the stored object with
their apiVersion (no conversion)."""
from __future__ import annotations

import json

from kubesim.apiserver.registry.kinds import ResourceType


def dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


_EVENT_COMMON = ("metadata", "reason", "type", "eventTime", "series", "action", "related", "reportingInstance")


def event_to_v1(e: dict) -> dict:
    """A stored core/v1 Event as events.k8s.io/v1 serves it."""
    out = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    out.update({k: e[k] for k in _EVENT_COMMON if e.get(k) is not None})
    for src, dst in (("involvedObject", "regarding"), ("message", "note"), ("source", "deprecatedSource"),
                     ("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp"),
                     ("count", "deprecatedCount")):
        if e.get(src) is not None:
            out[dst] = e[src]
    controller = e.get("reportingComponent") or (e.get("source") or {}).get("component")
    if controller:
        out["reportingController"] = controller
    return out


def event_to_core(e: dict) -> dict:
    """An events.k8s.io/v1 Event as it is stored (core/v1)."""
    out = {"apiVersion": "v1", "kind": "Event"}
    out.update({k: e[k] for k in _EVENT_COMMON if e.get(k) is not None})
    for src, dst in (("regarding", "involvedObject"), ("note", "message"), ("deprecatedSource", "source"),
                     ("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp"),
                     ("deprecatedCount", "count"), ("reportingController", "reportingComponent")):
        if e.get(src) is not None:
            out[dst] = e[src]
    out.setdefault("involvedObject", {})
    return out


def is_view(rt: ResourceType) -> bool:
    return rt.storage is not None


def view(rt: ResourceType, obj: dict | None) -> dict | None:
    """A stored object as `rt` serves it."""
    if obj is None:
        return None
    if is_view(rt):
        return event_to_v1(obj)
    if obj.get("apiVersion") != rt.api_version:     # another served version of a CRD: no conversion
        return {**obj, "apiVersion": rt.api_version}
    return obj


