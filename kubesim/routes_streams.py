"""`pods/<name>/exec` and `pods/<name>/portforward` over WebSockets, for pods on process nodes.

Protocols (k8s.io/apimachinery/pkg/util/remotecommand/constants.go and
k8s.io/apiserver/pkg/util/wsstream/conn.go): `v4.channel.k8s.io` / `v5.channel.k8s.io` frames whose first
byte is the channel: exec 0 stdin, 1 stdout, 2 stderr, 3 the final Status (Success, or Failure reason
NonZeroExitCode with an `ExitCode` cause: pkg/kubelet/cri/streaming/remotecommand/websocket.go), v5's 255
closes a channel (stdin's end). Port-forward (pkg/kubelet/cri/streaming/portforward/websocket.go): port i
uses data channel 2i and error channel 2i+1, each opened by the port number as 2 little-endian bytes.
This is what the Python client's `stream()` and `portforward()` and kubectl's WebSocket exec speak; kubectl
port-forward tunnels SPDY over the WebSocket, which kubesim does not speak (docs/development.md).

The command runs in the container's namespaces and cgroup (nsenter, as root), with the container's
environment and working directory; no TTY is allocated (`tty=true` runs without one).
"""
from __future__ import annotations

import asyncio
import json
import re
import struct

from aiohttp import WSMsgType, web

from kubesim.errors import ApiError

EXEC = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<pod>[^/]+)/(?P<verb>exec|portforward)$")
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io")


def add_stream_routes(api) -> None:
    store = api.store

    async def handle(request: web.Request, match: re.Match):
        procs = getattr(store.log_provider, "kubelet", None)
        procs = procs.procs_if_any if procs is not None else None
        pod = store.get(store.registry.lookup("", "v1", "pods"), match["namespace"], match["pod"])   # 404
        uid = procs.runs_pod(match["namespace"], match["pod"]) if procs else None
        if uid is None:
            raise ApiError(400, f"pod {match['pod']} does not run on a process node: kubesim can exec into and "
                                "port-forward to process pods only", "BadRequest")
        ws = web.WebSocketResponse(protocols=PROTOCOLS)
        if not ws.can_prepare(request).ok:
            raise ApiError(400, "Upgrade request required (kubesim speaks WebSocket streams only, not SPDY)",
                           "BadRequest")
        await ws.prepare(request)
        if match["verb"] == "exec":
            await _exec(ws, procs, uid, pod, request)
        else:
            await _portforward(ws, procs, uid, request)
        return ws

    api.routes.append((EXEC, handle))


def _status(code: int, argv: list[str]) -> bytes:
    if code == 0:
        return json.dumps({"metadata": {}, "status": "Success"}).encode()
    return json.dumps({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "message": f"command terminated with non-zero exit code: error executing command "
                                  f"{argv}, exit code {code}",
                       "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}).encode()


async def _exec(ws, procs, uid: str, pod: dict, request: web.Request) -> None:
    q = request.query
    argv = q.getall("command", [])
    container = q.get("container") or pod["spec"]["containers"][0]["name"]
    try:
        proc = await procs.exec(uid, container, argv)
    except (LookupError, OSError) as e:
        await ws.send_bytes(b"\x03" + json.dumps({"metadata": {}, "status": "Failure", "message": str(e),
                                                  "reason": "InternalError"}).encode())
        await ws.close()
        return

    async def pump(stream, channel: int):
        while data := await stream.read(65536):
            await ws.send_bytes(bytes([channel]) + data)

    async def stdin():
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue
            if msg.data[0] == 0 and proc.stdin is not None:
                proc.stdin.write(msg.data[1:])
                await proc.stdin.drain()
            elif msg.data[0] == 255 and proc.stdin is not None:     # v5: the client closed stdin
                proc.stdin.close()
    reader = asyncio.ensure_future(stdin())
    await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
    code = await proc.wait()
    await ws.send_bytes(b"\x03" + _status(code if code >= 0 else 128 - code, argv))
    reader.cancel()
    await ws.close()


async def _portforward(ws, procs, uid: str, request: web.Request) -> None:
    ports = [int(p) for p in ",".join(request.query.getall("ports", [])).split(",") if p.strip()]
    writers = {}
    pumps = []
    for i, port in enumerate(ports):
        for channel in (2 * i, 2 * i + 1):
            await ws.send_bytes(bytes([channel]) + struct.pack("<H", port))
        try:
            reader, writer = await procs.connect(uid, port)
        except (ConnectionError, OSError) as e:
            await ws.send_bytes(bytes([2 * i + 1]) + f"error forwarding port {port} to pod {uid}: {e}".encode())
            continue
        writers[2 * i] = writer

        async def pump(reader=reader, channel=2 * i):
            while data := await reader.read(65536):
                await ws.send_bytes(bytes([channel]) + data)
            if all(p.done() for p in pumps if p is not asyncio.current_task()):
                await ws.close()       # the pod closed every connection: the stream ends (as the kubelet's)
        pumps.append(asyncio.ensure_future(pump()))
    async for msg in ws:
        if msg.type == WSMsgType.BINARY and msg.data and msg.data[0] in writers:
            w = writers[msg.data[0]]
            w.write(msg.data[1:])
            await w.drain()
    for p in pumps:
        p.cancel()
    for w in writers.values():
        w.close()
