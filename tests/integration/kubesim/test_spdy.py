"""kubesim/apiserver/endpoints/spdy.py, the SPDY/3.1 codec and session behind kubectl's exec and port-forward: frames round-trip,
header blocks another implementation compressed decode (one built by hand per RFC 1950/1951, one written
live by Debian's kubectl), bad frames are refused with a clear, bounded error, and a session keeps its
bounds (streams, windows). Real kubectl end to end: test_kubectl_streams.py."""
from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import threading
import zlib

import pytest

from kubesim.apiserver.endpoints import spdy
from tests.integration.kubesim.test_kubectl import DEBIAN_KUBECTL


def test_every_frame_round_trips():
    frames = [
        (spdy.syn_stream(3, b"blk", fin=True), (spdy.SYN_STREAM, spdy.FLAG_FIN, 3, b"blk", 0)),
        (spdy.syn_reply(5, b"xy"), (spdy.SYN_REPLY, 0, 5, b"xy", 0)),
        (spdy.rst_stream(7, spdy.REFUSED_STREAM), (spdy.RST_STREAM, 0, 7, b"", spdy.REFUSED_STREAM)),
        (spdy.ping(9), (spdy.PING, 0, 0, b"", 9)),
        (spdy.goaway(11, spdy.GOAWAY_PROTOCOL_ERROR), (spdy.GOAWAY, 0, 11, b"", spdy.GOAWAY_PROTOCOL_ERROR)),
        (spdy.window_update(0, 4096), (spdy.WINDOW_UPDATE, 0, 0, b"", 4096)),
        (spdy.data_frame(13, b"hello", fin=True), (0, spdy.FLAG_FIN, 13, b"hello", 0)),
        (spdy.data_frame(15, b""), (0, 0, 15, b"", 0)),
    ]
    for raw, (kind, flags, stream_id, payload, value) in frames:
        frame, used = spdy.decode_frame(raw + b"next")
        assert used == len(raw)
        assert (frame.kind, frame.flags, frame.stream_id, frame.payload, frame.value) == \
            (kind, flags, stream_id, payload, value)
    frame, _ = spdy.decode_frame(spdy.settings_frame({spdy.SETTINGS_INITIAL_WINDOW_SIZE: 1 << 20}))
    assert frame.settings == {spdy.SETTINGS_INITIAL_WINDOW_SIZE: 1 << 20}
    assert spdy.decode_frame(spdy.data_frame(1, b"abc")[:10]) is None        # incomplete: wait for more


def test_header_blocks_share_one_zlib_context_per_direction():
    sender, receiver = spdy.HeaderCodec(), spdy.HeaderCodec()
    first = {"streamtype": ["error"], "port": ["8888"], "x": ["a", "b"]}
    second = {"streamtype": ["data"], "port": ["8888"]}
    a, b = sender.compress(first), sender.compress(second)
    assert receiver.decompress(a) == first
    assert receiver.decompress(b) == second
    with pytest.raises(spdy.SpdyError):              # the second block alone: its context is the first's
        spdy.HeaderCodec().decompress(b)


def test_a_block_built_by_hand_per_rfc_1950_with_the_spdy3_dictionary_decodes():
    """No zlib on the sending side: a zlib header with FDICT and the dictionary's adler32, one stored deflate
    block, as any SPDY/3 peer may send (draft 3 2.6.10.1 requires the dictionary, not compression)."""
    plain = struct.pack(">I", 1) + struct.pack(">I", 10) + b"streamtype" + struct.pack(">I", 6) + b"stdout"
    cmf, flg = 0x78, 0x20                              # deflate, 32K window; FDICT
    flg += 31 - ((cmf << 8) + flg) % 31
    stored = b"\x00" + struct.pack("<HH", len(plain), len(plain) ^ 0xFFFF) + plain    # BFINAL=0, BTYPE=00
    block = bytes([cmf, flg]) + struct.pack(">I", zlib.adler32(spdy.DICTIONARY)) + stored
    assert spdy.HeaderCodec().decompress(block) == {"streamtype": ["stdout"]}
    assert len(spdy.DICTIONARY) == 1423               # the draft's array: 1423 bytes


