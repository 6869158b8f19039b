"""`pods/<name>/exec` and `/portforward` over SPDY/3.1 (spdy.py), as the kubelet serves them to kubectl.

The upgrade (k8s.io/apimachinery/pkg/util/httpstream: Handshake, spdy/upgrade.go): the client lists its
protocol versions in `X-Stream-Protocol-Version`; the first of them the server speaks is answered in a 101
with `Connection: Upgrade`, `Upgrade: SPDY/3.1`; none of them is a 403 listing the server's in
`X-Accepted-Stream-Protocol-Versions`. kubectl >= 1.31's port-forward asks instead for a WebSocket whose
subprotocol is `SPDY/3.1+portforward.k8s.io` and sends the same SPDY frames in binary messages
(client-go/tools/portforward/tunneling_dialer.go, tunneling_connection.go): `tunnel()` reads and writes them.

exec (pkg/kubelet/cri/streaming/remotecommand/httpstream.go): the client opens one stream per `streamType`
header (error, and stdin / stdout / stderr / resize as the query asked), within 30 s (the kubelet's stream
creation timeout); the command's output goes to stdout / stderr, each ended with FIN; the error stream
carries the end: v4.channel.k8s.io a metav1.Status JSON with the exit code (what makes kubectl exit with
it), v1-v3 the error text on failure only.
port-forward (pkg/kubelet/cri/streaming/portforward/httpstream.go): per forwarded connection a data and an
error stream sharing a `requestID` (older clients: paired by stream id) and a `port` header; the data stream
is the connection, the error stream says why a port could not be reached.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from aiohttp import WSMsgType, web

from kubesim.apiserver.endpoints import spdy

log = logging.getLogger("kubesim")

EXEC_PROTOCOLS = ("v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORTFORWARD_PROTOCOLS = ("portforward.k8s.io",)
TUNNEL_PREFIX = "SPDY/3.1+"          # k8s.io/apimachinery/pkg/util/portforward WebsocketsSPDYTunnelingPrefix
STREAM_CREATION_TIMEOUT = 30.0       # kubelet's DefaultStreamCreationTimeout
GOODBYE_TIMEOUT = 5.0                # after GOAWAY, how long the client gets to hang up


def wants_spdy(request: web.Request) -> bool:
    return ("upgrade" in request.headers.get("Connection", "").lower()
            and "spdy/3.1" in request.headers.get("Upgrade", "").lower())


def negotiate(request: web.Request, server: tuple[str, ...]) -> str | web.Response:
    """httpstream.Handshake: the client's first protocol the server speaks, else the error answer."""
    client = [p.strip() for h in request.headers.getall("X-Stream-Protocol-Version", []) for p in h.split(",")
              if p.strip()]
    if not client:
        return web.Response(status=400, text="unable to upgrade: X-Stream-Protocol-Version is required")
    for p in client:
        if p in server:
            return p
    return web.Response(status=403, headers=[("X-Accepted-Stream-Protocol-Versions", p) for p in server],
                        text=f"unable to upgrade: unable to negotiate protocol: client supports "
                             f"{[c[:40] for c in client[:8]]}, server accepts {list(server)}")


class _Feed:
    """aiohttp's payload-parser hook: the upgraded connection's bytes, read by the session; past `limit`
    unread bytes the transport stops reading (TCP back-pressure) until the session catches up."""

    def __init__(self, transport, limit: int = 1 << 16):
        self.transport, self.limit = transport, limit
        self.buf = bytearray()
        self.eof = self.paused = False
        self.ready = asyncio.Event()

    def feed_data(self, data: bytes):
        self.buf += data
        self.ready.set()
        if len(self.buf) > self.limit and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self.eof = True
        self.ready.set()

    async def read(self) -> bytes:
        while not self.buf and not self.eof:
            self.ready.clear()
            await self.ready.wait()
        data = bytes(self.buf)
        self.buf.clear()
        if self.paused and not self.transport.is_closing():
            self.paused = False
            self.transport.resume_reading()
        return data


