"""Probes and lifecycle hooks of process pods, really run: exec (in the container), httpGet and tcpSocket
(into the pod's network namespace through its agent). Readiness drives the container's `ready` (and so
the pod's Ready condition and its Service endpoints); a failed liveness probe restarts the container; a
startup probe holds the other two until it succeeds; preStop runs before SIGTERM.

Upstream: pkg/kubelet/prober/worker.go (`doProbe`: initialDelaySeconds, periodSeconds, success/failure
thresholds, the `Unhealthy` Event `<Kind> probe failed: <output>`; a container with a readiness probe starts
not ready), pkg/kubelet/prober/prober.go (`runProbe`: exec exit code 0, HTTP 200-399, a TCP connect),
pkg/kubelet/kuberuntime/kuberuntime_container.go (`killContainer`: preStop within the grace period; a
liveness failure: `Container <name> failed liveness probe, will be restarted`).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

DEFAULTS = {"initialDelaySeconds": 0, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
            "failureThreshold": 3}


@dataclass
class Counter:
    """worker.go's result bookkeeping: a result flips after `threshold` equal results in a row (pure)."""
    success_threshold: int
    failure_threshold: int
    result: bool | None = None
    run: int = 0
    last: bool | None = None

    def observe(self, ok: bool) -> bool | None:
        """Record one probe outcome; the result when it changes, else None."""
        self.run = self.run + 1 if ok == self.last else 1
        self.last = ok
        threshold = self.success_threshold if ok else self.failure_threshold
        if self.run >= threshold and self.result != ok:
            self.result = ok
            return ok
        return None


def _port(handler: dict, container: dict) -> int:
    port = handler.get("port")
    if isinstance(port, str) and not port.isdigit():
        return next(int(p["containerPort"]) for p in container.get("ports") or [] if p.get("name") == port)
    return int(port)


async def run_handler(handler: dict, container: dict, exec_fn, connect_fn, timeout: float) -> tuple[bool, str]:
    """One probe or hook: (succeeded, output for the Event)."""
    try:
        if handler.get("exec"):
            proc = await exec_fn(handler["exec"].get("command") or [])
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
            return proc.returncode == 0, out.decode(errors="replace").strip()[:200]
        if handler.get("httpGet"):
            h = handler["httpGet"]
            reader, writer = await asyncio.wait_for(connect_fn(_port(h, container)), timeout)
            writer.write(f"GET {h.get('path') or '/'} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), timeout)
            writer.close()
            parts = status_line.decode(errors="replace").split()
            code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            return 200 <= code < 400, f"HTTP probe failed with statuscode: {code}"
        if handler.get("tcpSocket"):
            _reader, writer = await asyncio.wait_for(connect_fn(_port(handler["tcpSocket"], container)), timeout)
            writer.close()
            return True, ""
    except TimeoutError:
        return False, f"timeout: failed to connect service within {timeout:g}s"
    except (ConnectionError, OSError, LookupError, StopIteration, ValueError) as e:
        return False, f"dial tcp: connect: {e}"
    return False, "unknown handler"


def settings(probe: dict) -> dict:
    return {k: probe.get(k) if probe.get(k) is not None else v for k, v in DEFAULTS.items()}
