"""The wire format shared by kubesim's routes: JSON bodies and Status errors, request bodies, and what a
Kubernetes API path addresses (`Target`) and which kube verb a request is."""
from __future__ import annotations

import json
from dataclasses import dataclass

import yaml
from aiohttp import web

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.gojson import go_json

JSON = "application/json"
TRUE = ("true", "True", "1")


def body_bytes(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def response(data: bytes | dict, status: int = 200) -> web.Response:
    if not isinstance(data, bytes):
        data = body_bytes(data)
    return web.Response(body=data, status=status, content_type=JSON)


def error(e: ApiError) -> web.Response:
    """A Status answer, byte for byte as kube-apiserver encodes it (gojson.py)."""
    if e.code != 429:
        return response(go_json(e.status()), e.code)
    # kube-apiserver's max-in-flight and priority-and-fairness filters say when to come back, in the
    # Retry-After header and the Status details
    e.details.setdefault("retryAfterSeconds", 1)
    resp = response(go_json(e.status()), e.code)
    resp.headers["Retry-After"] = str(e.details["retryAfterSeconds"])
    return resp


@dataclass
class Target:
    """What a Kubernetes API path addresses."""
    group: str
    version: str
    namespace: str | None
    plural: str
    name: str | None
    subresource: str | None


def parse_path(path: str) -> Target | None:
    """`/api/v1/...` or `/apis/<g>/<v>/...` → Target; None if it is not a resource path."""
    segs = [s for s in path.split("/") if s]
    if len(segs) >= 3 and segs[0] == "api":
        group, version, rest = "", segs[1], segs[2:]
    elif len(segs) >= 4 and segs[0] == "apis":
        group, version, rest = segs[1], segs[2], segs[3:]
    else:
        return None
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        ns, rest = rest[1], rest[2:]
    else:
        ns = None
    if len(rest) > 3:
        return None
    return Target(group, version, ns, rest[0], rest[1] if len(rest) > 1 else None,
                  rest[2] if len(rest) > 2 else None)


def kube_verb(method: str, target: Target | None, query) -> str:
    if target is None:
        return method.lower()
    if method == "GET":
        if target.name is None:
            return "watch" if query.get("watch") in TRUE else "list"
        return "get"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if target.name else "deletecollection"
    return method.lower()


BODY_TYPES = ("application/json", "application/yaml")   # the request bodies kubesim decodes (create, update)
BINARY_TYPES = ("application/vnd.kubernetes.protobuf", "application/cbor")


async def read_body(request: web.Request):
    """The request body as JSON (or YAML), None when empty; 400 BadRequest when it does not decode."""
    raw = await request.read()
    if not raw:
        return None
    ctype = request.content_type
    if ctype in BINARY_TYPES:
        # apiserver's negotiation (NegotiateInputSerializerForMediaType): a media type no serializer reads is 415,
        # naming those it accepts. kube-apiserver also reads protobuf for built-in kinds (not for custom
        # resources) and CBOR where enabled; kubesim reads neither, so such a body (kubectl >= 1.32's `create
        # rolebinding` sends protobuf) is refused plainly instead of failing to decode as JSON.
        raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                            f"{', '.join(BODY_TYPES)}", "UnsupportedMediaType")
    if "yaml" in ctype:
        try:
            return yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ApiError(400, f"error decoding YAML: {e}", "BadRequest") from None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise ApiError(400, f"error decoding request body: {e}", "BadRequest") from None
