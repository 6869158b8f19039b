"""``AirflowPools.login`` waits for an api-server that is starting (issue 29: platform_sync's first run at a
stack's start failed on ``ReadTimeout`` / connection refused from ``POST /auth/token``), and a refusal is final."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devstack.stack import free_port
from operators.platform.pools import AirflowPools


def _server(port: int, answers: list[int]) -> ThreadingHTTPServer:
    """An /auth/token that answers ``answers`` in turn (then 201 with a token)."""
    calls = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("content-length") or 0))
            calls.append(self.path)
            status = answers[len(calls) - 1] if len(calls) <= len(answers) else 201
            body = json.dumps({"access_token": "tok"} if status == 201 else {"detail": "no"}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.calls = calls
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_login_waits_for_an_api_server_that_listens_late_and_answers_503_at_first():
    port = free_port()
    started: list[ThreadingHTTPServer] = []
    # nothing listens for the first 1.5 s (connection refused), then a 503, then the token
    timer = threading.Timer(1.5, lambda: started.append(_server(port, [503])))
    timer.start()
    try:
        t0 = time.monotonic()
        pools = AirflowPools.login(f"http://127.0.0.1:{port}", "admin", "pw", wait_s=60)
        assert pools.http.headers["Authorization"] == "Bearer tok"
        assert started and started[0].calls == ["/auth/token"] * 2
        assert time.monotonic() - t0 >= 1.5
    finally:
        timer.join()
        for s in started:
            s.shutdown()


def test_a_refused_login_is_final_at_once_and_a_silent_server_is_named_after_the_wait():
    port = free_port()
    server = _server(port, [401])
    try:
        with pytest.raises(RuntimeError, match="login as 'admin' .* failed: HTTP 401"):
            AirflowPools.login(f"http://127.0.0.1:{port}", "admin", "bad", wait_s=60)
        assert server.calls == ["/auth/token"]
    finally:
        server.shutdown()
    with pytest.raises(RuntimeError, match=r"no answer within 2 s \(ConnectError\)"):
        AirflowPools.login(f"http://127.0.0.1:{free_port()}", "admin", "pw", wait_s=2)
