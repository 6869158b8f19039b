"""SPDY/3.1, the server side of the multiplexed streams kubectl's exec and port-forward open (streams_spdy.py).

Framing per the SPDY/3 draft (http://www.chromium.org/spdy/spdy-protocol/spdy-protocol-draft3) with SPDY/3.1's
flow control (spdy-protocol-draft3-1: per-stream and session windows of 64 KiB, WINDOW_UPDATE on stream 0
for the session). The peer every kubectl embeds is moby/spdystream (k8s.io/apimachinery/pkg/util/httpstream/
spdy): one zlib context per direction for header blocks, seeded with the draft's dictionary; it sends no
WINDOW_UPDATE and ignores ours, so this side never stalls on a window the peer never opened (it honours a
window once the peer shows it keeps one) and bounds its own memory instead: a stream buffers at most its
window of unread data, beyond which the session stops reading the connection (TCP back-pressure).

Everything a peer controls is bounded (a team member with a kubeconfig may be hostile): frame length, header
block size after inflating, header count, open streams. A bad frame is a `SpdyError` naming what was wrong
with a short excerpt; the session answers it with GOAWAY PROTOCOL_ERROR and ends.
"""
from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN, FLAG_UNIDIRECTIONAL = 0x01, 0x02
# RST_STREAM status codes (draft 3, 2.6.3)
PROTOCOL_ERROR, INVALID_STREAM, REFUSED_STREAM, CANCEL, INTERNAL_ERROR, FLOW_CONTROL_ERROR = 1, 2, 3, 5, 6, 7
STREAM_IN_USE, FRAME_TOO_LARGE = 8, 11
GOAWAY_OK, GOAWAY_PROTOCOL_ERROR = 0, 1
SETTINGS_MAX_CONCURRENT_STREAMS, SETTINGS_INITIAL_WINDOW_SIZE = 4, 7

INITIAL_WINDOW = 64 * 1024
MAX_FRAME_LENGTH = 1 << 20       # a data or control frame's payload; spdystream writes what kubectl copies (32 KiB)
MAX_HEADER_BLOCK = 16 * 1024     # a header block inflated; kubectl's are ~100 bytes
MAX_HEADERS = 64
MAX_STREAMS = 128                # open at once on one session (port-forward: 2 per forwarded connection)
SEND_CHUNK = 32 * 1024

# The SPDY/3 header dictionary (draft 3, 2.6.10.1): length-prefixed words, then plain text. Byte-exact or the
# peer's inflate refuses the stream (zlib checks the dictionary's adler32).
_WORDS = ("options head post put delete trace accept accept-charset accept-encoding accept-language "
          "accept-ranges age allow authorization cache-control connection content-base content-encoding "
          "content-language content-length content-location content-md5 content-range content-type date etag "
          "expect expires from host if-match if-modified-since if-none-match if-range if-unmodified-since "
          "last-modified location max-forwards pragma proxy-authenticate proxy-authorization range referer "
          "retry-after server te trailer transfer-encoding upgrade user-agent vary via warning www-authenticate "
          "method get status").split() + ["200 OK"] + "version HTTP/1.1 url public set-cookie keep-alive origin".split()