async def upgrade(request: web.Request, protocol: str):
    """Answer 101 SPDY/3.1 and hand over the connection: (response, read, write)."""
    feed = _Feed(request.transport)
    request.protocol.set_parser(feed)     # before the 101: the client's first frame may follow it at once
    request.protocol.keep_alive(False)
    resp = web.StreamResponse(status=101, headers={"Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                                   "X-Stream-Protocol-Version": protocol})
    await resp.prepare(request)
    return resp, feed.read, resp.write


def tunnel(ws: web.WebSocketResponse):
    """(read, write) of SPDY frames carried in a WebSocket's binary messages."""
    async def read() -> bytes:
        while True:
            msg = await ws.receive()
            if msg.type == WSMsgType.BINARY:
                if msg.data:
                    return msg.data
                continue
            return b""                  # close, error or a text message: the tunnel ends
    return read, ws.send_bytes


async def _serve(session: spdy.Session, work) -> None:
    """Run `work(session)` beside the frame reader; when it is done say GOAWAY and give the client a moment
    to hang up; when the client goes first, `work` is cancelled."""
    reader = asyncio.ensure_future(session.serve())
    job = asyncio.ensure_future(work)
    try:
        await asyncio.wait({reader, job}, return_when=asyncio.FIRST_COMPLETED)
        if job.done() and not reader.done():
            with contextlib.suppress(ConnectionError, RuntimeError):
                await session.goaway()
            await asyncio.wait({reader}, timeout=GOODBYE_TIMEOUT)
    finally:
        for t in (job, reader):
            t.cancel()
        await asyncio.gather(job, reader, return_exceptions=True)
        if job.done() and not job.cancelled() and job.exception() is not None:
            log.warning("kubesim: SPDY stream handler failed: %r", job.exception())
        if session.error:
            log.info("kubesim: SPDY session ended: %s", session.error)


def _flag(query, name: str) -> bool:
    return query.get(name, "") in ("1", "true", "True")


async def _drain(stream: spdy.Stream) -> None:
    """Read and drop what the client sends on a stream this side only writes (so it never stalls the session)."""
    while await stream.read():
        pass


async def serve_exec(read, write, protocol: str, query, start, status) -> None:
    """exec over one SPDY session. `start()` starts the command (the process, or raises LookupError /
    OSError); `status(code)` is the v4 Status dict for its exit code (routes_streams.py, shared with the
    WebSocket exec)."""
    stdin, stdout, stderr, tty = (_flag(query, n) for n in ("stdin", "stdout", "stderr", "tty"))
    if tty:
        stderr = False                  # the kubelet: no stderr stream with a TTY
    expected = 1 + stdin + stdout + stderr + (tty and protocol in EXEC_PROTOCOLS[:2])
    streams: dict[str, spdy.Stream] = {}
    complete = asyncio.Event()

    def on_stream(s: spdy.Stream) -> None:
        kind = s.header("streamType")
        if kind not in ("error", "stdin", "stdout", "stderr", "resize") or kind in streams:
            raise ValueError(kind)
        streams[kind] = s
        if len(streams) >= expected:
            complete.set()

    session = spdy.Session(read, write, on_stream, max_streams=8)
    await _serve(session, _exec(session, streams, complete, protocol, start, status))


async def _exec(session, streams, complete, protocol: str, start, status) -> None:
    try:
        await asyncio.wait_for(complete.wait(), STREAM_CREATION_TIMEOUT)
    except TimeoutError:
        log.info("kubesim: exec: timed out waiting for the client to create streams")
        return
    err = streams["error"]
    helpers = [asyncio.ensure_future(_drain(s)) for k, s in streams.items() if k in ("error", "resize")]
    try:
        try:
            proc, argv = await start()
        except (LookupError, OSError) as e:
            await _end(err, protocol, {"metadata": {}, "status": "Failure", "message": str(e),
                                       "reason": "InternalError", "code": 500})
            return

        async def pump(source, kind: str):
            target = streams.get(kind)
            while data := await source.read(65536):
                if target is not None and not target.closed:
                    with contextlib.suppress(ConnectionError):
                        await target.write(data)
            if target is not None:
                with contextlib.suppress(ConnectionError):
                    await target.close()

        async def feed_stdin():
            s = streams.get("stdin")
            with contextlib.suppress(ConnectionError, BrokenPipeError):
                while s is not None and (data := await s.read()):
                    proc.stdin.write(data)
                    await proc.stdin.drain()
            proc.stdin.close()
        helpers.append(asyncio.ensure_future(feed_stdin()))
        await asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"))
        code = await proc.wait()
        await _end(err, protocol, status(code if code >= 0 else 128 - code, argv))
    finally:
        for h in helpers:
            h.cancel()
        for s in streams.values():      # stdin the command no longer reads is dropped, not buffered
            s.remove()


async def _end(err: spdy.Stream, protocol: str, status: dict) -> None:
    """The error stream's last word: v4 the Status JSON always, older protocols the message on failure."""
    with contextlib.suppress(ConnectionError):
        if protocol == EXEC_PROTOCOLS[0]:
            await err.write(json.dumps(status).encode())
        elif status.get("status") != "Success":
            await err.write(status.get("message", "").encode())
        await err.close()


async def serve_portforward(read, write, connect, pod: str, uid: str) -> None:
    """port-forward over one SPDY session; `connect(port)` opens (reader, writer) to the pod's port."""
    pairs: dict[str, dict[str, spdy.Stream]] = {}
    tasks: set[asyncio.Task] = set()

    def on_stream(s: spdy.Stream) -> None:
        port, kind = s.header("port"), s.header("streamType")
        if not port.isdigit() or not 0 < int(port) < 65536 or kind not in ("data", "error"):
            raise ValueError(f"port {port[:8]!r}, streamType {kind[:8]!r}")
        request_id = s.header("requestID") or str(s.id if kind == "error" else s.id - 2)   # pre-1.5 clients
        pair = pairs.setdefault(request_id[:64], {})
        if kind in pair:
            raise ValueError(f"{kind} stream already assigned")
        pair[kind] = s
        if len(pair) == 2:
            del pairs[request_id[:64]]
            spawn(_forward(pair["data"], pair["error"], int(port), connect, pod, uid))
        else:
            spawn(_expire(pairs, request_id[:64]))

    def spawn(coro) -> None:
        t = asyncio.ensure_future(coro)
        tasks.add(t)
        t.add_done_callback(tasks.discard)

    async def until_closed() -> None:
        await asyncio.Event().wait()      # the session ends when the client hangs up

    session = spdy.Session(read, write, on_stream)
    try:
        await _serve(session, until_closed())
    finally:
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _expire(pairs: dict, request_id: str) -> None:
    """A data stream without its error stream (or back) after the creation timeout is given up."""
    await asyncio.sleep(STREAM_CREATION_TIMEOUT)
    pair = pairs.pop(request_id, None)
    for s in (pair or {}).values():
        await s.reset()


async def _forward(data: spdy.Stream, err: spdy.Stream, port: int, connect, pod: str, uid: str) -> None:
    try:
        reader, writer = await connect(port)
    except (ConnectionError, OSError) as e:
        with contextlib.suppress(ConnectionError):
            await err.write(f"error forwarding port {port} to pod {pod}, uid {uid}: {e}".encode())
            await err.close()
            await data.close()
        data.remove()
        err.remove()
        return

    async def upstream():               # client -> pod; the client's FIN half-closes the pod's socket
        with contextlib.suppress(ConnectionError):
            while chunk := await data.read():
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
    up = asyncio.ensure_future(upstream())
    drain = asyncio.ensure_future(_drain(err))
    try:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                await data.write(chunk)
            await data.close()
            await err.close()
    finally:
        up.cancel()
        drain.cancel()
        writer.close()
        data.remove()
        err.remove()
