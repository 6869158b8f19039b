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
import errno
import os
from dataclasses import dataclass

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
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


def dial_error(host: str, port: int, exc: BaseException) -> str:
    """Go's ``net.Dial`` error, as the kubelet's prober reports it (pkg/probe/tcp/tcp.go ``DoTCPProbe`` returns
    ``err.Error()``): ``dial tcp 127.0.0.1:8888: connect: connection refused``, ``... i/o timeout``; Go's
    syscall messages are lower-case (``syscall.ECONNREFUSED.Error()``), Python's ``strerror`` capitalised."""
    if isinstance(exc, TimeoutError):
        return f"dial tcp {host}:{port}: i/o timeout"
    code = errno.ECONNREFUSED if isinstance(exc, ConnectionRefusedError) else getattr(exc, "errno", None)
    if code:   # the pod's agent answers a refusal with its own words: the class says which error it was
        return f"dial tcp {host}:{port}: connect: {os.strerror(code).lower()}"
    return f"dial tcp {host}:{port}: {exc}"


async def run_handler(handler: dict, container: dict, exec_fn, connect_fn, timeout: float) -> tuple[bool, str]:
    """One probe or hook: (succeeded, output for the Event, in the kubelet's words: pkg/probe/http/http.go
    ``DoHTTPProbe`` gives the Go client's error, ``Get "http://<host>:<port><path>": dial tcp ...``, or
    ``HTTP probe failed with statuscode: <code>``; pkg/probe/tcp/tcp.go the dial error). The host is the
    handler's, else the pod's address, here the pod's loopback."""
    url, host, port = None, "127.0.0.1", 0
    try:
        if handler.get("exec"):
            proc = await exec_fn(handler["exec"].get("command") or [])
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
            return proc.returncode == 0, out.decode(errors="replace").strip()[:200]
        if handler.get("httpGet"):
            h = handler["httpGet"]
            host, port = h.get("host") or host, _port(h, container)
            url = f"{(h.get('scheme') or 'HTTP').lower()}://{host}:{port}{h.get('path') or '/'}"
            reader, writer = await asyncio.wait_for(connect_fn(port), timeout)
            writer.write(f"GET {h.get('path') or '/'} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode())
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), timeout)
            writer.close()
            parts = status_line.decode(errors="replace").split()
            code = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            return 200 <= code < 400, f"HTTP probe failed with statuscode: {code}"
        if handler.get("tcpSocket"):
            host, port = handler["tcpSocket"].get("host") or host, _port(handler["tcpSocket"], container)
            _reader, writer = await asyncio.wait_for(connect_fn(port), timeout)
            writer.close()
            return True, ""
    except TimeoutError as e:
        if url:   # the Go HTTP client's own words for its timeout
            return False, f'Get "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
        return False, dial_error(host, port, e)
    except (ConnectionError, OSError, LookupError, StopIteration, ValueError) as e:
        return False, (f'Get "{url}": ' if url else "") + dial_error(host, port, e)
    return False, "unknown handler"


def settings(probe: dict) -> dict:
    return {k: probe.get(k) if probe.get(k) is not None else v for k, v in DEFAULTS.items()}


async def probe_container(pods, run, pod: dict, c, spec: dict, proc, grace: float) -> None:
    """prober worker.go for one container of `pods` (a pods.ProcessPods): startup first, then readiness and liveness on their periods."""
    kl, loop = pods.kubelet, asyncio.get_running_loop()
    kinds = [(k, spec[k], settings(spec[k])) for k in PROBES if spec.get(k)]
    counters = {k: Counter(s["successThreshold"] if k == "readinessProbe" else 1, s["failureThreshold"])
                for k, _p, s in kinds}
    due = {k: loop.time() + s["initialDelaySeconds"] for k, _p, s in kinds}
    started = "startupProbe" not in spec
    fp = f"spec.containers{{{c.name}}}"
    while proc.proc.returncode is None and not run.terminating:
        for kind, probe, s in kinds:
            if loop.time() < due[kind] or (kind == "startupProbe") == started:
                continue
            due[kind] = loop.time() + s["periodSeconds"]
            ok, out = await run_handler(probe, spec, lambda argv: pods.exec(run.uid, c.name, argv),
                                        lambda port: pods.connect(run.uid, port), s["timeoutSeconds"])
            if proc.proc.returncode is not None or run.terminating:
                return
            if not ok:
                kl.recorder.record(pod, "Warning", "Unhealthy",
                                   f"{kind[:-5].capitalize()} probe failed: {out}", host=run.node, field_path=fp)
            changed = counters[kind].observe(ok)
            if kind == "readinessProbe" and changed is not None:
                c.ready = changed
                kl._write_status(run)
            elif kind == "startupProbe" and changed:
                started = True
            elif changed is False:        # liveness (or startup) failed: killContainer, then a restart
                kl.recorder.record(pod, "Normal", "Killing", f"Container {c.name} failed "
                                   f"{kind[:-5]} probe, will be restarted", host=run.node, field_path=fp)
                await proc.stop(grace)
                return
        pending = [due[k] for k, _p, _s in kinds if (k == "startupProbe") != started]
        await asyncio.sleep(max(0.01, min(pending, default=loop.time() + 1) - loop.time()))