_TEXT = ("100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
         "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
         "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
         "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
         "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
         "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TEXT.encode()


class SpdyError(Exception):
    """A frame the protocol (or kubesim's bounds) refuses; the session answers GOAWAY PROTOCOL_ERROR."""


def _excerpt(data: bytes) -> str:
    return data[:16].hex() + ("..." if len(data) > 16 else "")


# --- frames: pure encode / decode ---------------------------------------------------------------------

@dataclass
class Frame:
    """One frame. Control frames: `kind` is the type; data frames: `kind` is 0. `payload` is the frame's
    data after the fields decoded here (a header block still compressed, for the session's zlib context)."""
    kind: int
    flags: int
    stream_id: int = 0
    payload: bytes = b""
    value: int = 0                       # RST_STREAM / GOAWAY status, PING id, WINDOW_UPDATE delta
    settings: dict = field(default_factory=dict)


def control(kind: int, flags: int, payload: bytes) -> bytes:
    if len(payload) >= 1 << 24:
        raise SpdyError(f"control frame of {len(payload)} bytes exceeds SPDY's 24-bit length")
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, data: bytes, fin: bool = False) -> bytes:
    if not 0 < stream_id < 1 << 31 or len(data) >= 1 << 24:
        raise SpdyError(f"data frame: stream id {stream_id} or length {len(data)} out of range")
    return struct.pack(">II", stream_id, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data


def syn_reply(stream_id: int, block: bytes, fin: bool = False) -> bytes:
    return control(SYN_REPLY, FLAG_FIN if fin else 0, struct.pack(">I", stream_id) + block)


def syn_stream(stream_id: int, block: bytes, fin: bool = False, associated: int = 0, priority: int = 0) -> bytes:
    return control(SYN_STREAM, FLAG_FIN if fin else 0,
                   struct.pack(">IIBB", stream_id, associated, (priority & 7) << 5, 0) + block)


def rst_stream(stream_id: int, status: int) -> bytes:
    return control(RST_STREAM, 0, struct.pack(">II", stream_id, status))


def settings_frame(values: dict[int, int]) -> bytes:
    body = struct.pack(">I", len(values)) + b"".join(struct.pack(">II", k & 0xFFFFFF, v) for k, v in values.items())
    return control(SETTINGS, 0, body)


def ping(ping_id: int) -> bytes:
    return control(PING, 0, struct.pack(">I", ping_id))


def goaway(last_stream_id: int, status: int = GOAWAY_OK) -> bytes:
    return control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))


def window_update(stream_id: int, delta: int) -> bytes:
    return control(WINDOW_UPDATE, 0, struct.pack(">II", stream_id, delta))


def decode_frame(buf: bytes | bytearray | memoryview, max_length: int = MAX_FRAME_LENGTH) -> tuple[Frame, int] | None:
    """The first frame of `buf` and the bytes it used, or None while it is incomplete. Raises SpdyError on a
    frame no SPDY/3 peer sends, or longer than `max_length`, before waiting for its payload."""
    if len(buf) < 8:
        return None
    word, flags_len = struct.unpack_from(">II", buf)
    flags, length = flags_len >> 24, flags_len & 0xFFFFFF
    if length > max_length:
        raise SpdyError(f"frame of {length} bytes exceeds the limit of {max_length} (header {_excerpt(bytes(buf[:8]))})")
    if len(buf) < 8 + length:
        return None
    body = bytes(buf[8:8 + length])
    if not word & 0x80000000:
        stream_id = word & 0x7FFFFFFF
        if stream_id == 0:
            raise SpdyError("data frame on stream 0")
        return Frame(0, flags, stream_id, body), 8 + length
    version, kind = (word >> 16) & 0x7FFF, word & 0xFFFF
    if version != VERSION:
        raise SpdyError(f"control frame of SPDY version {version}, not 3 (header {_excerpt(bytes(buf[:8]))})")
    return _control(kind, flags, body), 8 + length


_FIXED = {SYN_STREAM: 10, SYN_REPLY: 4, RST_STREAM: 8, SETTINGS: 4, PING: 4, GOAWAY: 8, HEADERS: 4, WINDOW_UPDATE: 8}
_NAMES = {SYN_STREAM: "SYN_STREAM", SYN_REPLY: "SYN_REPLY", RST_STREAM: "RST_STREAM", SETTINGS: "SETTINGS",
          PING: "PING", GOAWAY: "GOAWAY", HEADERS: "HEADERS", WINDOW_UPDATE: "WINDOW_UPDATE"}


