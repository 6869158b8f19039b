"""Non-resource endpoints: /healthz, /readyz, /livez, /version, and API discovery (/api, /apis, the
APIGroup and APIResourceList documents built from the registry, CRD kinds included, and the create-only
review kinds of authorization.k8s.io and authentication.k8s.io, `registry.REVIEWS`).

Upstream: k8s.io/apiserver/pkg/endpoints/discovery (root.go, group.go, version.go) and
k8s.io/apiserver/pkg/server/healthz."""
from __future__ import annotations

from aiohttp import web

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.endpoints import metrics_api
from kubesim.apiserver.endpoints.wire import response
from kubesim.apiserver.registry.kinds import REVIEWS, ResourceType
from kubesim.apiserver.registry.store import Store

GIT_VERSION = "v1.31.0-kubesim"


def _resource_entries(rts: list[ResourceType]) -> list[dict]:
    out = []
    for rt in sorted(rts, key=lambda r: r.plural):
        entry = {"name": rt.plural, "singularName": rt.singular or rt.kind.lower(), "namespaced": rt.namespaced,
                 "kind": rt.kind, "verbs": list(rt.verbs)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        out.append(entry)
        for sub in sorted(rt.subresources):
            se = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                  "kind": rt.kind, "verbs": ["get", "patch", "update"]}
            if sub == "scale":
                se.update(group="autoscaling", version="v1", kind="Scale")
            elif sub == "log":
                se["verbs"] = ["get"]
            elif sub in ("binding", "eviction"):
                se["verbs"] = ["create"]
                se["kind"] = "Binding" if sub == "binding" else "Eviction"
            elif sub == "finalize":
                se["verbs"] = ["update"]
            elif sub == "token":
                se.update(group="authentication.k8s.io", version="v1", kind="TokenRequest", verbs=["create"])
            elif sub == "proxy":
                se.update(kind="NodeProxyOptions", verbs=["create", "delete", "get", "patch", "update"])
            out.append(se)
    return out


def served(store: Store) -> list[ResourceType]:
    """Every kind in discovery: the registry's, the create-only review kinds (no storage), and metrics-server's
    read-only metrics kinds while a kubelet samples usage (metrics_api.py)."""
    return store.registry.all() + list(REVIEWS) + list(metrics_api.served(store))


def _group_versions(store: Store) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rt in served(store):
        if rt.group:
            vs = groups.setdefault(rt.group, [])
            if rt.version not in vs:
                vs.append(rt.version)
    return groups


def _api_group(name: str, versions: list[str]) -> dict:
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": vs, "preferredVersion": vs[0]}


def simple_get(store: Store, path: str) -> web.Response | None:
    """Health, /version and discovery documents; None when `path` is none of them."""
    if path in ("/healthz", "/readyz", "/livez"):
        return web.Response(text="ok", content_type="text/plain")
    if path == "/version":
        return response({"major": "1", "minor": "31", "gitVersion": GIT_VERSION, "gitCommit": "kubesim",
                          "gitTreeState": "clean", "buildDate": "2024-08-13T00:00:00Z",
                          "goVersion": "go1.22.5", "compiler": "gc", "platform": "linux/amd64"})
    if path == "/api":
        return response({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
    if path == "/apis":
        return response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            _api_group(g, vs) for g, vs in sorted(_group_versions(store).items())]})
    segs = path.strip("/").split("/")
    if segs == ["api", "v1"]:
        return resource_list(store, "", "v1")
    if len(segs) == 2 and segs[0] == "apis":
        vs = _group_versions(store).get(segs[1])
        if not vs:
            raise ApiError(404, "the server could not find the requested resource", "NotFound")
        return response({"kind": "APIGroup", "apiVersion": "v1", **_api_group(segs[1], vs)})
    if len(segs) == 3 and segs[0] == "apis":
        return resource_list(store, segs[1], segs[2])
    return None

def resource_list(store: Store, group: str, version: str) -> web.Response:
    rts = [rt for rt in served(store) if rt.group == group and rt.version == version]
    if not rts:
        raise ApiError(404, "the server could not find the requested resource", "NotFound")
    gv = version if not group else f"{group}/{version}"
    return response({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                      "resources": _resource_entries(rts)})