@pytest.mark.skipif(not DEBIAN_KUBECTL.is_file(), reason="Debian's kubectl is not unpacked: run `make kubectl`")
def test_the_first_stream_debian_kubectl_opens_decodes(tmp_path):
    """A header block compressed by another implementation (Go's compress/zlib in moby/spdystream), live: a
    bare socket server answers kubectl's GET of the pod, then its upgrade with 101, and keeps the SYN_STREAM
    kubectl writes next."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    captured = bytearray()
    answers = {   # what kubectl reads before its upgrade: discovery, then the pod
        "/api": {"kind": "APIVersions", "versions": ["v1"]},
        "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": []},
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
            {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions", "verbs": []}]},
        "/api/v1/namespaces/default/pods/x": {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"},
            "spec": {"containers": [{"name": "main", "image": "i"}]}, "status": {"phase": "Running"}}}

    def serve():
        while not captured:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(20)
                head = b""
                while b"\r\n\r\n" not in head:
                    head += conn.recv(4096)
                if not head.startswith(b"POST"):
                    path = head.split(b" ")[1].decode().split("?")[0]
                    body = json.dumps(answers.get(path, {"kind": "Status", "code": 404})).encode()
                    conn.sendall(b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                                 b"Content-Length: %d\r\n\r\n" % (200 if path in answers else 404, len(body)) + body)
                    continue
                conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                             b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n")
                buf = bytearray(head.split(b"\r\n\r\n", 1)[1])
                while spdy.decode_frame(buf) is None:
                    buf.extend(conn.recv(4096))
                captured.extend(buf)
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: "
                          f"'http://127.0.0.1:{srv.getsockname()[1]}'}}}}]\ncontexts: [{{name: c, context: "
                          "{cluster: c, user: u, namespace: default}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n")
    kubectl = subprocess.Popen([str(DEBIAN_KUBECTL), "exec", "x", "--", "true"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={"KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)})
    t.join(30)             # until the frame is in (kubectl then waits for a SYN_REPLY that never comes)
    kubectl.kill()
    kubectl.wait()
    srv.close()
    frame, _ = spdy.decode_frame(captured)
    assert (frame.kind, frame.stream_id) == (spdy.SYN_STREAM, 1)
    assert spdy.HeaderCodec().decompress(frame.payload) == {"streamtype": ["error"]}


def test_bad_frames_are_refused_with_a_clear_bounded_error():
    v2 = struct.pack(">HHI", 0x8000 | 2, spdy.SYN_STREAM, 10) + b"\0" * 10
    with pytest.raises(spdy.SpdyError, match="version 2, not 3"):
        spdy.decode_frame(v2)
    huge = struct.pack(">II", 1, (1 << 24) - 1)        # 16 MiB announced: refused from its 8-byte header
    with pytest.raises(spdy.SpdyError, match="exceeds the limit"):
        spdy.decode_frame(huge)
    with pytest.raises(spdy.SpdyError, match="RST_STREAM frame of 4 bytes"):
        spdy.decode_frame(spdy.control(spdy.RST_STREAM, 0, b"\0\0\0\1"))
    with pytest.raises(spdy.SpdyError, match="data frame on stream 0"):
        spdy.decode_frame(struct.pack(">II", 0, 1) + b"x")
    with pytest.raises(spdy.SpdyError, match="does not inflate") as e:
        spdy.HeaderCodec().decompress(b"\x78\xbb" + b"garbage" * 1000)
    assert len(str(e.value)) < 200                      # an excerpt, never the whole input
    codec = spdy.HeaderCodec()
    bomb = spdy.HeaderCodec().compress({"a": "x" * (spdy.MAX_HEADER_BLOCK * 4)})
    assert len(bomb) < 1000
    with pytest.raises(spdy.SpdyError, match="past the limit"):
        codec.decompress(bomb)
    many = {f"h{i}": "v" for i in range(spdy.MAX_HEADERS + 1)}
    with pytest.raises(spdy.SpdyError, match="exceeds the limit of 64"):
        spdy.HeaderCodec().decompress(spdy.HeaderCodec().compress(many))
    with pytest.raises(spdy.SpdyError, match="truncated"):
        spdy.decode_headers(struct.pack(">II", 1, 100) + b"short")
    with pytest.raises(spdy.SpdyError, match="not lowercase"):
        spdy.decode_headers(spdy.encode_headers({"a": "1"}).replace(b"a", b"A"))


class Peer:
    """A client in memory: frames go to the session through `send`, the session's bytes are parsed back."""

    def __init__(self, on_stream, **kw):
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.out = bytearray()
        self.codec = spdy.HeaderCodec()
        self.session = spdy.Session(self.inbox.get, self._write, on_stream, **kw)

    async def _write(self, data: bytes) -> None:
        self.out += data

    def send(self, data: bytes) -> None:
        self.inbox.put_nowait(data)

    def open(self, stream_id: int, headers: dict, fin: bool = False) -> None:
        self.send(spdy.syn_stream(stream_id, self.codec.compress(headers), fin=fin))

    def frames(self) -> list:
        got, buf = [], bytes(self.out)
        while (f := spdy.decode_frame(buf)) is not None:
            got.append(f[0])
            buf = buf[f[1]:]
        return got