def _control(kind: int, flags: int, body: bytes) -> Frame:
    need = _FIXED.get(kind)
    if need is None:                      # draft 3 2.2.1: unknown control frames are ignored
        return Frame(kind, flags, payload=b"")
    if len(body) < need or (kind in (RST_STREAM, PING, GOAWAY, WINDOW_UPDATE) and len(body) != need):
        raise SpdyError(f"{_NAMES[kind]} frame of {len(body)} bytes (needs {need}): {_excerpt(body)}")
    if kind in (SYN_STREAM, SYN_REPLY, HEADERS, RST_STREAM, WINDOW_UPDATE):
        stream_id = struct.unpack_from(">I", body)[0] & 0x7FFFFFFF
        if stream_id == 0 and kind != WINDOW_UPDATE:
            raise SpdyError(f"{_NAMES[kind]} on stream 0")
    if kind == SYN_STREAM:
        return Frame(kind, flags, stream_id, body[10:])
    if kind in (SYN_REPLY, HEADERS):
        return Frame(kind, flags, stream_id, body[4:])
    if kind in (RST_STREAM, WINDOW_UPDATE):
        value = struct.unpack_from(">I", body, 4)[0] & (0x7FFFFFFF if kind == WINDOW_UPDATE else 0xFFFFFFFF)
        return Frame(kind, flags, stream_id, value=value)
    if kind == PING:
        return Frame(kind, flags, value=struct.unpack(">I", body)[0])
    if kind == GOAWAY:
        last, status = struct.unpack(">II", body)
        return Frame(kind, flags, last & 0x7FFFFFFF, value=status)
    count = struct.unpack_from(">I", body)[0]           # SETTINGS
    if len(body) != 4 + 8 * count:
        raise SpdyError(f"SETTINGS frame says {count} entries in {len(body)} bytes")
    values = {}
    for i in range(count):
        flag_id, value = struct.unpack_from(">II", body, 4 + 8 * i)
        values[flag_id & 0xFFFFFF] = value
    return Frame(kind, flags, settings=values)


# --- header blocks: one zlib context per direction (draft 3 2.6.10) ------------------------------------

def encode_headers(headers: dict[str, list[str] | str]) -> bytes:
    """A header block before compression: lowercase names, several values joined by NUL."""
    out = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        n = name.lower().encode()
        v = "\0".join([values] if isinstance(values, str) else values).encode()
        out.append(struct.pack(">I", len(n)) + n + struct.pack(">I", len(v)) + v)
    return b"".join(out)


def decode_headers(block: bytes) -> dict[str, list[str]]:
    """The inverse of encode_headers, bounded; SpdyError names what is malformed."""
    def take(off: int, n: int) -> bytes:
        if off + n > len(block):
            raise SpdyError(f"header block truncated at byte {off}: {_excerpt(block[off:])}")
        return block[off:off + n]
    count = struct.unpack(">I", take(0, 4))[0]
    if count > MAX_HEADERS:
        raise SpdyError(f"header block of {count} headers exceeds the limit of {MAX_HEADERS}")
    headers: dict[str, list[str]] = {}
    off = 4
    for _ in range(count):
        n = struct.unpack(">I", take(off, 4))[0]
        name = take(off + 4, n).decode("latin-1")
        off += 4 + n
        n = struct.unpack(">I", take(off, 4))[0]
        value = take(off + 4, n).decode("latin-1")
        off += 4 + n
        if not name or name != name.lower() or name in headers:
            raise SpdyError(f"header name {name[:40]!r} is empty, not lowercase or repeated")
        headers[name] = value.split("\0")
    if off != len(block):
        raise SpdyError(f"{len(block) - off} bytes after the header block's last header")
    return headers


class HeaderCodec:
    """The session's two zlib streams: what this side sends, and what the peer sent (shared by all frames)."""

    def __init__(self) -> None:
        self._out = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY,
                                     DICTIONARY)
        self._in = zlib.decompressobj(zdict=DICTIONARY)

    def compress(self, headers: dict[str, list[str] | str]) -> bytes:
        return self._out.compress(encode_headers(headers)) + self._out.flush(zlib.Z_SYNC_FLUSH)

    def decompress(self, data: bytes) -> dict[str, list[str]]:
        try:
            block = self._in.decompress(data, MAX_HEADER_BLOCK + 1)
        except zlib.error as e:
            raise SpdyError(f"header block does not inflate with the SPDY/3 dictionary ({e}): {_excerpt(data)}") from None
        if len(block) > MAX_HEADER_BLOCK or self._in.unconsumed_tail:
            raise SpdyError(f"header block inflates past the limit of {MAX_HEADER_BLOCK} bytes")
        return decode_headers(block)


# --- a session: streams the client opens, served by `on_stream` ---------------------------------------

