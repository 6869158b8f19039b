"""Debian's Prometheus on loopback for the metrics tests: the shipped alert rules loaded, one scrape job."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from devstack.stack import _spawn, _tail, free_port
from kubesim.testing import wait_until

MONITORING = Path(__file__).resolve().parents[3] / "deploy" / "monitoring"
PROMETHEUS = Path("/usr/bin/prometheus")


def run_tool(*argv: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess:
    """A tool (promtool) run in deploy/monitoring, where the rule files name each other."""
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)


class Prometheus:
    def __init__(self, url: str, proc: subprocess.Popen, log: Path) -> None:
        self.url, self.proc, self.log = url, proc, log

    def query(self, promql: str) -> list[dict]:
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (promql, body)
        return body["data"]["result"]

    def by_team(self, promql: str) -> dict[str, float]:
        return {s["metric"]["team"]: float(s["value"][1]) for s in self.query(promql)}


@contextmanager
def running_prometheus(work: Path, job: dict, evaluation_interval: str) -> Iterator[Prometheus]:
    """Prometheus with `deploy/monitoring/alerts.yaml` and the scrape `job`, ready; stopped afterwards."""
    with prometheus_with(work, {"global": {"evaluation_interval": evaluation_interval},
                                "rule_files": [str(MONITORING / "alerts.yaml")], "scrape_configs": [job]}) as prom:
        yield prom


@contextmanager
def prometheus_with(work: Path, config: dict) -> Iterator[Prometheus]:
    """Debian's Prometheus loaded with ``config`` (written to ``work/prometheus.yml``), ready (its /-/ready: before
    that its API answers a plain-text 503); stopped afterwards."""
    if not PROMETHEUS.exists():
        pytest.fail("/usr/bin/prometheus missing: run `make monitoring` (apt-get install prometheus)")
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    port, log = free_port(), work / "prometheus.log"
    proc = _spawn([str(PROMETHEUS), f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'data'}",
                   f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], log, {"PATH": "/usr/bin:/bin"})
    prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)

    def ready() -> bool:
        assert proc.poll() is None, f"prometheus exited: {_tail(log)}"
        try:
            return httpx.get(f"{prom.url}/-/ready", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, timeout=60, interval=0.3, what="prometheus ready")
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


class SkiffEndpoint:
    """Skiff's endpoint without the api-server: ``read_cluster`` through its cache and writer (the endpoint's own
    code), served on loopback for Prometheus (``url``: host:port); ``server.shutdown()`` when done."""

    def __init__(self, kube) -> None:
        from operators.exporter.endpoint import ClusterCache, exposition, read_cluster

        cache = ClusterCache(lambda: read_cluster(kube), max_age=0)
        self.kube = kube

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                body = exposition(cache.get(), cache, sum(kube.requests.values()))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
