"""`/openapi/v2` and `/openapi/v3[/<group-version>]` on an ``ApiServer`` (documents built by openapi.py, cached
until the served custom resources change), as kube-apiserver serves them (k8s.io/kube-openapi/pkg/handler and
handler3): v2 as JSON or, when the Accept header asks for it, gnostic protobuf; v3 as an index of
group-versions whose URLs carry a hash, and one JSON document per group-version."""
from __future__ import annotations

import re
from hashlib import sha256

from aiohttp import web

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.gojson import go_json
from kubesim.apiserver.endpoints import openapi, openapi_proto

V2 = re.compile(r"^/openapi/v2$")
V3 = re.compile(r"^/openapi/v3(?:/(?P<gv>api/v1|apis/[^/]+/[^/]+))?$")
PROTO_ACCEPT = "application/com.github.proto-openapi.spec.v2"


class OpenApiDocs:
    def __init__(self, store):
        self.store = store
        self._key = None
        self._cache: dict = {}

    def _custom(self) -> list:
        custom = [rt for rt in self.store.registry.all() if rt.crd_schema is not None]
        key = tuple((rt.group, rt.version, rt.plural, id(rt.crd_schema)) for rt in custom)
        if key != self._key:
            self._key, self._cache = key, {}
        return custom

    def v2(self, proto: bool) -> bytes:
        custom = self._custom()
        k = ("v2", proto)
        if k not in self._cache:
            doc = openapi.v2_document(custom)
            self._cache[k] = openapi_proto.document(doc) if proto else go_json(doc)
        return self._cache[k]

    def _digest(self, group: str, version: str) -> str:
        crds = [(rt.plural, id(rt.crd_schema)) for rt in self._custom() if (rt.group, rt.version) == (group, version)]
        return sha256(repr((openapi.SCHEMA_VERSION, group, version, crds)).encode()).hexdigest()[:32].upper()

    def v3(self, gv: str | None) -> bytes:
        self._custom()
        k = ("v3", gv)
        if k not in self._cache:
            rts = self.store.registry.all()
            if gv is None:
                doc = openapi.v3_paths_index(rts, self._digest)
            else:
                parts = gv.split("/")
                group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
                if not any((rt.group, rt.version) == (group, version) for rt in rts):
                    raise ApiError(404, "the server could not find the requested resource", "NotFound")
                doc = openapi.v3_document(rts, group, version)
            self._cache[k] = go_json(doc)
        return self._cache[k]


def add_openapi_routes(api) -> None:
    docs = OpenApiDocs(api.store)

    async def v2(request, _match):
        proto = PROTO_ACCEPT in (request.headers.get("Accept") or "")
        body = docs.v2(proto)
        ctype = openapi.V2_PROTO if proto else "application/json"
        return web.Response(body=body, headers={"Content-Type": ctype})

    async def v3(request, match):
        return web.Response(body=docs.v3(match["gv"]), headers={"Content-Type": "application/json"})

    api.routes.append((V2, v2))
    api.routes.append((V3, v3))