class Stream:
    """One client-opened stream: `headers`, `read()` (b"" once the client half-closed), `write()`, `close()`
    (our FIN), `reset()`."""

    def __init__(self, session: Session, stream_id: int, headers: dict[str, list[str]], remote_fin: bool):
        self.session, self.id, self.headers = session, stream_id, headers
        self._buf = bytearray()
        self._eof = remote_fin
        self.closed = False            # our FIN sent (or reset)
        self.reset_by_peer = False
        self._readable = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self.send_window = session.initial_send_window
        self._window_open = asyncio.Event()
        self._window_open.set()
        self.replied = asyncio.Event()  # spdystream drops data that arrives before the stream's SYN_REPLY

    def header(self, name: str) -> str:
        return (self.headers.get(name.lower()) or [""])[0]

    # receiving
    def _feed(self, data: bytes, fin: bool) -> None:
        if data and not self._eof:
            self._buf += data
            if len(self._buf) >= INITIAL_WINDOW:
                self._space.clear()
        if fin:
            self._eof = True
        self._readable.set()

    async def read(self, n: int = 65536) -> bytes:
        while not self._buf and not self._eof:
            self._readable.clear()
            await self._readable.wait()
        data = bytes(self._buf[:n])
        del self._buf[:n]
        if len(self._buf) < INITIAL_WINDOW:
            self._space.set()
        if data and not self._eof:     # SPDY/3.1: reopen the peer's window by what was consumed
            await self.session._send(window_update(self.id, len(data)) + window_update(0, len(data)))
        return data

    # sending
    async def write(self, data: bytes) -> None:
        await self.replied.wait()
        view = memoryview(data)
        while view:
            if self.closed:
                raise ConnectionResetError(f"stream {self.id} is closed")
            n = min(len(view), SEND_CHUNK)
            if self.session.peer_flow_control:
                while self.send_window <= 0 and not self.closed:
                    self._window_open.clear()
                    await self._window_open.wait()
                n = min(n, max(self.send_window, 1))
                self.send_window -= n
            await self.session._send(data_frame(self.id, bytes(view[:n])))
            view = view[n:]

    async def close(self) -> None:
        """Half-close: our FIN (the peer may still send)."""
        if not self.closed:
            self.closed = True
            await self.replied.wait()
            await self.session._send(data_frame(self.id, b"", fin=True))
            self.session._maybe_forget(self)

    async def reset(self, status: int = CANCEL) -> None:
        self.session._forget(self)
        self._wake()
        if not self.reset_by_peer and not self.session.closed:
            self.reset_by_peer = True          # at most one RST_STREAM from either side
            await self.session._send(rst_stream(self.id, status))

    def remove(self) -> None:
        """httpstream's RemoveStreams: this side is done with the stream; whatever the peer still sends on it
        is dropped (never buffered, never holding up the session)."""
        self.session._forget(self)
        self._buf.clear()
        self._eof = True
        for event in (self._readable, self._space):
            event.set()

    def _wake(self) -> None:
        """The stream ends both ways: every waiting reader and writer returns."""
        self.closed = self._eof = True
        for event in (self._readable, self._window_open, self._space, self.replied):
            event.set()


