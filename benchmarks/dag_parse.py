"""Benchmark: the cost of parsing each DAG file in ``dags/``, cold, as Airflow's DAG processor does.

Each measurement is a fresh Python process that first imports Airflow (``airflow.sdk`` and the DagBag, as the
processor has them already loaded, untimed), then times ``DagBag(dag_folder=<file>)``: importing the file, the
Skiff modules it pulls in, and bagging its DAGs. Side by side with the same files and ``operators`` package at
a baseline commit (``SKIFF_BENCH_PARSE_BASELINE``, default: the commit before the access layer made client
imports lazy), extracted with ``git archive``. Median of ``REPEATS`` runs per file and tree. Also listed: how
many modules the parse imported and which Kubernetes/HTTP clients among them (none should load at parse time:
they belong where a task or trigger runs).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = os.environ.get("SKIFF_BENCH_PARSE_BASELINE", "f20190a")
REPEATS = int(os.environ.get("SKIFF_BENCH_PARSE_REPEATS", "5"))
TARGET = 0.3
CLIENTS = {"kubernetes": "kubernetes", "kubernetes_asyncio": "kubernetes_asyncio", "aiohttp": "aiohttp",
           "airflow.providers.cncf.kubernetes.hooks.kubernetes": "provider hooks",
           "airflow.providers.smtp.notifications.smtp": "smtp notifier"}

PROBE = """
import json, sys, time
import airflow, airflow.sdk
from airflow.dag_processing.dagbag import DagBag
before = set(sys.modules)
t0 = time.perf_counter()
bag = DagBag(dag_folder=sys.argv[1])
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "errors": sorted(bag.import_errors), "dags": len(bag.dags),
                  "modules": len(set(sys.modules) - before),
                  "clients": [m for m in sys.argv[2].split(",") if m in sys.modules and m not in before]}))
"""


def parse_once(tree: Path, dag_file: Path) -> dict:
    """Parse ``dag_file`` (or a folder) in a fresh process with Airflow already imported: seconds, import
    errors, DAGs bagged, modules the parse imported and which of ``CLIENTS`` among them."""
    env = {**os.environ, "PYTHONPATH": str(tree), "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR"}
    out = subprocess.run([sys.executable, "-c", PROBE, str(dag_file), ",".join(CLIENTS)], env=env, cwd=tree,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(tree: Path) -> dict[str, dict]:
    """file name -> median seconds, max, modules imported, clients imported (from the last run)."""
    results = {}
    for dag_file in sorted((tree / "dags").glob("*.py")):
        runs = [parse_once(tree, dag_file) for _ in range(REPEATS)]
        if runs[-1]["errors"] or not runs[-1]["dags"]:
            raise RuntimeError(f"{dag_file.name} did not parse: {runs[-1]}")
        results[dag_file.name] = {"median": statistics.median(r["seconds"] for r in runs),
                                  "max": max(r["seconds"] for r in runs), "modules": runs[-1]["modules"],
                                  "clients": runs[-1]["clients"]}
    return results


def _baseline_tree(tmp: Path) -> Path | None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE, "operators", "k8s_templates", "dags"],
                             capture_output=True)
    if archive.returncode != 0:
        return None
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
    return tmp


def _clients(names: list[str]) -> str:
    return ", ".join(CLIENTS[n] for n in names) or "none"


def run() -> str:
    now = measure(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = _baseline_tree(Path(tmp))
        before = measure(base_tree) if base_tree else {}
    lines = [
        "## DAG parse cost (each file cold, as the DAG processor parses it)\n",
        f"A fresh process per parse with Airflow already imported; median of {REPEATS} (max in brackets). "
        f"*Before*: the same files at `{BASELINE}`, in the same run. Target <= {TARGET} s per file.\n",
        "| DAG file | before (s) | now (s) | before / now | modules imported before -> now | clients imported "
        "before -> now | <= 0.3 s |",
        "| --- | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for name, cur in now.items():
        old = before.get(name)
        old_s = f"{old['median']:.3f} ({old['max']:.2f})" if old else "n/a"
        ratio = f"{old['median'] / cur['median']:.1f}x" if old else "n/a"
        mods = f"{old['modules']} -> {cur['modules']}" if old else str(cur["modules"])
        clients = f"{_clients(old['clients'])} -> {_clients(cur['clients'])}" if old else _clients(cur["clients"])
        met = "yes" if cur["median"] <= TARGET else "NO"
        lines.append(f"| `{name}` | {old_s} | {cur['median']:.3f} ({cur['max']:.2f}) | {ratio} | {mods} | {clients} "
                     f"| {met} |")
    lines.append("\nThe clients (`kubernetes`, `kubernetes_asyncio`, aiohttp, the provider's hooks, the smtp "
                 "notifier) now load where a task or trigger runs: `operators`, `operators.k8s` and "
                 "`operators.sedna.kube` resolve them lazily (PEP 562), the operator's and trigger's modules import "
                 "them inside the methods that run on a worker or in the triggerer.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
