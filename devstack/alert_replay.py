"""A demo's alerts, replayed: the series its Prometheus scraped, recorded, and every alert rule evaluated over them
by ``promtool test rules``, with each rule's ``for:`` (issue 36: "a healthy demo fires no alert in its first 15
minutes, in either mode"; a suite cannot wait 15 minutes, a recording of a real run can be replayed in seconds).

``record`` reads what Prometheus' own queries saw, step by step (``query_range`` of each series a rule names, from
Prometheus' start): a series that stopped being scraped is marked ``stale`` as Prometheus marks it, so the replay
does not hold its last value for five minutes. ``promtool_test`` turns a recording into a promtool test file that
expects no firing alert, of any rule in the files, at every evaluation of the recorded span.

    python -m devstack.alert_replay record --prometheus http://127.0.0.1:PORT --minutes 15 --out FILE.json
    python -m devstack.alert_replay check FILE.json   # the demo's rule files; exit 1 and promtool's words if one fires
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import yaml

from devstack.monitoring import RULES, SHIPPED

PROMTOOL = Path("/usr/bin/promtool")
USAGE_RULES = SHIPPED / "usage-alerts.yaml"
DEMO_RULES = (*RULES, USAGE_RULES)  # what the demo's Prometheus loads (the usage rules with kubesim's nodes)
NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def rules_of(files) -> list[dict]:
    return [rule for f in files for group in yaml.safe_load(Path(f).read_text())["groups"] for rule in group["rules"]]


def alert_names(files) -> list[str]:
    return sorted({r["alert"] for r in rules_of(files) if "alert" in r})


def named_series(files, present: list[str]) -> list[str]:
    """The metric names of ``present`` (Prometheus' ``__name__`` values) that a rule's expression names."""
    exprs = [r["expr"] for r in rules_of(files)]
    words = {w for e in exprs for w in NAME.findall(e)}
    patterns = [re.compile(p) for e in exprs for p in re.findall(r'__name__=~"([^"]+)"', e)]  # e.g. alerts-otel's
    return sorted(n for n in set(present) if n in words or any(p.fullmatch(n) for p in patterns))


def _seconds(duration: str) -> int:
    return sum(int(n) * {"s": 1, "m": 60, "h": 3600}[u] for n, u in re.findall(r"(\d+)([smh])", duration))


def record(prometheus: str, minutes: float, step: str = "10s", files=DEMO_RULES, get=None) -> dict:
    """The series the rules of ``files`` name, as Prometheus' queries saw them every ``step`` from its start for
    ``minutes`` (not past now): ``{"start", "step", "points", "series": [{"labels", "values"}]}``, a value None
    where the series was absent."""
    import httpx

    get = get or (lambda path, **params: httpx.get(f"{prometheus}{path}", params=params, timeout=60).json())
    start = datetime.fromisoformat(get("/api/v1/status/runtimeinfo")["data"]["startTime"].replace("Z", "+00:00"))
    t0, dt = int(start.timestamp()) + 1, _seconds(step)
    end = min(t0 + int(minutes * 60), int(datetime.now().timestamp()))
    points = (end - t0) // dt + 1
    out = {"start": t0, "step": step, "points": points, "series": []}
    for name in named_series(files, get("/api/v1/label/__name__/values")["data"]):
        body = get("/api/v1/query_range", query=f'{{__name__="{name}"}}', start=t0, end=t0 + (points - 1) * dt,
                   step=dt)
        assert body["status"] == "success", body
        for s in body["data"]["result"]:
            values = [None] * points
            for ts, v in s["values"]:
                values[round((float(ts) - t0) / dt)] = v
            out["series"].append({"labels": s["metric"], "values": values})
    return out


def _series_name(labels: dict) -> str:
    name = labels["__name__"]
    rest = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}}"


def _values(values: list) -> str:
    """promtool's notation: a value per step, ``stale`` where a series stops (as Prometheus marks it), ``_``
    while it stays absent."""
    out, seen = [], False
    for v in values:
        if v is None:
            out.append("stale" if seen else "_")
            seen = False
        else:
            out.append(v)
            seen = True
    return " ".join(out)


def promtool_test(recording: dict, files, workdir: Path) -> Path:
    """A ``promtool test rules`` file (in ``workdir``) over ``recording`` with the rules of ``files``: no alert of
    theirs fires at any evaluation (each ``step``) of the recorded span."""
    dt = _seconds(recording["step"])
    times = [f"{i * dt}s" for i in range(recording["points"])]
    test = {"rule_files": [str(Path(f).resolve()) for f in files], "evaluation_interval": recording["step"],
            "tests": [{"interval": recording["step"],
                       "input_series": [{"series": _series_name(s["labels"]), "values": _values(s["values"])}
                                        for s in recording["series"]],
                       "alert_rule_test": [{"eval_time": t, "alertname": a, "exp_alerts": []}
                                           for t in times for a in alert_names(files)]}]}
    path = workdir / "replay.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    return path


def replay(recording: dict, files, workdir: Path) -> subprocess.CompletedProcess:
    """``promtool test rules`` over ``recording``: exit 0 when no alert of ``files`` fires in the recorded span."""
    if not PROMTOOL.exists():
        raise RuntimeError("/usr/bin/promtool missing: run `make monitoring` (apt-get install prometheus)")
    test = promtool_test(recording, files, workdir)
    return subprocess.run([str(PROMTOOL), "test", "rules", str(test)], capture_output=True, text=True, timeout=600)


def firing(result: subprocess.CompletedProcess) -> list[str]:
    """The alerts promtool found firing, as ``alertname at eval_time`` (its "FAILED" lines name both)."""
    text = result.stdout + result.stderr
    return sorted(set(re.findall(r"alertname: (\w+), time: (\S+),", text)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devstack.alert_replay")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="record the series the demo's rules name from a running Prometheus")
    r.add_argument("--prometheus", required=True)
    r.add_argument("--minutes", type=float, default=15)
    r.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("check", help="replay a recording through the demo's rules with promtool")
    c.add_argument("recording", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "record":
        rec = record(args.prometheus, args.minutes)
        args.out.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
        print(f"{len(rec['series'])} series, {rec['points']} points of {rec['step']} from {rec['start']}")
        return 0
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = replay(json.loads(args.recording.read_text()), DEMO_RULES, Path(tmp))
    print(result.stdout[-3000:] + result.stderr[-3000:])
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
