"""The EndpointSlice controller: for each Service with a selector, discovery.k8s.io/v1 EndpointSlices of the
pods it selects, as kube-controller-manager's endpointslice-controller writes them.

Upstream: pkg/controller/endpointslice/endpointslice_controller.go (`syncService`: no slices for a Service
without a selector or of type ExternalName) and staging/src/k8s.io/endpointslice: reconciler.go
(`reconcileByAddressType`: endpoints grouped by their ports, at most 100 a slice, a placeholder slice with no
endpoints and no ports when nothing is selected, slices not owned by the Service deleted), utils.go
(`podToEndpoint`: ready/serving/terminating, targetRef, nodeName, zone, hostname; `getEndpointPorts` with
`FindPort`: a named targetPort resolved per pod; `newEndpointSlice`: generateName `<service>-`, a controller
ownerReference to the Service; `setEndpointSliceLabels`: the Service's labels plus kubernetes.io/service-name
and endpointslice.kubernetes.io/managed-by, service.kubernetes.io/headless for a headless Service),
util/controller_utils.go (`ShouldPodBeInEndpoints`, terminating pods included).

Not simulated: IPv6 / dual-stack (every slice is IPv4, as kubesim's pod IPs), topology hints, the
last-change-trigger-time annotation.
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import ControllerContext, Key
from kubesim.controllers.workloads.endpoints import ServicePodsController
from kubesim.controllers.workloads.owned import pod_ready

GROUP = "discovery.k8s.io"
SERVICE_NAME = "kubernetes.io/service-name"
MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
HEADLESS = "service.kubernetes.io/headless"
ZONE = "topology.kubernetes.io/zone"
MAX_PER_SLICE = 100          # --max-endpoints-per-slice default
RESERVED = {SERVICE_NAME, MANAGED_BY, HEADLESS}


def in_endpoints(pod: dict) -> bool:
    """util.ShouldPodBeInEndpoints(pod, includeTerminating=true): an IP, and not finished for good."""
    st = pod.get("status") or {}
    if not st.get("podIP") and not st.get("podIPs"):
        return False
    phase, policy = st.get("phase"), (pod.get("spec") or {}).get("restartPolicy", "Always")
    if policy == "Never":
        return phase not in ("Failed", "Succeeded")
    if policy == "OnFailure":
        return phase != "Succeeded"
    return True


def find_port(pod: dict, sp: dict) -> int | None:
    """FindPort: a number as is; a name looked up in the pod's containers (and sidecars) with the protocol."""
    target = sp.get("targetPort", sp.get("port"))
    if isinstance(target, int):
        return target
    proto = sp.get("protocol", "TCP")
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or []) + [c for c in spec.get("initContainers") or []
                                                       if c.get("restartPolicy") == "Always"]
    for c in containers:
        for p in c.get("ports") or []:
            if p.get("name") == target and p.get("protocol", "TCP") == proto:
                return p.get("containerPort")
    return None


def endpoint_ports(svc: dict, pod: dict) -> list[dict]:
    out = []
    for sp in (svc.get("spec") or {}).get("ports") or []:
        port = find_port(pod, sp)
        if port is None:
            continue        # no such named port in this pod: left out of its ports (and so of its group)
        ep = {"name": sp.get("name", ""), "protocol": sp.get("protocol", "TCP"), "port": port}
        if sp.get("appProtocol"):
            ep["appProtocol"] = sp["appProtocol"]
        out.append(ep)
    return out


def pod_endpoint(pod: dict, svc: dict, node: dict | None) -> dict:
    st, spec, md = pod.get("status") or {}, pod.get("spec") or {}, pod["metadata"]
    serving = pod_ready(pod)
    terminating = bool(md.get("deletionTimestamp"))
    ready = bool((svc.get("spec") or {}).get("publishNotReadyAddresses")) or (serving and not terminating)
    ips = [p["ip"] for p in st.get("podIPs") or [] if p.get("ip") and ":" not in p["ip"]] or \
        ([st["podIP"]] if st.get("podIP") and ":" not in st["podIP"] else [])
    ep: dict = {"addresses": ips, "conditions": {"ready": ready, "serving": serving, "terminating": terminating}}
    if spec.get("hostname") and spec.get("subdomain") == svc["metadata"]["name"]:
        ep["hostname"] = spec["hostname"]
    ep["targetRef"] = {"kind": "Pod", "namespace": md["namespace"], "name": md["name"], "uid": md["uid"]}
    if spec.get("nodeName"):
        ep["nodeName"] = spec["nodeName"]
    zone = ((node or {}).get("metadata") or {}).get("labels", {}).get(ZONE)
    if zone:
        ep["zone"] = zone
    return ep


