"""The Endpoints controller: for each Service with a selector, the IPs of the pods it selects (ready ones in
`addresses`, others in `notReadyAddresses`) with the Service's target ports.

`ServicePodsController` is what it shares with the EndpointSlice controller (workloads/endpointslice.py): the
Services with a selector, indexed so that a pod event wakes only the Services that may select it, and the
pods a Service selects (both controllers watch Services and Pods alike upstream).

Upstream: pkg/controller/endpoint/endpoints_controller.go (`syncService`), pkg/api/v1/endpoints.
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller, ControllerContext, Key, key_of
from kubesim.controllers.workloads.owned import (
    active,
    pod_ready,
)


class ServicePodsController(Controller):
    """A controller keyed by Service, woken by its Service and by the pods its selector may match."""

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.svc_rt = cluster.rt("services")
        self.pods_rt = cluster.rt("pods")
        # the Services with a selector, filed under one of its key=value pairs: a pod event looks up only the
        # Services one of its labels could satisfy, not every Service of the namespace
        self._by_pair: dict[tuple, dict[Key, dict]] = {}     # (ns, key, value) -> {service key: selector}
        self._pair_of: dict[Key, tuple] = {}

    def reset(self) -> None:
        self._by_pair.clear()
        self._pair_of.clear()

    def _file_service(self, key: Key, selector: dict | None) -> None:
        pair = self._pair_of.pop(key, None)
        if pair is not None:
            bucket = self._by_pair[pair]
            bucket.pop(key, None)
            if not bucket:
                del self._by_pair[pair]
        if selector:
            pair = (key[0], *min(selector.items()))
            self._pair_of[key] = pair
            self._by_pair.setdefault(pair, {})[key] = selector

    def on_event(self, event_type, rt, obj, old):
        kind = (rt.group, rt.plural)
        if kind == ("", "services"):
            key = key_of(obj)
            self._file_service(key, None if event_type == "DELETED" else (obj.get("spec") or {}).get("selector"))
            self.queue.add(key)
        elif kind == ("", "pods"):
            ns = obj["metadata"]["namespace"]
            for labels in (obj["metadata"].get("labels") or {}, ((old or {}).get("metadata") or {}).get("labels")):
                for pair in (labels or {}).items():
                    for key, sel in self._by_pair.get((ns, *pair), {}).items():
                        if all(labels.get(k) == v for k, v in sel.items()):
                            self.queue.add(key)

    def selected_pods(self, svc: dict) -> list[dict]:
        """The pods of the Service's namespace its selector matches, by name."""
        selector = (svc.get("spec") or {}).get("selector") or {}
        return sorted(self.cluster.cache.select(self.pods_rt, svc["metadata"]["namespace"], selector),
                      key=lambda p: p["metadata"]["name"])


class EndpointsController(ServicePodsController):
    """Endpoints for Services with a selector: the IPs of matching pods (ready ones in `addresses`,
    others in `notReadyAddresses`), with the Service's target ports — as the endpoints controller does."""

    name = "endpoints-controller"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.ep_rt = cluster.rt("endpoints")

    def reconcile(self, key: Key) -> None:
        ns, name = key
        svc = self.cluster.cache.get(self.svc_rt, ns, name)
        if svc is None:      # the Service is gone: so are its Endpoints
            try:
                self.store.delete(self.ep_rt, ns, name)
            except ApiError as e:
                if e.code != 404:
                    raise
            return
        selector = (svc.get("spec") or {}).get("selector")
        if not selector:
            return           # a Service without a selector: its Endpoints are the user's
        ready, not_ready = [], []
        for p in self.selected_pods(svc):
            ip = (p.get("status") or {}).get("podIP")
            if not ip or not active(p):
                continue
            addr = {"ip": ip, "nodeName": p["spec"].get("nodeName"),
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"],
                                  "uid": p["metadata"]["uid"]}}
            (ready if pod_ready(p) else not_ready).append(addr)
        ports = [{k: v for k, v in {"name": sp.get("name"), "protocol": sp.get("protocol", "TCP"),
                                    "port": sp.get("targetPort") if isinstance(sp.get("targetPort"), int)
                                    else sp.get("port")}.items() if v is not None}
                 for sp in svc["spec"].get("ports") or []]
        subset = {"ports": ports} if ports else {}
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        subsets = [subset] if (ready or not_ready) else []
        desired = {"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": name, "namespace": ns, "labels": dict(svc["metadata"].get("labels") or {})},
                   "subsets": subsets}
        try:
            current = self.store.get(self.ep_rt, ns, name)
        except ApiError as e:
            if e.code != 404:
                raise
            try:
                self.store.create(self.ep_rt, ns, desired)
            except ApiError as err:
                if err.code == 409:
                    self.queue.add_rate_limited(key)
                elif err.code not in (403, 404):
                    raise
            return
        if ((current.get("subsets") or []) == subsets
                and (current["metadata"].get("labels") or {}) == desired["metadata"]["labels"]):
            return
        current["subsets"] = subsets
        current["metadata"]["labels"] = desired["metadata"]["labels"]
        try:
            self.store.update(self.ep_rt, ns, name, current)
        except ApiError as e:
            if e.code == 409:
                self.queue.add_rate_limited(key)
            elif e.code != 404:
                raise
