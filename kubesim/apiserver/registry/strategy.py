"""Per-kind rules kube-apiserver applies to every write of a built-in kind before admission runs: the
conversion from the versioned object (Secret `stringData` folded into `data`), scheme defaults that apply
with or without the controllers (Secret `type`), and what the kind's strategy or its serialization puts in
status (a Service always has `status.loadBalancer`; a new Pod is Pending with its QoS class).

`prepare(rt, obj)` is called by `Store` on create, update and patch (after the patch is applied), and
`prepare_for_create(rt, obj)` on create before it, so both `kubernetes` clients and a bare API server
(`KubeSim(with_cluster=False)`) see the same objects. Upstream: each kind's
pkg/registry/<group>/<kind>/strategy.go (`PrepareForCreate`), pkg/apis/core/v1/conversion.go (Secret),
pkg/apis/core/v1/defaults.go.
"""
from __future__ import annotations

import base64
import binascii
import json

from kubesim.apimachinery import errors
from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.qos import qos_class
from kubesim.apiserver.registry import namespaces
from kubesim.apiserver.registry.objectmeta import has_status_subresource

# kinds whose status a create may carry (a kubelet registers its Node with status)
_STATUS_ON_CREATE = {("", "nodes")}


def _bad_request(rt, detail: str) -> ApiError:
    return ApiError(400, f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {detail}',
                    "BadRequest")


def _prepare_secret(rt, obj: dict) -> None:
    """The v1 → internal Secret conversion: each `stringData` entry is written into `data` (base64, and it
    wins over a `data` entry of the same key); `stringData` is never stored or returned. `type` defaults to
    Opaque. `data` values must be base64 (the JSON decoder of a []byte field refuses anything else)."""
    data = obj.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _bad_request(rt, "json: cannot unmarshal data: must be a map of base64 strings")
    for key, value in data.items():
        if not isinstance(value, str):
            raise _bad_request(rt, f"json: cannot unmarshal data[{key}]: must be a base64 string")
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _bad_request(rt, f"illegal base64 data in data[{key}]") from None
    string_data = obj.pop("stringData", None) or {}
    if not isinstance(string_data, dict):
        raise _bad_request(rt, "json: cannot unmarshal stringData: must be a map of strings")
    for key, value in string_data.items():
        if not isinstance(value, str):
            raise _bad_request(rt, f"json: cannot unmarshal {type(value).__name__} into Go struct field "
                                   f"Secret.stringData of type string (stringData[{key}])")
        data[key] = base64.b64encode(value.encode()).decode()
    if data or "data" in obj:
        obj["data"] = data
    if not obj.get("type"):
        obj["type"] = "Opaque"


def _prepare_service(obj: dict) -> None:
    """ServiceStatus.loadBalancer is not omitempty: every Service the server returns has it (`{}` until a
    load balancer controller fills it)."""
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    status.setdefault("loadBalancer", {})


def prepare(rt, obj: dict) -> None:
    """Normalize `obj` (in place) as the server does on every create/update/patch of `rt`."""
    if rt.group:
        return
    if rt.plural == "secrets":
        _prepare_secret(rt, obj)
    elif rt.plural == "services":
        _prepare_service(obj)


def prepare_for_create(rt, obj: dict) -> None:
    """A new object's server-owned status: kinds with a status subresource drop a client-sent status
    (`PrepareForCreate`: status is the controllers', written through /status); a PersistentVolume starts
    Pending, a Pod Pending with its QoS class; a Namespace gets its finalizer, phase and name label."""
    if has_status_subresource(rt) and (rt.group, rt.plural) not in _STATUS_ON_CREATE:
        obj.pop("status", None)
        if (rt.group, rt.plural) == ("", "persistentvolumes"):
            obj["status"] = {"phase": "Pending"}
    if rt.plural == "pods" and not rt.group:
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}
    if namespaces.is_namespace(rt):
        namespaces.prepare_for_create(obj)


def bind_pod(rt, pod: dict, node: str, now: str) -> dict:
    """POST pods/<name>/binding: the pod with spec.nodeName and PodScheduled=True; 409 if it is already bound
    or being deleted (pkg/registry/core/pod/storage/storage.go, BindingREST `assignPod`)."""
    name = pod["metadata"]["name"]
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound:
        raise errors.conflict(rt, name, f'pod {name} is already assigned to node "{bound}"')
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(rt, name, f"pod {name} is being deleted, cannot be assigned to a host")
    new = json.loads(json.dumps(pod))
    new.setdefault("spec", {})["nodeName"] = node
    status = new.setdefault("status", {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
    status["conditions"] = conds
    return new
