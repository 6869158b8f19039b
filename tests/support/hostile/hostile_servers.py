"""A user's HTTP server for the hostile-read tests: a real loopback server that floods or drips for ever (what
kubesim's service proxy forwards a pod's port to with ``kubesim.io/http`` ``{"forward": ...}``)."""

from __future__ import annotations

import http.server
import json
import threading
import time

from kubernetes import client

from operators.devinstances import naming


class Backend:
    """A user's HTTP server on loopback: ``flood`` or ``drip`` for ever, until the reader goes away."""

    def __init__(self, mode: str, probe=None) -> None:
        self.sent = 0
        self.started: float | None = None  # when the request came in
        self.cut_at: float | None = None  # when the reader went away
        self.probe, self.probed_true_at = probe, None  # drip: when ``probe()`` was first true while dripping
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                backend.started = time.monotonic()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                chunk = b"x" * 65536 if mode == "flood" else b"#"
                try:
                    while True:
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        backend.sent += len(chunk)
                        if mode == "drip":
                            if backend.probe and backend.probed_true_at is None and backend.probe():
                                backend.probed_true_at = time.monotonic()
                            time.sleep(0.2)  # the drip's pace (the server under test, not a wait in the test)
                except OSError:
                    backend.cut_at = time.monotonic()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_from(k8s, namespace: str, owner: str, name: str, backend: Backend) -> None:
    """The instance's port 8888 is ``backend`` (kubesim's proxy forwards and streams)."""
    client.CoreV1Api(k8s).patch_namespaced_pod(naming.pod_name(owner, name), namespace, {"metadata": {
        "annotations": {"kubesim.io/http": json.dumps({"8888/metrics": {"forward": backend.url}})}}})
