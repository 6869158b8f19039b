"""GPU-hours used beside held in the usage report (issue 37): Debian's Prometheus scrapes, every second, Skiff's
own ``skiff_pod_info`` (the exporter's writer over pods) and dcgm-exporter-shaped GPU series; the report's query
(``operators.platform.gpu_used``) sums each user's training GPUs' utilisation over the period. bob's step holds
two GPUs at 50 % and 30 % (0.8 GPU busy), carol's one at 100 %; alice's instance's busy GPU is not a training
step's, so it is not counted against GPU-hours held by Jobs. Without a Prometheus the report says so."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubesim.testing import wait_until
from operators.exporter.cluster import pod_info_samples
from operators.exporter.endpoint import ClusterCache, exposition
from operators.platform import gpu_used
from tests.support.metrics.prometheus_support import running_prometheus


def _pod(ns: str, name: str, kind_labels: dict, claim: str) -> dict:
    return {"metadata": {"namespace": ns, "name": name, "labels": kind_labels, "annotations": {}},
            "spec": {"volumes": [{"name": "root-dir", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": "Running"}}


STEP = {"app.kubernetes.io/name": "skiff-training"}
PODS = [_pod("recsys", "bob-step-0", STEP, "bob-home"), _pod("nlp", "carol-step-0", STEP, "carol-home"),
        _pod("recsys", "alice--nb-0", {"skiff.io/kind": "dev-instance"}, "alice-home")]
GPUS = [("recsys", "bob-step-0", "GPU-0", 50), ("recsys", "bob-step-0", "GPU-1", 30), ("nlp", "carol-step-0", "GPU-2", 100),
        ("recsys", "alice--nb-0", "GPU-3", 90), ("", "", "GPU-4", 0)]


def _text() -> bytes:
    owners = {"bob-home": "bob", "carol-home": "carol", "alice-home": "alice"}
    samples = pod_info_samples(PODS, owners)
    ours = exposition(samples, ClusterCache(lambda: samples, 60), 0)
    dcgm = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="{u}",namespace="{ns}",pod="{p}",container="c"}} {v}\n'
                   for i, (ns, p, u, v) in enumerate(GPUS))
    return ours + b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + dcgm.encode()


@pytest.fixture
def prometheus(tmp_path):
    body = _text()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    job = {"job_name": "both", "scrape_interval": "1s", "scrape_timeout": "1s",
           "static_configs": [{"targets": [f"127.0.0.1:{server.server_address[1]}"]}]}
    try:
        with running_prometheus(tmp_path, job, "1s") as prom:
            yield prom
    finally:
        server.shutdown()


def test_gpu_hours_used_per_user_from_prometheus(prometheus):
    started = time.time()
    wait_until(lambda: prometheus.query("count(count_over_time(skiff_pod_info[1m]) >= 8)")
               and time.time() - started > 8, timeout=60, interval=1, what="8 s of scrapes")
    until = datetime.now(UTC) - timedelta(seconds=1)
    used = gpu_used.read(prometheus.url, until - timedelta(seconds=6), until, step_seconds=1)
    assert set(used) == {("bob", "recsys"), ("carol", "nlp")}  # the instance's GPU is no training step's
    # 6 samples, one a second: 0.8 and 1.0 GPUs busy for 6 s (one sample either way at the period's edges)
    assert used[("bob", "recsys")] == pytest.approx(0.8 * 6 / 3600, abs=0.8 / 3600)
    assert used[("carol", "nlp")] == pytest.approx(6 / 3600, abs=1 / 3600)

    report = {"by_user": [{"user": "bob", "team": "recsys", "gpu_hours": 0.01}, {"user": "dave", "team": "nlp",
                                                                                   "gpu_hours": 0.5}]}
    gpu_used.add_used(report, used, None, {"recsys": "recsys", "nlp": "nlp"})
    assert report["by_user"][0]["gpu_hours_used"] == pytest.approx(round(used[("bob", "recsys")], 4))
    assert report["by_user"][1]["gpu_hours_used"] == 0.0  # in Prometheus' reach, no busy GPU of dave's
    assert report["gpu_used"] == {"source": "prometheus", "problem": None}


def test_without_prometheus_used_is_not_known_and_the_report_says_why():
    from operators.platform.usage import with_gpu_used

    class _Platform:
        teams = ()

    since, until = datetime(2026, 11, 5, tzinfo=UTC), datetime(2026, 12, 5, tzinfo=UTC)
    for url, why in (("", "no Prometheus configured"), ("http://127.0.0.1:9", "Prometheus at http://127.0.0.1:9")):
        report = with_gpu_used({"by_user": [{"user": "bob", "team": "recsys", "gpu_hours": 2.0}]}, _Platform(),
                               since, until, url=url)
        assert report["by_user"][0]["gpu_hours_used"] is None
        assert report["gpu_used"]["source"] is None and report["gpu_used"]["problem"].startswith(why)
