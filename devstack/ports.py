"""Free loopback ports, written once (the stack, its services, the SMTP sink and the tests all ask here).

A port is free when asked: the kernel hands out an unused one for a socket bound to port 0, and the socket is
closed again before the caller binds it (another process could take it in between; on this loopback-only stack
that has not been seen).
"""
from __future__ import annotations

import socket


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A TCP (or, with ``socket.SOCK_DGRAM``, UDP) port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_udp_port() -> int:
    return free_port(socket.SOCK_DGRAM)