def slice_labels(svc: dict) -> dict:
    labels = {k: v for k, v in (svc["metadata"].get("labels") or {}).items() if k not in RESERVED}
    if (svc.get("spec") or {}).get("clusterIP") in (None, "", "None"):
        labels[HEADLESS] = ""
    labels[SERVICE_NAME] = svc["metadata"]["name"]
    labels[MANAGED_BY] = CONTROLLER
    return labels


def _ports_key(ports) -> tuple:
    return tuple(sorted((p.get("name", ""), p.get("protocol", ""), p.get("port") or 0, p.get("appProtocol", ""))
                        for p in ports or []))


class EndpointSliceController(ServicePodsController):
    name = "endpointslice-controller"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.slice_rt = cluster.rt("endpointslices", GROUP)
        self.node_rt = cluster.rt("nodes")

    def on_event(self, event_type, rt, obj, old):
        if rt.storage_key == (GROUP, "endpointslices"):
            labels = obj["metadata"].get("labels") or {}
            if labels.get(MANAGED_BY) == CONTROLLER and labels.get(SERVICE_NAME):
                self.queue.add((obj["metadata"]["namespace"], labels[SERVICE_NAME]))   # changed or deleted by others
            return
        super().on_event(event_type, rt, obj, old)

    def reconcile(self, key: Key) -> None:
        ns, name = key
        svc = self.cluster.cache.get(self.svc_rt, ns, name)
        if svc is None:
            return          # its slices go with it (garbage collector: they are owned by the Service)
        spec = svc.get("spec") or {}
        if not spec.get("selector") or spec.get("type") == "ExternalName":
            return
        groups: dict[tuple, tuple[list, list]] = {}      # ports key -> (ports, endpoints)
        for pod in self.selected_pods(svc):
            if not in_endpoints(pod):
                continue
            ports = endpoint_ports(svc, pod)
            ep = pod_endpoint(pod, svc, self.cluster.cache.get(self.node_rt, None, pod["spec"].get("nodeName", "")))
            if ep["addresses"]:
                groups.setdefault(_ports_key(ports), (ports, []))[1].append(ep)
        mine = self.cluster.cache.select(self.slice_rt, ns, {SERVICE_NAME: name, MANAGED_BY: CONTROLLER})
        owned = sorted((s for s in mine if any(o.get("uid") == svc["metadata"]["uid"] and o.get("kind") == "Service"
                                               for o in s["metadata"].get("ownerReferences") or [])),
                       key=lambda s: s["metadata"]["name"])
        stale = [s for s in mine if s not in owned]
        desired = [(ports or None, eps[i:i + MAX_PER_SLICE]) for ports, eps in groups.values()
                   for i in range(0, len(eps), MAX_PER_SLICE)] or [(None, None)]     # the placeholder
        labels = slice_labels(svc)
        for ports, eps in desired:
            same = next((s for s in owned if _ports_key(s.get("ports")) == _ports_key(ports)), None)
            if same is None:
                self._create(svc, labels, ports, eps)
                continue
            owned.remove(same)
            if same.get("endpoints") != eps or (same["metadata"].get("labels") or {}) != labels or \
                    same.get("ports") != ports:
                self._update(same, labels, ports, eps)
        for s in stale + owned:
            try:
                self.store.delete(self.slice_rt, ns, s["metadata"]["name"])
            except ApiError as e:
                if e.code != 404:
                    raise

    def _create(self, svc: dict, labels: dict, ports, eps) -> None:
        md = svc["metadata"]
        body = {"apiVersion": f"{GROUP}/v1", "kind": "EndpointSlice",
                "metadata": {"generateName": f"{md['name']}-", "namespace": md["namespace"], "labels": labels,
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": md["name"],
                                                  "uid": md["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "addressType": "IPv4", "endpoints": eps, "ports": ports}
        try:
            self.cluster.observe(self.slice_rt, self.store.create(self.slice_rt, md["namespace"], body))
        except ApiError as e:
            if e.code not in (403, 404, 409):      # namespace terminating or gone: nothing to do
                raise

    def _update(self, current: dict, labels: dict, ports, eps) -> None:
        new = dict(current, endpoints=eps, ports=ports, metadata=dict(current["metadata"], labels=labels))
        md = current["metadata"]
        try:
            self.cluster.observe(self.slice_rt, self.store.update(self.slice_rt, md["namespace"], md["name"], new))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_rate_limited((md["namespace"], labels[SERVICE_NAME]))
            elif e.code != 404:
                raise
