"""GPU-hours held and used, and the efficiency, per user, team and kind of pod in the usage report (issue 37):
``operators.platform.gpu_used``'s one query, over series shaped as production has them (Skiff's
``skiff_pod_info`` and ``skiff_pod_requests`` served by two api-server replicas, dcgm-exporter's
``DCGM_FI_DEV_GPU_UTIL`` with a GPU no pod holds).

* Debian's promtool evaluates the query over hand-written series and checks hand-worked values: bob's training
  step holds two GPUs at 50 % (50 % efficient), alice's development instance one GPU idle at 0 % (0 %), carol's
  pending step one GPU dcgm-exporter does not report (held, used not known), a Sedna worker one GPU at 100 %, a
  CPU-only step no row. A join that forgets the replicas fails.
* Debian's Prometheus scrapes, every second, Skiff's own writer (``pod_info_samples`` and ``exposition``) on two
  "replicas" and dcgm-exporter-shaped series, and ``read`` + ``section`` give the same shares per row and per team.
* Without a Prometheus, or with none answering, the report says held and used are not known: no rows, no number.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from kubesim.testing import wait_until
from operators.exporter.cluster import pod_info_samples
from operators.exporter.endpoint import ClusterCache, exposition
from operators.platform import gpu_used
from tests.support.metrics.prometheus_support import run_tool, running_prometheus

STEP = {"app.kubernetes.io/name": "skiff-training"}
INSTANCE = {"skiff.io/kind": "dev-instance"}
SEDNA = {"federatedlearningjob.sedna.io/name": "fl"}
# (namespace, pod, kind labels, home claim, GPUs requested, {GPU UUID: utilisation %}); pending: no GPU reported
PODS = [("recsys", "bob-step-0", STEP, "bob-home", 2, {"GPU-0": 50, "GPU-1": 50}),
        ("recsys", "alice--nb-0", INSTANCE, "alice-home", 1, {"GPU-2": 0}),
        ("nlp", "carol-step-0", STEP, "carol-home", 1, {}),
        ("nlp", "fl-train-0", SEDNA, None, 1, {"GPU-3": 100}),
        ("recsys", "dave-step-0", STEP, "dave-home", 0, {})]
FREE_GPU = ("GPU-4", 0)  # no pod holds it: pod=""
OWNERS = {"bob-home": "bob", "carol-home": "carol", "alice-home": "alice", "dave-home": "dave"}
TEAMS = {"recsys": "recsys", "nlp": "nlp"}


def _pod(ns: str, name: str, labels: dict, claim: str | None, gpus: int) -> dict:
    volumes = [{"name": "root-dir", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    requests = {"cpu": "1", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {"metadata": {"namespace": ns, "name": name, "labels": labels, "annotations": {}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], "volumes": volumes},
            "status": {"phase": "Running"}}


# ---------------------------------------------------------------- promtool: exact, hand-worked values

def _series(name: str, labels: dict, values: str) -> dict:
    return {"series": name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}", "values": values}


def _inputs() -> list[dict]:
    """One sample a minute for 100 minutes; info and requests from two api-server replicas."""
    out = []
    samples = pod_info_samples([_pod(ns, p, lab, claim, g) for ns, p, lab, claim, g, _ in PODS], OWNERS)
    for replica in ("api-0", "api-1"):
        for s in samples:
            out.append(_series(s.metric.prom, {**dict(s.labels), "instance": replica, "job": "skiff"},
                               f"{s.value:g}x100"))
    for ns, pod, *_, gpus in PODS:
        for uuid, util in gpus.items():
            out.append(_series("DCGM_FI_DEV_GPU_UTIL", {"namespace": ns, "pod": pod, "container": "c", "UUID": uuid,
                                                        "instance": "node-1:9400"}, f"{util}x100"))
    out.append(_series("DCGM_FI_DEV_GPU_UTIL", {"namespace": "", "pod": "", "container": "", "UUID": FREE_GPU[0],
                                                "instance": "node-1:9400"}, f"{FREE_GPU[1]}x100"))
    return out


# At 100m, over the last hour at 6-minute resolution: 10 samples (42m, 48m, ... 96m) of 0.1 h each, so a GPU held
# throughout is 1.0 GPU-hour held. bob: 2 GPUs -> 2.0 held and measured, at 50 % 1.0 used. alice: 1.0 held and
# measured, 0 used (idle). carol: 1.0 held, nothing measured, so no "used" or "measured" series. The Sedna worker
# (no user): 1.0 held, measured and used. dave: no GPU, no series. The free GPU: nobody's.
EXPECTED = {
    ("bob", "recsys", "training"): {"held": 2.0, "used": 1.0, "measured": 2.0},
    ("alice", "recsys", "instance"): {"held": 1.0, "used": 0.0, "measured": 1.0},
    ("carol", "nlp", "training"): {"held": 1.0},
    ("", "nlp", "sedna"): {"held": 1.0, "used": 1.0, "measured": 1.0},
}


def _promtool_test(expr: str, expected: dict) -> dict:
    samples = [{"labels": "{" + ",".join(f'{k}="{v}"' for k, v in (("user", user), ("team", team), ("kind", kind),
                                                                    ("measure", m)) if v) + "}", "value": value}
               for (user, team, kind), measures in expected.items() for m, value in measures.items()]
    return {"rule_files": [], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": _inputs(),
                       "promql_expr_test": [{"expr": expr, "eval_time": "100m", "exp_samples": samples}]}]}


def test_held_used_and_measured_per_user_team_and_kind_by_promtool(promtool, tmp_path):
    (tmp_path / "gpu.test.yaml").write_text(yaml.safe_dump(_promtool_test(gpu_used.query(3600, 360), EXPECTED)))
    done = run_tool(promtool, "test", "rules", "gpu.test.yaml", cwd=tmp_path)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr

    # the same answer through section(): efficiency = used / measured; carol's used not known, never 0 %
    hours = {k: dict(v) for k, v in EXPECTED.items()}
    report = gpu_used.section(hours, None, TEAMS, 360)
    rows = {(r["user"], r["team"], r["kind"]): (r["gpu_hours_held"], r["gpu_hours_used"], r["efficiency_percent"])
            for r in report["by_user"]}
    assert rows == {("bob", "recsys", "training"): (2.0, 1.0, 50.0), ("alice", "recsys", "instance"): (1.0, 0.0, 0.0),
                    ("carol", "nlp", "training"): (1.0, None, None), ("", "nlp", "sedna"): (1.0, 1.0, 100.0)}
    teams = {(r["team"], r["kind"]): (r["gpu_hours_held"], r["gpu_hours_measured"], r["gpu_hours_used"],
                                      r["efficiency_percent"]) for r in report["by_team"]}
    # recsys: 3 held, 1 used of 3 measured (33.3 %); nlp: 2 held, 1 used of the 1 measured (the Sedna worker's)
    assert teams == {("recsys", "training"): (2.0, 2.0, 1.0, 50.0), ("recsys", "instance"): (1.0, 1.0, 0.0, 0.0),
                     ("recsys", "all"): (3.0, 3.0, 1.0, 33.3), ("nlp", "training"): (1.0, 0.0, None, None),
                     ("nlp", "sedna"): (1.0, 1.0, 1.0, 100.0), ("nlp", "all"): (2.0, 1.0, 1.0, 100.0)}
    assert report["source"] == "prometheus" and report["problem"] is None


def test_the_promtool_check_can_fail(promtool, tmp_path):
    """The info joined without ``max by`` (two replicas: two info series per pod, many-to-many) fails, and so does
    one wrong hand-worked value."""
    broken = gpu_used.query(3600, 360).replace(gpu_used.INFO, "skiff_pod_info")
    assert broken != gpu_used.query(3600, 360)
    wrong = {**EXPECTED, ("alice", "recsys", "instance"): {"held": 1.0, "used": 0.1, "measured": 1.0}}
    for expr, expected in ((broken, EXPECTED), (gpu_used.query(3600, 360), wrong)):
        (tmp_path / "t.test.yaml").write_text(yaml.safe_dump(_promtool_test(expr, expected)))
        assert run_tool(promtool, "test", "rules", "t.test.yaml", cwd=tmp_path).returncode != 0


# ---------------------------------------------------------------- a real Prometheus scraping Skiff's writer

def _text() -> bytes:
    samples = pod_info_samples([_pod(ns, p, lab, claim, g) for ns, p, lab, claim, g, _ in PODS], OWNERS)
    ours = exposition(samples, ClusterCache(lambda: samples, 60), 0)
    gpus = [(ns, pod, uuid, util) for ns, pod, *_, g in PODS for uuid, util in g.items()] + [("", "", *FREE_GPU)]
    dcgm = "".join(f'DCGM_FI_DEV_GPU_UTIL{{gpu="{i}",UUID="{u}",namespace="{ns}",pod="{p}",container="c"}} {v}\n'
                   for i, (ns, p, u, v) in enumerate(gpus))
    return ours + b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n" + dcgm.encode()


@pytest.fixture
def prometheus(tmp_path):
    """One scrape job of two targets serving the same text: two api-server replicas (and the GPU series twice,
    as the query's ``max by (namespace, pod, UUID)`` must stand)."""
    body = _text()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Handler) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    job = {"job_name": "both", "scrape_interval": "1s", "scrape_timeout": "1s",
           "static_configs": [{"targets": [f"127.0.0.1:{s.server_address[1]}" for s in servers]}]}
    try:
        with running_prometheus(tmp_path, job, "1s") as prom:
            yield prom
    finally:
        for server in servers:
            server.shutdown()


