"""`pods/<name>/exec` and `pods/<name>/portforward` for pods on process nodes: over WebSockets (here) and
SPDY/3.1 (streams_spdy.py), both reaching the pod through `ProcessPods.exec` / `.connect` (procrt/pods.py).

WebSocket protocols (k8s.io/apimachinery/pkg/util/remotecommand/constants.go and
k8s.io/apiserver/pkg/util/wsstream/conn.go): `v4.channel.k8s.io` / `v5.channel.k8s.io` frames whose first
byte is the channel: exec 0 stdin, 1 stdout, 2 stderr, 3 the final Status (Success, or Failure reason
NonZeroExitCode with an `ExitCode` cause: pkg/kubelet/cri/streaming/remotecommand/websocket.go), v5's 255
closes a channel (stdin's end). Port-forward (pkg/kubelet/cri/streaming/portforward/websocket.go): port i
uses data channel 2i and error channel 2i+1, each opened by the port number as 2 little-endian bytes.
This is what the Python client's `stream()` and `portforward()` and kubectl >= 1.30's exec speak.
SPDY: kubectl's exec before 1.30 and every kubectl's port-forward (a plain `Upgrade: SPDY/3.1`, or from
1.31 SPDY tunnelled in a WebSocket of subprotocol `SPDY/3.1+portforward.k8s.io`).

The command runs in the container's namespaces and cgroup (nsenter, as root), with the container's
environment and working directory; no TTY is allocated (`tty=true` runs without one).
"""
from __future__ import annotations

import asyncio
import json
import re
import struct

from aiohttp import WSMsgType, web

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.endpoints import streams_spdy

EXEC = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<pod>[^/]+)/(?P<verb>exec|portforward)$")
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "channel.k8s.io")
TUNNEL = streams_spdy.TUNNEL_PREFIX + streams_spdy.PORTFORWARD_PROTOCOLS[0]


def add_stream_routes(api) -> None:
    store = api.store

    async def handle(request: web.Request, match: re.Match):
        procs = store.kubelet.process_pods() if store.kubelet is not None else None
        pod = store.get(store.registry.lookup("", "v1", "pods"), match["namespace"], match["pod"])   # 404
        uid = procs.runs_pod(match["namespace"], match["pod"]) if procs else None
        if uid is None:
            raise ApiError(400, f"pod {match['pod']} does not run on a process node: kubesim can exec into and "
                                "port-forward to process pods only", "BadRequest")
        exec_ = match["verb"] == "exec"
        if exec_ and not any(request.query.get(k) in ("1", "true", "True") for k in ("stdin", "stdout", "stderr")):
            raise ApiError(400, "you must specify at least 1 of stdin, stdout, stderr", "BadRequest")  # apiserver's
        start = lambda: _start_exec(procs, uid, pod, request.query)      # noqa: E731
        connect = lambda port: procs.connect(uid, port)                  # noqa: E731
        if streams_spdy.wants_spdy(request):
            protocol = streams_spdy.negotiate(request, streams_spdy.EXEC_PROTOCOLS if exec_
                                              else streams_spdy.PORTFORWARD_PROTOCOLS)
            if isinstance(protocol, web.Response):
                return protocol
            resp, read, write = await streams_spdy.upgrade(request, protocol)
            if exec_:
                await streams_spdy.serve_exec(read, write, protocol, request.query, start, _status)
            else:
                await streams_spdy.serve_portforward(read, write, connect, match["pod"], uid)
            request.transport.close()       # the upgraded connection ends with its session
            return resp
        ws = web.WebSocketResponse(protocols=PROTOCOLS if exec_ else (TUNNEL, *PROTOCOLS), max_msg_size=4 << 20)
        if not ws.can_prepare(request).ok:
            raise ApiError(400, "Upgrade request required: a WebSocket (v4/v5.channel.k8s.io, or "
                                f"{TUNNEL} for port-forward) or SPDY/3.1", "BadRequest")
        await ws.prepare(request)
        if exec_:
            await _exec(ws, start)
        elif ws.ws_protocol == TUNNEL:      # kubectl >= 1.31's port-forward: SPDY frames in binary messages
            read, write = streams_spdy.tunnel(ws)
            await streams_spdy.serve_portforward(read, write, connect, match["pod"], uid)
            await ws.close()
        else:
            await _portforward(ws, connect, uid, request)
        return ws

    api.routes.append((EXEC, handle))


async def _start_exec(procs, uid: str, pod: dict, query):
    """The exec'd process (and its argv) in the container the query names (its first by default)."""
    argv = query.getall("command", [])
    container = query.get("container") or pod["spec"]["containers"][0]["name"]
    return await procs.exec(uid, container, argv), argv


def _status(code: int, argv: list[str]) -> dict:
    """The exec's final metav1.Status (the kubelet's, for WebSocket and SPDY alike)."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: error executing command {argv}, exit code {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


async def _exec(ws, start) -> None:
    try:
        proc, argv = await start()
    except (LookupError, OSError) as e:
        await ws.send_bytes(b"\x03" + json.dumps({"metadata": {}, "status": "Failure", "message": str(e),
                                                  "reason": "InternalError"}).encode())
        await ws.close()
        return

    async def pump(stream, channel: int):
        while data := await stream.read(65536):
            await ws.send_bytes(bytes([channel]) + data)

    async def stdin():
        # text frames carry stdin too (the Python client's write_stdin of a str sends one): the kubelet reads
        # every message into bytes (k8s.io/apimachinery/pkg/util/httpstream/wsstream/conn.go `Conn.handle`,
        # websocket.Message.Receive into a []byte), whatever its frame type
        async for msg in ws:
            if msg.type == WSMsgType.TEXT:
                data = msg.data.encode()
            elif msg.type == WSMsgType.BINARY:
                data = msg.data
            else:
                continue
            if not data or proc.stdin is None:
                continue
            if data[0] == 0:
                proc.stdin.write(data[1:])
                await proc.stdin.drain()
            elif data[:2] == b"\xff\x00":         # v5 (conn.go `remoteClosed`): the client closed stdin
                proc.stdin.close()
    reader = asyncio.ensure_future(stdin())
    await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
    code = await proc.wait()
    await ws.send_bytes(b"\x03" + json.dumps(_status(code if code >= 0 else 128 - code, argv)).encode())
    reader.cancel()
    await ws.close()


async def _portforward(ws, connect, uid: str, request: web.Request) -> None:
    ports = [int(p) for p in ",".join(request.query.getall("ports", [])).split(",") if p.strip()]
    writers = {}
    pumps = []
    for i, port in enumerate(ports):
        for channel in (2 * i, 2 * i + 1):
            await ws.send_bytes(bytes([channel]) + struct.pack("<H", port))
        try:
            reader, writer = await connect(port)
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
