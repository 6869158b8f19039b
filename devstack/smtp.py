"""A local SMTP sink (aiosmtpd) that keeps every message it receives.

Used by tests (in-process, :class:`SmtpSink`) and by ``make demo`` (as a process:
``python -m devstack.smtp --port PORT --maildir DIR``, one ``.eml`` file per message).
"""

from __future__ import annotations

import argparse
import email
import email.policy
import signal
import sys
import threading
import time
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

from aiosmtpd.controller import Controller

from devstack.ports import free_port


class _Handler:
    def __init__(self, sink: SmtpSink):
        self._sink = sink

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's hook name)
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        self._sink._deliver(msg, envelope.content)
        return "250 Message accepted for delivery"


class SmtpSink:
    """A real SMTP server on 127.0.0.1 that stores what it receives (in memory, and in ``maildir`` if given)."""

    def __init__(self, port: int = 0, maildir: Path | None = None):
        self.maildir = maildir
        self.messages: list[EmailMessage] = []
        self._cond = threading.Condition()
        self._controller = Controller(_Handler(self), hostname="127.0.0.1", port=port or free_port())
        if maildir:
            maildir.mkdir(parents=True, exist_ok=True)

    @property
    def port(self) -> int:
        return self._controller.port

    def start(self) -> SmtpSink:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()

    def _deliver(self, msg: EmailMessage, raw: bytes) -> None:
        with self._cond:
            self.messages.append(msg)
            if self.maildir:
                (self.maildir / f"{time.time_ns()}.eml").write_bytes(raw)
            self._cond.notify_all()

    def wait_for(self, pred: Callable[[EmailMessage], bool] = lambda m: True, timeout: float = 30) -> EmailMessage:
        """Block until a message matching ``pred`` has arrived; raise TimeoutError naming what did arrive."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for msg in self.messages:
                    if pred(msg):
                        return msg
                left = deadline - time.monotonic()
                if left <= 0:
                    subjects = [m["Subject"] for m in self.messages]
                    raise TimeoutError(f"no matching e-mail within {timeout}s; received: {subjects}")
                self._cond.wait(left)


def read_maildir(maildir: Path) -> list[EmailMessage]:
    """Messages a process-mode sink wrote, oldest first."""
    if not maildir.exists():
        return []
    return [
        email.message_from_bytes(p.read_bytes(), policy=email.policy.default)
        for p in sorted(maildir.glob("*.eml"))
    ]


def smtp_connection_uri(port: int) -> str:
    """The ``smtp_default`` connection (JSON form) for a plain local SMTP server."""
    import json

    return json.dumps(
        {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": port,
            "extra": {"disable_ssl": True, "disable_tls": True, "from_email": "skiff@localhost"},
        }
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devstack.smtp", description=__doc__)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--maildir", type=Path, required=True)
    args = ap.parse_args(argv)
    sink = SmtpSink(args.port, args.maildir).start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"smtp ready 127.0.0.1:{sink.port}", flush=True)
    stop.wait()
    sink.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