def test_gpu_hours_held_and_used_per_user_and_team_from_prometheus(prometheus):
    started = time.time()
    wait_until(lambda: prometheus.query('count(count_over_time(skiff_pod_info{pod="bob-step-0"}[1m]) >= 8) == 2')
               and time.time() - started > 8, timeout=60, interval=1, what="8 s of scrapes of both replicas")
    until = datetime.now(UTC) - timedelta(seconds=1)
    hours = gpu_used.read(prometheus.url, until - timedelta(seconds=6), until, step_seconds=1)
    assert set(hours) == set(EXPECTED)  # dave's CPU-only step and the free GPU: no row
    # 6 or 7 samples, one a second (one either way at the period's edges): 1 GPU held ~ 6/3600 h
    tick = 1 / 3600
    for key, measures in EXPECTED.items():
        assert set(hours[key]) == set(measures), key
        for m, value in measures.items():
            assert hours[key][m] == pytest.approx(6 * tick * value, abs=tick * value), (key, m)

    report = gpu_used.section(hours, None, TEAMS, 1)
    shares = {(r["user"], r["kind"]): r["efficiency_percent"] for r in report["by_user"]}
    # the shares do not depend on how many samples fell in the period: used and held are sums over the same ones
    assert shares == {("bob", "training"): 50.0, ("alice", "instance"): 0.0, ("carol", "training"): None,
                      ("", "sedna"): 100.0}
    all_recsys = next(r for r in report["by_team"] if (r["team"], r["kind"]) == ("recsys", "all"))
    assert all_recsys["efficiency_percent"] == pytest.approx(100 / 3, abs=0.05)


def test_without_prometheus_held_and_used_are_not_known_and_the_report_says_why():
    from operators.platform.usage import with_gpu_used

    class _Platform:
        teams = ()

    since, until = datetime(2026, 11, 5, tzinfo=UTC), datetime(2026, 12, 5, tzinfo=UTC)
    for url, why in (("", "no Prometheus configured"), ("http://127.0.0.1:9", "Prometheus at http://127.0.0.1:9")):
        report = with_gpu_used({"by_user": [{"user": "bob", "team": "recsys", "gpu_hours": 2.0}]}, _Platform(),
                               since, until, url=url)
        gpu = report["gpu"]
        assert gpu["source"] is None and gpu["problem"].startswith(why)
        assert gpu["by_user"] == [] and gpu["by_team"] == []  # no number at all, not zeros
        assert report["by_user"] == [{"user": "bob", "team": "recsys", "gpu_hours": 2.0}]  # held from Jobs stays
