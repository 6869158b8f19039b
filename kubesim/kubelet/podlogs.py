"""Container logs as the kubelet serves them (`pods/<name>/log`; what the API server asks of it: apiserver/kubeletclient.py `PodLogs`): a snapshot
(tailLines, timestamps, previous) or a follow stream that ends when the container does, with the kubelet's
400 messages for a missing or waiting container.

Upstream: pkg/kubelet/kuberuntime/kuberuntime_container.go (`GetContainerLogs`) and
pkg/kubelet/kuberuntime/logs/logs.go (`ReadLogs`: tail, timestamps, follow).
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from kubesim.apimachinery.clock import rfc3339nano
from kubesim.apimachinery.errors import ApiError
from kubesim.kubelet.podruns import Attempt


class LogProvider:
    """Container logs as the kubelet serves them (apiserver/kubeletclient.py `PodLogs`)."""

    def __init__(self, kubelet):   # a kubelet.Kubelet: its store, pods_rt and runs
        self.kubelet = kubelet

    def _attempt(self, namespace: str, pod: str, container: str | None, previous: bool) -> Attempt:
        kubelet = self.kubelet
        obj = kubelet.store.get(kubelet.pods_rt, namespace, pod)     # 404 like the API server
        names = [c["name"] for c in obj["spec"].get("containers") or []]
        if container is None:
            if len(names) != 1:
                raise ApiError(400, f"a container name must be specified for pod {pod}, choose one of: "
                                    f"[{' '.join(names)}]", "BadRequest")
            container = names[0]
        if container not in names:
            raise ApiError(400, f"container {container} is not valid for pod {pod}", "BadRequest")
        run = kubelet.runs.get((namespace, pod))
        c = run.containers.get(container) if run is not None and run.uid == obj["metadata"]["uid"] else None
        if previous:
            if c is None or c.previous is None:
                raise ApiError(400, f'previous terminated container "{container}" in pod "{pod}" not found',
                               "BadRequest")
            return c.previous
        if c is None or c.attempt is None:
            reason = "ContainerCreating"
            if c is not None and "waiting" in c.state:
                reason = c.state["waiting"].get("reason", reason)
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start: {reason}',
                           "BadRequest")
        return c.attempt

    @staticmethod
    def _format(lines, timestamps: bool) -> str:
        if timestamps:
            return "".join(f"{rfc3339nano(ts)} {text}\n" for _due, ts, text in lines)
        return "".join(f"{text}\n" for _due, _ts, text in lines)

    def snapshot(self, namespace, pod, container=None, *, tail_lines=None, timestamps=False,
                 previous=False) -> str:
        attempt = self._attempt(namespace, pod, container, previous)
        lines = attempt.written(asyncio.get_running_loop().time() if _in_loop() else float("inf"))
        if tail_lines is not None:
            lines = lines[-int(tail_lines):] if int(tail_lines) > 0 else []
        return self._format(lines, timestamps)

    async def stream(self, namespace, pod, container=None, *, tail_lines=None,
                     timestamps=False) -> AsyncIterator[bytes]:
        attempt = self._attempt(namespace, pod, container, False)
        loop = asyncio.get_running_loop()
        written = attempt.written(loop.time())
        start = max(0, len(written) - int(tail_lines)) if tail_lines is not None else 0
        sent = start
        while True:
            written = attempt.written(loop.time())
            if len(written) > sent:
                yield self._format(written[sent:], timestamps).encode()
                sent = len(written)
            if attempt.finished_mono is not None and sent >= len(attempt.lines):
                return
            nxt = attempt.lines[sent][0] - loop.time() if sent < len(attempt.lines) else None
            attempt.changed.clear()
            try:
                await asyncio.wait_for(attempt.changed.wait(), timeout=nxt if nxt is not None else None)
            except TimeoutError:
                pass


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False
