"""Benchmark: many deferred training tasks at once, production profile vs ``airflow standalone``.

The same DAG (``benchmarks/dags/bench_deferred_many.py``: 200 TrainingJobOperator tasks, each Job running
240 s in kubesim) runs on each profile of the local stack, one after the other:

* ``standalone``: ``airflow standalone``, SQLite, LocalExecutor, one triggerer (what ``make demo`` runs);
* ``prod``: PostgreSQL, CeleryExecutor on Redis (one worker, concurrency 16), 2 schedulers, 2 triggerers
  (``devstack.prod``, the shape of ``deploy/helm/values.yaml``).

Measured: how many tasks were deferred at the same time (and on which triggerer), *Job -> task success*
(from the moment a watch in this process saw the Job's Complete condition to the task instance's end_date,
i.e. trigger notices + event written + task resumed on a worker + execute_complete), and the triggerers'
memory (PSS of each triggerer's process tree, sampled every 2 s, peak).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
TASKS = int(os.environ.get("SKIFF_BENCH_DEFERRED_TASKS", "200"))
JOB_SECONDS = os.environ.get("SKIFF_BENCH_JOB_SECONDS", "240")
DAG_ID = "bench_deferred_many"
NODES = "".join(f"- {{name: bench-{i}, cpu: 64, memory: 256Gi, pods: 110}}\n" for i in range(4))


def _setup_namespace(api) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "bench"}})
    core.create_namespaced_persistent_volume_claim("bench", {
        "metadata": {"name": "bench-home"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})


def _watch_completions(api, done: dict[str, float], stop: threading.Event) -> None:
    """task id -> wall time this process saw its Job's Complete condition (a watch: milliseconds)."""
    from kubernetes import client, watch

    batch = client.BatchV1Api(api)
    while not stop.is_set():
        for ev in watch.Watch().stream(batch.list_namespaced_job, "bench", timeout_seconds=5):
            job = ev["object"]
            conds = (job.status.conditions if job.status else None) or []  # a new Job has no status yet
            task = (job.metadata.labels or {}).get("skiff.io/task-id")
            if task and task not in done and any(c.type == "Complete" and c.status == "True" for c in conds):
                done[task] = time.time()


def _triggerer_roots(stack) -> dict:
    """name -> the triggerer's top process (found once: its tree is re-read at every sample)."""
    import psutil

    if hasattr(stack, "triggerer_jobs"):
        return {n: psutil.Process(stack.procs[n].pid) for n in stack.triggerer_jobs}
    roots = {}  # standalone: the `airflow triggerer` child of `airflow standalone`
    for child in psutil.Process(stack.procs["airflow"].pid).children():
        try:
            if child.cmdline()[-1:] == ["triggerer"]:
                roots[f"triggerer{len(roots) or ''}"] = child
        except psutil.Error:  # a task process that just ended
            pass
    return roots


def _trees(roots: dict) -> dict[str, list]:
    import psutil

    trees = {}
    for name, root in roots.items():
        try:
            trees[name] = [root, *root.children(recursive=True)]
        except psutil.Error:  # a killed triggerer
            trees[name] = []
    return trees


def _pss_mib(procs) -> float:
    import psutil

    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:  # ended between listing and reading
            pass
    return total / 2**20


def _tis(stack, run_id: str) -> list[dict]:
    """Every task instance of the run (the API pages at [api] maximum_page_limit, 100 by default)."""
    tis: list[dict] = []
    while True:
        page = stack.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances"
                                f"?limit=100&offset={len(tis)}")["task_instances"]
        tis += page
        if len(page) < 100:
            return tis


def _measure(profile: str) -> dict:
    from devstack.prod import make_stack

    workdir = Path(tempfile.mkdtemp(prefix=f"skiff-bench-{profile}-"))
    nodes = workdir.parent / f"{workdir.name}-nodes.yaml"
    nodes.write_text(NODES)
    # no platform file: the benchmark namespace is no team, and quotas are not what is measured here
    stack = make_stack(profile, workdir, dags_dirs=[REPO / "benchmarks" / "dags"], nodes_file=nodes,
                       airflow_settings={"AIRFLOW__SKIFF__PLATFORM_FILE": ""})
    done: dict[str, float] = {}
    stop = threading.Event()
    try:
        stack.start(timeout=300)
        api = stack.k8s()
        _setup_namespace(api)
        watcher = threading.Thread(target=_watch_completions, args=(api, done, stop), daemon=True)
        watcher.start()
        stack.wait_dag(DAG_ID)
        roots = _triggerer_roots(stack)
        idle = {name: _pss_mib(procs) for name, procs in _trees(roots).items()}
        t0 = time.time()
        run_id = stack.trigger(DAG_ID)
        max_deferred, all_deferred_at, peak, spread = 0, None, {}, {}
        deadline = time.monotonic() + 1800
        api_stalls = 0
        while time.monotonic() < deadline:
            try:
                tis = _tis(stack, run_id)
                finished = stack.run_state(DAG_ID, run_id) in ("success", "failed")
            except (httpx.TimeoutException, RuntimeError):  # the API server did not answer within 30 s
                api_stalls += 1
                continue
            deferred = sum(ti["state"] == "deferred" for ti in tis)
            if deferred > max_deferred:
                max_deferred = deferred
                if hasattr(stack, "triggers_by_triggerer"):
                    spread = stack.triggers_by_triggerer()
            if deferred == TASKS and all_deferred_at is None:
                all_deferred_at = time.time() - t0
            for name, procs in _trees(roots).items():
                peak[name] = max(peak.get(name, 0.0), _pss_mib(procs))
            if finished:
                break
            time.sleep(2)
        wall = time.time() - t0
        tis = _tis(stack, run_id)
        lat = [dt.datetime.fromisoformat(ti["end_date"]).timestamp() - done[ti["task_id"]]
               for ti in tis if ti["state"] == "success" and ti["task_id"] in done]
        return {"profile": profile, "state": stack.run_state(DAG_ID, run_id), "wall": wall,
                "succeeded": sum(ti["state"] == "success" for ti in tis), "max_deferred": max_deferred,
                "all_deferred_at": all_deferred_at, "lat": sorted(lat), "peak": peak, "idle": idle, "spread": spread,
                "api_stalls": api_stalls,
                "triggerer_jobs": getattr(stack, "triggerer_jobs", {})}
    finally:
        stop.set()
        stack.stop()
        nodes.unlink(missing_ok=True)


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def _spread(r: dict) -> str:
    if not r["spread"]:
        return "one triggerer"
    names = {v: k for k, v in r["triggerer_jobs"].items()}
    return ", ".join(f"{names.get(k, 'unassigned')}: {v}" for k, v in sorted(r["spread"].items(), key=str))