async def settle():
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_session_replies_echoes_pings_refuses_past_max_streams_and_sends_window_updates():
    accepted = []
    peer = Peer(lambda s: accepted.append(s), max_streams=2)
    serving = asyncio.ensure_future(peer.session.serve())
    for sid in (1, 3, 5):
        peer.open(sid, {"streamtype": "data"})
    peer.send(spdy.ping(7))
    await settle()
    kinds = [(f.kind, f.stream_id or f.value) for f in peer.frames()]
    assert kinds == [(spdy.SYN_REPLY, 1), (spdy.SYN_REPLY, 3), (spdy.RST_STREAM, 5), (spdy.PING, 7)]
    peer.out.clear()
    peer.send(spdy.data_frame(1, b"x" * 1000, fin=True))
    await settle()
    assert await accepted[0].read() == b"x" * 1000 and await accepted[0].read() == b""
    await accepted[1].write(b"out")
    await accepted[1].close()
    got = [(f.kind, f.stream_id, f.payload, f.flags) for f in peer.frames()]
    assert got == [(0, 3, b"out", 0), (0, 3, b"", spdy.FLAG_FIN)]
    peer.send(b"")                                         # the client hangs up
    await asyncio.wait_for(serving, 5)


async def test_a_peer_that_overruns_its_window_is_held_by_back_pressure_not_buffered():
    streams = []
    peer = Peer(lambda s: streams.append(s))
    serving = asyncio.ensure_future(peer.session.serve())
    peer.open(1, {"streamtype": "stdin"})
    for _ in range(4):                                     # 4 x 32 KiB with nobody reading: 2 windows' worth
        peer.send(spdy.data_frame(1, b"y" * 32768))
    await settle()
    assert peer.inbox.qsize() >= 1                         # the session stopped reading the connection
    assert len(streams[0]._buf) <= spdy.INITIAL_WINDOW
    data = b""
    while len(data) < 4 * 32768:
        data += await streams[0].read()
    updates = [f for f in peer.frames() if f.kind == spdy.WINDOW_UPDATE]
    assert sum(f.value for f in updates if f.stream_id == 1) == 4 * 32768     # SPDY/3.1: reopened as consumed
    assert sum(f.value for f in updates if f.stream_id == 0) == 4 * 32768     # and the session window
    streams[0].remove()                                    # done with it: what still comes is dropped
    for _ in range(4):
        peer.send(spdy.data_frame(1, b"z" * 32768))
    peer.open(3, {"streamtype": "stdin"})
    await settle()
    assert peer.inbox.empty() and len(streams) == 2 and not streams[0]._buf    # the session read on
    peer.send(b"")
    await asyncio.wait_for(serving, 5)


async def test_a_protocol_error_ends_the_session_with_goaway():
    peer = Peer(lambda s: None)
    serving = asyncio.ensure_future(peer.session.serve())
    peer.open(2, {"streamtype": "data"})                  # even: a server's id, never a client's
    await asyncio.wait_for(serving, 5)
    assert [(f.kind, f.value) for f in peer.frames()] == [(spdy.GOAWAY, spdy.GOAWAY_PROTOCOL_ERROR)]
    assert "stream id 2" in peer.session.error


async def test_a_peer_that_keeps_windows_is_sent_no_more_than_it_opened():
    """SPDY/3.1 send side: once the peer shows it keeps windows (SETTINGS_INITIAL_WINDOW_SIZE here), writes
    wait for its WINDOW_UPDATE; moby/spdystream never sends one, so it is never waited for."""
    streams = []
    peer = Peer(lambda s: streams.append(s))
    serving = asyncio.ensure_future(peer.session.serve())
    peer.send(spdy.settings_frame({spdy.SETTINGS_INITIAL_WINDOW_SIZE: 1000}))
    peer.open(1, {"streamtype": "stdout"})
    await settle()
    writing = asyncio.ensure_future(streams[0].write(b"a" * 2500))
    await settle()

    def sent() -> int:
        return sum(len(f.payload) for f in peer.frames() if f.kind == 0)
    assert sent() == 1000 and not writing.done()
    peer.send(spdy.window_update(1, 1500))
    await settle()
    assert writing.done() and sent() == 2500
    peer.send(b"")
    await asyncio.wait_for(serving, 5)
