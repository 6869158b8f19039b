"""The Service IP and node port allocators (kube-apiserver's pkg/registry/core/service/ipallocator and
portallocator: the service-cluster-ip-range 10.96.0.0/16, whose first address is the `kubernetes` Service's, and the
service-node-port-range 30000-32767), and what the API server does with them on a Service's create and delete:
an address the Service asks for is reserved or refused (422 "provided IP is already allocated"), one it does not
ask for is allocated while defaulting (admission/defaults.py), and a deleted Service's goes back to the range.

Which free address a Service gets is random, as upstream: ipallocator/bitmap.go reserves the range's lower band for
addresses Services ask for (`calculateRangeOffset`: min(max(16, size/16), 256) addresses, 256 for a /16) and
`AllocateNext` picks a random free one above it (allocator/bitmap.go `randomScanStrategyWithOffset`), the lower band
only once the upper one is full. Each clusterIP answers on the host's loopback twin (127.96.b.c, kubeproxy/), so two
kubesims on one machine (two pytest-xdist workers, two developers' test runs) do not hand out the same addresses.
"""
from __future__ import annotations

import random
import threading


class ClusterIPs:
    """The service-cluster-ip-range allocator: 10.96.0.0/16 (10.96.0.1 is the `kubernetes` Service)."""

    SIZE = 65534          # 10.96.0.1 - 10.96.255.254: offset i is 10.96.0.0 + 1 + i
    STATIC_BAND = 256     # calculateRangeOffset for a /16

    def __init__(self):
        self._used: set[str] = set()
        self._fresh: dict[str, bool] = {}
        self._port = 29999
        self._lock = threading.Lock()
        self._random = random.Random()

    @staticmethod
    def _ip(offset: int) -> str:
        n = offset + 1
        return f"10.96.{(n >> 8) & 255}.{n & 255}"

    def allocate(self) -> str:
        with self._lock:
            for lo, hi in ((self.STATIC_BAND, self.SIZE), (0, self.STATIC_BAND)):
                start = self._random.randrange(lo, hi)
                for i in range(hi - lo):
                    ip = self._ip(lo + (start - lo + i) % (hi - lo))
                    if ip not in self._used:
                        self._used.add(ip)
                        self._fresh[ip] = True
                        return ip
            raise RuntimeError("the service-cluster-ip-range 10.96.0.0/16 is full")

    def node_port(self) -> int:
        """The service-node-port-range allocator (30000-32767), in order."""
        with self._lock:
            self._port += 1
            if self._port > 32767:
                self._port = 30000
            return self._port

    def allocated_here(self, ip: str) -> bool:
        """True once for an IP `allocate()` just handed out (so the caller does not reserve it twice)."""
        with self._lock:
            return self._fresh.pop(ip, False)

    def release(self, ip: str) -> None:
        """A deleted Service's address goes back to the range (the real allocator frees it with the Service)."""
        with self._lock:
            self._used.discard(ip)
            self._fresh.pop(ip, None)

    def reserve(self, ip: str) -> bool:
        with self._lock:
            if ip in self._used:
                return False
            self._used.add(ip)
            return True


def reserve_existing(store, ips: ClusterIPs) -> None:
    """The addresses of the Services already stored (a restarted allocator rebuilds its bitmap from them)."""
    for s in store.list(store.registry.lookup("", "v1", "services"))[0]:
        ip = (s.get("spec") or {}).get("clusterIP")
        if ip and ip != "None":
            ips.reserve(ip)


def release_deleted(req, ips: ClusterIPs) -> None:
    """A Service deleted for good (not a dry run, no finalizer holding it) gives its address back."""
    if req.operation == "DELETE" and req.rt.plural == "services" and not req.rt.group and not req.dry_run \
            and not (req.old or {}).get("metadata", {}).get("finalizers"):
        ip = ((req.old or {}).get("spec") or {}).get("clusterIP")
        if ip and ip != "None":
            ips.release(ip)


def claim(obj: dict, ips: ClusterIPs, causes) -> None:
    """A new Service's address: the one defaulting allocated, or the one it asked for, reserved if free."""
    ip = obj["spec"].get("clusterIP")
    if ip and ip != "None" and not ips.allocated_here(ip) and not ips.reserve(ip):
        causes.invalid("spec.clusterIPs", [ip], f"failed to allocate IP {ip}: provided IP is already allocated")