class Session:
    """The server end of one SPDY/3.1 connection. `read()` yields the connection's bytes (b"" at its end),
    `write(bytes)` sends (and waits for the transport to drain). `on_stream(stream)` is called for each
    SYN_STREAM: raising ValueError refuses the stream (RST_STREAM REFUSED_STREAM, as spdystream's Refuse),
    else the stream is accepted with an empty SYN_REPLY (its writes wait for that reply)."""

    def __init__(self, read: Callable[[], Awaitable[bytes]], write: Callable[[bytes], Awaitable[None]],
                 on_stream: Callable[[Stream], None], max_streams: int = MAX_STREAMS):
        self._read, self._write, self._on_stream = read, write, on_stream
        self.max_streams = max_streams
        self.codec = HeaderCodec()
        self.streams: dict[int, Stream] = {}
        self.last_stream_id = 0
        self.peer_flow_control = False     # the peer sent WINDOW_UPDATE or SETTINGS_INITIAL_WINDOW_SIZE
        self.initial_send_window = INITIAL_WINDOW
        self.went_away = False
        self.error: str | None = None
        self._lock = asyncio.Lock()
        self.closed = False

    async def _send(self, data: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("SPDY session closed")
        async with self._lock:
            await self._write(data)

    async def serve(self) -> None:
        """Read and dispatch frames until the connection ends or the peer breaks the protocol."""
        buf = bytearray()
        try:
            while True:
                chunk = await self._read()
                if not chunk:
                    return
                buf += chunk
                while (got := decode_frame(buf)) is not None:
                    frame, used = got
                    del buf[:used]
                    await self._dispatch(frame)
        except SpdyError as e:
            self.error = str(e)
            try:
                await self._send(goaway(self.last_stream_id, GOAWAY_PROTOCOL_ERROR))
            except (ConnectionError, RuntimeError):
                pass
        finally:
            self.closed = True
            for s in list(self.streams.values()):       # the connection is gone: so is every stream
                s._wake()

    async def goaway(self) -> None:
        if not self.went_away and not self.closed:
            self.went_away = True
            await self._send(goaway(self.last_stream_id))

    async def _dispatch(self, f: Frame) -> None:
        if f.kind == 0:
            s = self.streams.get(f.stream_id)
            if s is None:
                if f.stream_id > self.last_stream_id:
                    raise SpdyError(f"data frame on stream {f.stream_id}, which was never opened")
                return                     # a stream we reset or finished: its late data is dropped
            if s._eof and f.payload:
                await s.reset(STREAM_IN_USE)   # data after the peer's FIN
                return
            s._feed(f.payload, bool(f.flags & FLAG_FIN))
            self._maybe_forget(s)
            await s._space.wait()          # back-pressure: read no further while this stream's buffer is full
        elif f.kind == SYN_STREAM:
            await self._syn_stream(f)
        elif f.kind == HEADERS:
            self.codec.decompress(f.payload)       # keeps the zlib context in step; kubectl sends none
            s = self.streams.get(f.stream_id)
            if s is not None and f.flags & FLAG_FIN:
                s._feed(b"", True)
        elif f.kind == RST_STREAM:
            s = self.streams.get(f.stream_id)
            if s is not None:
                s.reset_by_peer = True
                s._wake()
                self._forget(s)
        elif f.kind == SETTINGS:
            if SETTINGS_INITIAL_WINDOW_SIZE in f.settings:
                new = f.settings[SETTINGS_INITIAL_WINDOW_SIZE] & 0x7FFFFFFF
                self.peer_flow_control = True
                for s in self.streams.values():
                    s.send_window += new - self.initial_send_window
                    if s.send_window > 0:
                        s._window_open.set()
                self.initial_send_window = new
        elif f.kind == PING:
            if f.value % 2:                # the client's (odd) pings are echoed; ours (even) we never send
                await self._send(ping(f.value))
        elif f.kind == GOAWAY:
            self.went_away = True
        elif f.kind == WINDOW_UPDATE:
            self.peer_flow_control = True
            s = self.streams.get(f.stream_id)
            if s is not None:
                s.send_window += f.value
                if s.send_window > 0:
                    s._window_open.set()

    async def _syn_stream(self, f: Frame) -> None:
        headers = self.codec.decompress(f.payload)     # always: the zlib context spans every frame
        if f.stream_id % 2 == 0 or f.stream_id <= self.last_stream_id:
            raise SpdyError(f"SYN_STREAM with stream id {f.stream_id} (client streams are odd and increasing)")
        self.last_stream_id = f.stream_id
        if self.went_away or len(self.streams) >= self.max_streams:
            await self._send(rst_stream(f.stream_id, REFUSED_STREAM))
            return
        s = Stream(self, f.stream_id, headers, bool(f.flags & (FLAG_FIN | FLAG_UNIDIRECTIONAL)))
        try:
            self._on_stream(s)
        except ValueError:
            await self._send(rst_stream(f.stream_id, REFUSED_STREAM))
            return
        self.streams[s.id] = s
        await self._send(syn_reply(s.id, self.codec.compress({})))
        s.replied.set()

    def _maybe_forget(self, s: Stream) -> None:
        if s.closed and s._eof and not s._buf:
            self._forget(s)

    def _forget(self, s: Stream) -> None:
        self.streams.pop(s.id, None)
