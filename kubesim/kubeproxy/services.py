"""Services on the host's loopback (kube-proxy's part, for process pods): each TCP port of a Service with a
clusterIP `10.96.b.c` answers on `127.96.b.c:<port>` (the clusterIP's loopback twin: every Service gets its
own address, so two Services may both use 8888), and each entry of an ingress-nginx `tcp-services` ConfigMap
(`"<external port>": "<ns>/<service>:<port>"`, any namespace) answers on `127.0.0.1:<external port>`. A
connection goes to a ready endpoint of the Service port (round robin), into that pod's network namespace
through its agent; with no ready process endpoint it is closed at once (kube-proxy's REJECT).

Upstream: pkg/proxy/iptables/proxier.go (`syncProxyRules`: a rule per Service port to its ready endpoints,
REJECT when none) and ingress-nginx's `--tcp-services-configmap` (internal/ingress/controller/store).

Inside a process pod the same twins answer too (podnet.py: the pod's agent listens on them and hands each
connection to `forward_from_pod`, which takes this same path); on every Service change the pods' hosts files
and listener lists are refreshed.
"""
from __future__ import annotations

import asyncio
import itertools
import logging

from kubesim.controllers.framework import Controller
from kubesim.kubelet.procrt.agent import relay
from kubesim.kubelet.procrt.podnet import twin
from kubesim.kubeproxy import peers

log = logging.getLogger("kubesim.kubeproxy.services")
TCP_SERVICES = "tcp-services"


loopback_twin = twin


def desired(services: list[dict], configmaps: list[dict]) -> dict[tuple[str, int], tuple[str, str, int]]:
    """(host, port) -> (namespace, service, service port) for every Service port and tcp-services entry. Pure."""
    out = {}
    by_key = {}
    for svc in services:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        host = loopback_twin(svc["spec"].get("clusterIP") or "")
        for p in svc["spec"].get("ports") or []:
            if (p.get("protocol") or "TCP") != "TCP":
                continue
            by_key[(ns, name, int(p["port"]))] = True
            if host:
                out[(host, int(p["port"]))] = (ns, name, int(p["port"]))
    for cm in configmaps:
        if cm["metadata"]["name"] != TCP_SERVICES:
            continue
        for ext, ref in (cm.get("data") or {}).items():
            target, _, port = str(ref).partition(":")
            ns, _, name = target.partition("/")
            if str(ext).isdigit() and port.split(":")[0].isdigit() and (ns, name, int(port.split(":")[0])) in by_key:
                out[("127.0.0.1", int(ext))] = (ns, name, int(port.split(":")[0]))
    return out


def _peer_view(pod: dict | None):
    """What of a pod its peers' hosts files and listeners depend on."""
    if pod is None:
        return None
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return (status.get("podIP"), ready, bool(pod["metadata"].get("deletionTimestamp")),
            pod["metadata"].get("labels"))


class LoopbackServices(Controller):
    """Listeners on the host's loopback for Services whose endpoints are process pods."""

    name = "loopback-services"

    def __init__(self, cluster, kubelet):
        super().__init__(cluster)
        self.kubelet = kubelet
        self.servers: dict[tuple[str, int], asyncio.AbstractServer] = {}
        self.targets: dict[tuple[str, int], tuple[str, str, int]] = {}
        self._rr = itertools.count()
        self._listening: set[asyncio.Future] = set()   # strong references: the loop keeps only weak ones to tasks
        kubelet.services_net = self      # the process pods' agents forward through forward_from_pod

    def on_event(self, event_type, rt, obj, old):
        if rt.group == "" and rt.plural == "pods":
            # a pod named under a headless Service came, got its IP, became ready or went: its peers' names
            # and listeners follow (podnet.py `peers`)
            if any(o and o["spec"].get("subdomain") and o["spec"].get("hostname") for o in (obj, old)) and \
                    _peer_view(obj) != _peer_view(old) and self.kubelet.procs_if_any is not None:
                self.kubelet.procs_if_any.services_changed()
            return
        if rt.group == "" and (rt.plural == "services" or
                               (rt.plural == "configmaps" and obj["metadata"]["name"] == TCP_SERVICES)):
            self.queue.add(("", "all"))

    def reconcile(self, key) -> None:
        cache = self.cluster.cache
        want = desired(cache.list(self.cluster.rt("services")), cache.list(self.cluster.rt("configmaps")))
        self.targets = want
        for addr in list(self.servers):
            if addr not in want:
                self.servers.pop(addr).close()
        for addr in want:
            if addr not in self.servers:
                task = asyncio.ensure_future(self._listen(addr))
                self._listening.add(task)
                task.add_done_callback(self._listening.discard)
        if self.kubelet.procs_if_any is not None:
            self.kubelet.procs_if_any.services_changed()

    async def _listen(self, addr) -> None:
        if addr in self.servers:
            return
        try:
            server = await asyncio.start_server(lambda r, w: self._serve(addr, r, w), addr[0], addr[1])
        except OSError as e:
            log.warning("cannot listen on %s:%s for %s: %s", *addr, self.targets.get(addr), e)
            return
        if addr in self.servers or addr not in self.targets:
            server.close()
            return
        self.servers[addr] = server

    def _endpoint_pods(self, ns: str, svc: str, port: int) -> list[tuple[str, int]]:
        """(pod name, target port) of the ready endpoints of the Service port."""
        cache = self.cluster.cache
        service = cache.get(self.cluster.rt("services"), ns, svc)
        endpoints = cache.get(self.cluster.rt("endpoints"), ns, svc)
        if service is None or endpoints is None:
            return []
        sp = next((p for p in service["spec"].get("ports") or [] if int(p["port"]) == port), None)
        if sp is None:
            return []
        out = []
        for subset in endpoints.get("subsets") or []:
            for ep in subset.get("ports") or []:
                if (ep.get("name") or "") == (sp.get("name") or ""):
                    out += [((a.get("targetRef") or {}).get("name"), int(ep["port"]))
                            for a in subset.get("addresses") or []]
        return out

    async def _serve(self, addr, reader, writer) -> None:
        target = self.targets.get(addr)
        procs = self.kubelet.procs_if_any
        candidates = self._endpoint_pods(*target) if target and procs else []
        candidates = [(procs.runs_pod(target[0], pod), port) for pod, port in candidates]
        candidates = [c for c in candidates if c[0]]
        if not candidates:
            writer.close()
            return
        uid, port = candidates[next(self._rr) % len(candidates)]
        try:
            r2, w2 = await procs.connect(uid, port)
        except (ConnectionError, OSError):
            writer.close()
            return
        await asyncio.gather(relay(reader, w2), relay(r2, writer))
        writer.close()
        w2.close()

    async def forward_from_pod(self, ip: str, port: int, reader, writer) -> None:
        """A process pod's connection to a Service twin (podnet.py): a Service port only, never a
        tcp-services entry (127.0.0.1 is the pod's own loopback)."""
        target = self.targets.get((ip, port))
        if target is None and ip != "127.0.0.1":
            await peers.forward(self.kubelet, ip, port, reader, writer)     # a peer pod's twin
            return
        if target is None or ip == "127.0.0.1":
            writer.close()
            return
        await self._serve((ip, port), reader, writer)

    async def stop(self) -> None:
        for server in self.servers.values():
            server.close()
        self.servers.clear()
        await super().stop()

    def reset(self) -> None:
        for server in self.servers.values():
            server.close()
        self.servers.clear()

