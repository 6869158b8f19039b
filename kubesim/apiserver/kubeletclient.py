"""The API server's view of the kubelet (kube-apiserver's pkg/kubelet/client: the calls it makes to a node's kubelet
for `pods/log`, `exec`, `portforward` and the service proxy), and what its pod strategy asks of a node (pkg/registry/
core/pod/strategy.go `CheckGracefulDelete`: kubesim deletes gracefully only the pods a kubelet stops itself).

The cluster connects one (`Store.kubelet`, kubesim/cluster.py); the kubelet (kubesim/kubelet/kubelet.py) is it.
Without one, logs answer 400 "waiting to start", streams 400 and deletes are immediate.
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol


class PodLogs(Protocol):
    """A container's log, as the kubelet serves it (kubesim/kubelet/podlogs.py); refusals are `ApiError`s."""

    def snapshot(self, namespace: str, pod: str, container: str | None = None, *, tail_lines: int | None = None,
                 timestamps: bool = False, previous: bool = False) -> str: ...

    def stream(self, namespace: str, pod: str, container: str | None = None, *, tail_lines: int | None = None,
               timestamps: bool = False) -> AsyncIterator[bytes]: ...


class ProcessPods(Protocol):
    """The pods a node runs as processes (kubesim/kubelet/procrt): what exec, port-forward and the proxy reach."""

    def runs_pod(self, namespace: str, name: str) -> str | None: ...           # its uid, or None

    async def connect(self, uid: str, port: int) -> Any: ...                    # (reader, writer) to the pod's port

    async def exec(self, uid: str, container: str, argv: list[str]) -> Any: ...  # the exec'd process


class UsageStats(Protocol):
    """What the kubelet's resource usage sampler (kubesim/kubelet/stats.py) tells the metrics API and /metrics."""

    last: dict                                                  # the last reading per pod

    def node_usage(self, node: str) -> Any: ...

    def pod_usage(self, namespace: str, name: str) -> Any: ...


class KubeletClient(Protocol):
    logs: PodLogs
    stats: UsageStats | None        # the usage sampler, when the cluster runs one (metrics.k8s.io, cAdvisor)

    def graceful(self, pod: dict) -> bool: ...      # a DELETE of this pod waits for its kubelet to stop it

    def process_pods(self) -> ProcessPods | None: ...   # None until a process pod has run
