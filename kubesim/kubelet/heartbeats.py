"""The kubelets' heartbeats: the node lease controller (k8s.io/component-helpers/apimachinery/lease and
pkg/kubelet/nodelease: a Lease per node in `kube-node-lease`, named after the node, holder the node, 40 s duration,
renewed every 10 s, owned by the Node) and the node status loop (pkg/kubelet/kubelet_node_status.go: conditions'
lastHeartbeatTime refreshed every nodeStatusReportFrequency, 5 min, when nothing else changed).
"""
from __future__ import annotations

import asyncio
import json
from datetime import datetime

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller

LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40
STATUS_REPORT_SECONDS = 300.0   # nodeStatusReportFrequency


def micro_time(dt: datetime) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds."""
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class NodeHeartbeats(Controller):
    """Per node: its Lease created and renewed every 10 s, its conditions' heartbeat every 5 min."""
    name = "node-heartbeats"

    def __init__(self, cluster):
        super().__init__(cluster)
        self.node_rt = cluster.rt("nodes")
        self.lease_rt = cluster.rt("leases", "coordination.k8s.io")
        self._status_at: dict[str, float] = {}     # node -> loop time of its last status heartbeat

    def on_event(self, event_type, rt, obj, old) -> None:
        if rt == self.node_rt and event_type == "ADDED":
            self.queue.add(("", obj["metadata"]["name"]))

    def reconcile(self, key) -> None:
        name = key[1]
        node = self.cluster.cache.get(self.node_rt, None, name)
        if node is None:
            self._status_at.pop(name, None)
            return               # the Lease goes with its owner (garbage collector)
        now = self.store.clock.now()
        self._renew(node, now)
        loop_now = asyncio.get_running_loop().time()
        if name not in self._status_at and _heartbeat_time(node):
            self._status_at[name] = loop_now      # registered with its first status (Cluster._create_nodes)
        if loop_now - self._status_at.get(name, float("-inf")) >= STATUS_REPORT_SECONDS:
            self._status_at[name] = loop_now
            self._heartbeat(node, now)
        self.queue.add_after(key, self.cluster.timing.lease_renew)

    def _renew(self, node: dict, now: datetime) -> None:
        name = node["metadata"]["name"]
        try:
            lease = self.store.get(self.lease_rt, LEASE_NAMESPACE, name)
        except ApiError as e:
            if e.code != 404:
                raise
            lease = None
        if lease is None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": name, "namespace": LEASE_NAMESPACE, "ownerReferences": [owner]},
                    "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS,
                             "renewTime": micro_time(now)}}
            try:
                self.store.create(self.lease_rt, LEASE_NAMESPACE, body)
            except ApiError as e:
                if e.code not in (404, 409):    # kube-node-lease gone (a reset) or created meanwhile
                    raise
            return
        lease["spec"]["renewTime"] = micro_time(now)
        try:
            self.store.update(self.lease_rt, LEASE_NAMESPACE, name, lease)
        except ApiError as e:
            if e.code not in (404, 409):
                raise

    def _heartbeat(self, node: dict, now: datetime) -> None:
        stamp = self.store.clock.rfc3339(now)
        new = json.loads(json.dumps(node))
        for c in (new.get("status") or {}).get("conditions") or []:
            c["lastHeartbeatTime"] = stamp
            c.setdefault("lastTransitionTime", stamp)
        try:
            self.cluster.observe(self.node_rt, self.store.update(self.node_rt, None, node["metadata"]["name"], new,
                                                                 subresource="status"))
        except ApiError as e:
            if e.code not in (404, 409):        # deleted, or changed meanwhile: the next heartbeat writes
                raise


def _heartbeat_time(node: dict) -> str | None:
    return next((c.get("lastHeartbeatTime") for c in (node.get("status") or {}).get("conditions") or []
                 if c.get("type") == "Ready"), None)
