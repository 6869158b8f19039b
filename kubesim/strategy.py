"""Per-kind rules kube-apiserver applies to every write of a built-in kind before admission runs: the
conversion from the versioned object (Secret `stringData` folded into `data`), scheme defaults that apply
with or without the controllers (Secret `type`), and what the kind's strategy or its serialization puts in
status (a Service always has `status.loadBalancer`).

`prepare(rt, obj)` is called by `Store` on create, update and patch (after the patch is applied), so both
`kubernetes` clients and a bare API server (`KubeSim(with_cluster=False)`) see the same objects.
"""
from __future__ import annotations

import base64
import binascii

from kubesim.errors import ApiError


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