def run() -> str:
    sys.path.insert(0, str(REPO))  # devstack and kubesim run from the checkout
    os.environ["SKIFF_BENCH_DEFERRED_TASKS"] = str(TASKS)
    os.environ["SKIFF_BENCH_JOB_SECONDS"] = JOB_SECONDS
    results = []
    for profile in ("standalone", "prod"):
        r = _measure(profile)
        print(f"[bench] prod_profile {profile}: {r['state']} {r['succeeded']}/{TASKS}, max deferred "
              f"{r['max_deferred']}, p50 {_lat(r, 50)}, peak {r['peak']}", flush=True)
        results.append(r)
    s, p = results
    rows = [
        ("run result", f"{s['state']}, {s['succeeded']}/{TASKS} tasks", f"{p['state']}, {p['succeeded']}/{TASKS} tasks"),
        ("tasks deferred at the same time (max)", s["max_deferred"], p["max_deferred"]),
        ("all tasks deferred after (s from trigger)", _fmt(s["all_deferred_at"]), _fmt(p["all_deferred_at"])),
        ("triggers per triggerer at that moment", _spread(s), _spread(p)),
        ("Job Complete -> task success, p50", _lat(s, 50), _lat(p, 50)),
        ("Job Complete -> task success, p95", _lat(s, 95), _lat(p, 95)),
        ("Job Complete -> task success, max", _lat(s, 100), _lat(p, 100)),
        ("triggerer memory, PSS before the run (process tree)", _mem(s["idle"]), _mem(p["idle"])),
        ("triggerer memory, peak PSS (process tree)", _mem(s["peak"]), _mem(p["peak"])),
        ("memory per deferred task (peak - before) / triggers held", _per_trigger(s), _per_trigger(p)),
        ("whole run, trigger to last task done", f"{s['wall']:.0f} s", f"{p['wall']:.0f} s"),
        ("REST API polls that got no answer within 30 s", s["api_stalls"], p["api_stalls"]),
    ]
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    return f"""## Production profile: {TASKS} deferred training tasks at once

`benchmarks/dags/bench_deferred_many.py`: {TASKS} `TrainingJobOperator` tasks in one run, each Job running {JOB_SECONDS} s
in kubesim (4 roomy nodes, no quota), on each profile of the local stack one after the other. *Job Complete ->
task success*: from the moment a watch in the benchmark process saw the Job's Complete condition to the task
instance's `end_date` (the trigger notices, the event is written, the scheduler resumes the task on a worker,
`execute_complete` runs). Triggerer memory: PSS of each triggerer's process tree (supervisor + trigger runner),
sampled every 2 s, peak.

| measure | standalone (SQLite, LocalExecutor, 1 triggerer) | production profile (PostgreSQL, Celery on Redis, 2 schedulers, 2 triggerers) |
| --- | --- | --- |
{table}

Ratio, standalone / production profile, Job Complete -> task success p50: {_ratio(s, p, 50)}, p95: {_ratio(s, p, 95)}.
"""


def _fmt(v) -> str:
    return "never all at once" if v is None else f"{v:.0f} s"


def _mem(peak: dict) -> str:
    return ", ".join(f"{n}: {v:.0f} MiB" for n, v in sorted(peak.items())) or "n/a"


def _per_trigger(r: dict) -> str:
    """Memory growth of the triggerer that held the most triggers, per trigger it held."""
    if r["spread"]:
        names = {v: k for k, v in r["triggerer_jobs"].items()}
        job, held = max(((k, v) for k, v in r["spread"].items() if k is not None), key=lambda kv: kv[1])
        name = names.get(job, "")
    else:
        name, held = next(iter(r["peak"]), ""), r["max_deferred"]
    if not held or name not in r["peak"]:
        return "n/a"
    return f"{(r['peak'][name] - r['idle'].get(name, 0)) * 1024 / held:.0f} KiB ({name}, {held} triggers)"


def _lat(r: dict, q: int) -> str:
    if not r["lat"]:
        return "n/a"
    return f"{r['lat'][-1] if q == 100 else _pct(r['lat'], q):.2f} s ({len(r['lat'])} tasks)"


def _ratio(s: dict, p: dict, q: int) -> str:
    if not s["lat"] or not p["lat"]:
        return "n/a"
    return f"{_pct(s['lat'], q) / max(_pct(p['lat'], q), 1e-3):.2f}x"
