"""Benchmark: many deferred training tasks at once, production profile vs ``airflow standalone``.

The same DAG (``benchmarks/dags/bench_deferred_many.py``: 200 TrainingJobOperator tasks, each Job running
360 s in kubesim, long enough for the last task to defer before the first Job ends on a loaded 2-core machine) runs on each profile of the local stack, one after the other:

* ``standalone``: ``airflow standalone``, SQLite, LocalExecutor, one triggerer (what ``make demo`` runs);
* ``prod``: PostgreSQL, CeleryExecutor on Redis (one worker, concurrency 16), 2 schedulers, 2 triggerers
  (``devstack.prod``, the shape of ``deploy/helm/values.yaml``). The production profile then runs the DAG a
  second time and SIGKILLs the triggerer holding the most triggers once every task is deferred: the survivor
  must take them all over (what one triggerer holds, measured where it matters: after losing the other).

Measured per run: how many tasks were deferred at the same time (and on which triggerer), *Job -> task
success* (from the moment a watch in this process saw the Job's Complete condition to the task instance's
end_date), split at the trigger's "Trigger fired event" log line into Skiff's part (the trigger notices) and
Airflow's (event written, task resumed on a worker, execute_complete), and each triggerer's cost: memory (its
process tree sampled every 2 s: USS, the memory only it uses, and PSS, with its share of the libraries: before,
peak, and the slope of USS against triggers held, i.e. the memory one more deferred task costs), CPU (share of one core while it holds
every task and none has finished, and over the whole run) and its event loop's "async thread was blocked"
warnings (Airflow logs one when a loop iteration exceeds 0.2 s: the sign of a saturated triggerer).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
TASKS = int(os.environ.get("SKIFF_BENCH_DEFERRED_TASKS", "200"))
JOB_SECONDS = os.environ.get("SKIFF_BENCH_JOB_SECONDS", "360")
DAG_ID = "bench_deferred_many"
NODES = "".join(f"- {{name: bench-{i}, cpu: 64, memory: 256Gi, pods: 110}}\n" for i in range(4))
FIRED = '"Trigger fired event"'
BLOCKED = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z \[\w+\s*\] Triggerer's async thread was blocked "
                     r"for ([\d.]+) seconds")


def _setup_namespace(api) -> None:
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "bench"}})
    core.create_namespaced_persistent_volume_claim("bench", {
        "metadata": {"name": "bench-home"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})


def skiff_job_key(job) -> tuple[str | None, str | None]:
    """(run id, task id) of a Job Skiff's TrainingJobOperator created."""
    return ((job.metadata.annotations or {}).get("skiff.io/run-id"),
            (job.metadata.labels or {}).get("skiff.io/task-id"))


def _watch_completions(api, done: dict[tuple[str, str], float], stop: threading.Event,
                       namespace: str | None = "bench", key=skiff_job_key) -> None:
    """``key(job)`` -> wall time this process saw the Job's Complete condition (a watch: milliseconds);
    ``namespace`` None: every namespace's Jobs."""
    from kubernetes import client, watch

    batch = client.BatchV1Api(api)
    args = (batch.list_namespaced_job, namespace) if namespace else (batch.list_job_for_all_namespaces,)
    while not stop.is_set():
        for ev in watch.Watch().stream(*args, timeout_seconds=5):
            job = ev["object"]
            conds = (job.status.conditions if job.status else None) or []  # a new Job has no status yet
            k = key(job)
            if k[1] and k not in done and any(c.type == "Complete" and c.status == "True" for c in conds):
                done[k] = time.time()


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


class ComponentDied(RuntimeError):
    """An Airflow component exited during a run (standalone: ``airflow standalone`` does not restart it)."""


def _components(stack) -> dict:
    """The processes whose exit ends a run: name -> process (standalone: its component children)."""
    import psutil

    if hasattr(stack, "triggerer_jobs"):
        return {n: psutil.Process(p.pid) for n, p in stack.procs.items() if n not in ("smtp", "kubesim")}
    out = {}  # by name: `airflow standalone` also runs short-lived helpers, which may end
    for child in psutil.Process(stack.procs["airflow"].pid).children():
        try:
            argv = " ".join(child.cmdline()).replace("_", "-")
        except psutil.Error:
            continue
        for name in ("scheduler", "triggerer", "dag-processor", "api-server"):
            if name in argv.split():
                out[name] = child
    return out


def _check_components(stack, components: dict, killed: str | None, t0: float) -> None:
    import psutil

    dead = []
    for name, proc in components.items():
        try:
            if name != killed and proc.status() == psutil.STATUS_ZOMBIE:
                dead.append(name)
        except psutil.NoSuchProcess:
            if name != killed:
                dead.append(name)
    if dead:
        raise ComponentDied(f"{', '.join(sorted(dead))} exited {time.time() - t0:.0f} s into the run: "
                            f"{_last_error(stack, dead[0])}")


def _last_error(stack, name: str) -> str:
    logs = stack.workdir / "logs"
    path = logs / f"{name}.log"
    lines = (path if path.exists() else logs / "airflow.log").read_text(errors="replace").splitlines()
    errors = [ln.split("|", 1)[-1].strip() for ln in lines
              if "Error:" in ln and (path.exists() or ln.startswith(name))]
    return errors[-1] if errors else "no error in its log"


def _tree(root) -> list:
    import psutil

    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:  # a killed triggerer
        return []


def _mem_mib(procs) -> tuple[float, float, float]:
    """(USS, PSS, RSS) of the processes, MiB (RSS summed: pages the processes share count once per process)."""
    import psutil

    uss = pss = rss = 0
    for p in procs:
        try:
            info = p.memory_full_info()
        except psutil.Error:  # ended between listing and reading
            continue
        uss, pss, rss = uss + info.uss, pss + info.pss, rss + info.rss
    return uss / 2**20, pss / 2**20, rss / 2**20


def _cpu_s(procs) -> float:
    import psutil

    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def _tis(stack, run_id: str, dag_id: str = DAG_ID) -> list[dict]:
    """Every task instance of the run (the API pages at [api] maximum_page_limit, 100 by default)."""
    tis: list[dict] = []
    while True:
        page = stack.api("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances"
                                f"?limit=100&offset={len(tis)}")["task_instances"]
        tis += page
        if len(page) < 100:
            return tis


def _held(stack, roots: dict, deferred: int) -> dict[str, int]:
    """Triggerer name -> triggers it runs; ``unassigned``: triggers no live triggerer has taken yet. Standalone
    (SQLite, not read behind Airflow's back): its one triggerer is credited with every deferred task."""
    if not hasattr(stack, "triggers_by_triggerer"):
        return {next(iter(roots)): deferred}
    names = {v: k for k, v in stack.triggerer_jobs.items()}
    return {names.get(job, "unassigned"): n for job, n in stack.triggers_by_triggerer().items()}


def _blocked(stack, since: float, until: float) -> dict[str, list[float]]:
    """Triggerer name -> the "async thread was blocked for N seconds" warnings it logged in [since, until]."""
    logs = stack.workdir / "logs"
    if hasattr(stack, "triggerer_jobs"):
        files = {n: [ln for ln in (logs / f"{n}.log").read_text(errors="replace").splitlines()]
                 for n in stack.triggerer_jobs}
    else:  # standalone prefixes each component's lines with its name
        files = {"triggerer": [ln for ln in (logs / "airflow.log").read_text(errors="replace").splitlines()
                               if ln.startswith("triggerer")]}
    out: dict[str, list[float]] = {}
    for name, lines in files.items():
        out[name] = []
        for ln in lines:
            if m := BLOCKED.search(ln):
                at = dt.datetime.fromisoformat(m.group(1)).replace(tzinfo=dt.UTC).timestamp()
                if since <= at <= until:
                    out[name].append(float(m.group(2)))
    return out


def _run(stack, roots: dict, done: dict, *, kill: bool = False, dag_id: str = DAG_ID, tasks: int = TASKS,
         run_key=str) -> dict:
    """Trigger ``dag_id`` once and sample until it ends; ``kill``: SIGKILL the triggerer holding the most triggers
    as soon as every task is deferred and every trigger runs (or at the first Job completion, if earlier).
    ``done`` is keyed by (``run_key(run_id)``, task id): how the run's Jobs name their run."""
    live = dict(roots)
    components = _components(stack)
    print(f"[bench] prod_profile: watching {sorted(components)}", flush=True)
    idle = {name: _mem_mib(_tree(root)) for name, root in live.items()}
    cpu0 = {name: _cpu_s(_tree(root)) for name, root in live.items()}
    t0 = time.time()
    run_id = stack.trigger(dag_id)
    key = run_key(run_id)
    samples: list[tuple[float, dict, dict, dict]] = []  # (t, held, pss, cpu)
    max_deferred, all_deferred_at, spread, api_stalls = 0, None, {}, 0
    victim = killed_at = taken_over_at = died = None
    tis: list[dict] = []
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        try:
            tis = _tis(stack, run_id, dag_id)
            finished = stack.run_state(dag_id, run_id) in ("success", "failed")
        except (httpx.TimeoutException, RuntimeError):  # the API server did not answer within 30 s
            api_stalls += 1
            continue
        now = time.time()
        deferred = sum(ti["state"] == "deferred" for ti in tis)
        held = _held(stack, live, deferred)
        trees = {name: _tree(root) for name, root in live.items()}
        samples.append((now, held, {n: _mem_mib(p) for n, p in trees.items()},
                        {n: _cpu_s(p) for n, p in trees.items()}))
        if deferred > max_deferred:
            max_deferred, spread = deferred, held
        if deferred == tasks and all_deferred_at is None:
            all_deferred_at = now
        completed = any(k[0] == key for k in done)
        if kill and victim is None and (completed or (deferred == tasks and not held.get("unassigned")
                                                      and sum(held.values()) == tasks)):
            victim = max(live, key=lambda n: held.get(n, 0))
            stack.kill(victim)  # SIGKILL: no clean shutdown, its triggers stay assigned to a dead TriggererJob
            killed_at, spread = time.time(), held
            del live[victim]
        elif victim is not None and taken_over_at is None and not held.get(victim) and not held.get("unassigned"):
            taken_over_at = now
        if finished:
            break
        try:
            _check_components(stack, components, victim, t0)
        except ComponentDied as e:  # the run cannot end: report what it reached
            died = str(e)
            break
        time.sleep(2)
    end = time.time()
    if not died:
        tis = _tis(stack, run_id, dag_id)
    ended = {ti["task_id"]: dt.datetime.fromisoformat(ti["end_date"]).timestamp()
             for ti in tis if ti["state"] == "success" and (key, ti["task_id"]) in done}
    complete = {task: done[(key, task)] for task in ended}
    fired = _fired(stack, run_id, dag_id)
    lat = sorted(ended[t] - complete[t] for t in ended)
    to_fire = sorted(fired[t] - complete[t] for t in ended if t in fired)
    to_success = sorted(ended[t] - fired[t] for t in ended if t in fired)
    resumed = len(ended) / max(max(ended.values(), default=0) - min(complete.values(), default=0), 1) * 60
    first_done = min((t for (r, _), t in done.items() if r == key), default=end)
    return {"run_id": run_id, "state": died or stack.run_state(dag_id, run_id), "died": died, "wall": end - t0,
            "t0": t0, "first_done": first_done, "samples": samples,
            "states": Counter(ti["state"] for ti in tis),
            "succeeded": sum(ti["state"] == "success" for ti in tis),
            "tries": Counter(ti["try_number"] for ti in tis),
            "max_deferred": max_deferred, "all_deferred_at": all_deferred_at and all_deferred_at - t0,
            "spread": spread, "lat": lat, "to_fire": to_fire, "to_success": to_success, "resumed": resumed,
            "idle": idle, "api_stalls": api_stalls,
            "peak": {n: tuple(max(s[2][n][i] for s in samples if n in s[2]) for i in (0, 1, 2)) for n in live},
            "peak_held": {n: max(s[1].get(n, 0) for s in samples) for n in live},
            "slope": {n: _slope(samples, n, first_done) for n in live},
            "cpu_hold": {n: _cpu_share(samples, n, taken_over_at if kill else all_deferred_at, first_done) for n in live},
            "cpu_run": {n: (samples[-1][3][n] - cpu0[n]) / (end - t0) for n in live if samples},
            "blocked": _blocked(stack, t0, end),
            "victim": victim, "killed_at": killed_at and killed_at - t0,
            "takeover": taken_over_at and killed_at and taken_over_at - killed_at,
            "jobs_per_task": _jobs_per_task(stack, run_id) if kill else Counter()}


def _fired(stack, run_id: str, dag_id: str = DAG_ID) -> dict[str, float]:
    """task id -> when its trigger logged "Trigger fired event" (the triggerer writes it in the task's trigger
    log; after a takeover the survivor's log has it)."""
    out = {}
    run_dir = stack.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
    for path in run_dir.glob("task_id=*/attempt=1.log.trigger.*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if FIRED in line:
                out[path.parent.name.removeprefix("task_id=")] = dt.datetime.fromisoformat(
                    json.loads(line)["timestamp"]).timestamp()
    return out


def _slope(samples: list, name: str, until: float) -> float | None:
    """KiB of USS per trigger held: least squares over the samples before the first Job completed (the triggers
    ramp up, none has ended yet), so the one-off cost of the first trigger (imports, the shared informers) is
    the intercept, not part of the slope."""
    pts = [(s[1].get(name, 0), s[2][name][0]) for s in samples if s[0] <= until and name in s[2]]
    if len({x for x, _ in pts}) < 3:
        return None
    return statistics.linear_regression([x for x, _ in pts], [y for _, y in pts]).slope * 1024


def _cpu_share(samples: list, name: str, since: float | None, until: float) -> float | None:
    """Share of one core the triggerer used between ``since`` (all triggers held) and ``until``."""
    pts = [s for s in samples if since is not None and since <= s[0] <= until and name in s[3]]
    if len(pts) < 2 or pts[-1][0] - pts[0][0] < 10:
        return None
    return (pts[-1][3][name] - pts[0][3][name]) / (pts[-1][0] - pts[0][0])


def _jobs_per_task(stack, run_id: str) -> Counter:
    """How many Jobs each task of the run got (1 each, or a trigger takeover created one)."""
    from kubernetes import client

    jobs = client.BatchV1Api(stack.k8s()).list_namespaced_job("bench").items
    per_task = Counter(j.metadata.labels.get("skiff.io/task-id") for j in jobs
                       if (j.metadata.annotations or {}).get("skiff.io/run-id") == run_id)
    return Counter(per_task.values())


def bench_stack(profile: str) -> tuple:
    """(a stack of ``profile`` on the benchmark DAGs and 4 roomy nodes, not started; its nodes file)."""
    from devstack.prod import make_stack

    workdir = Path(tempfile.mkdtemp(prefix=f"skiff-bench-{profile}-"))
    nodes = workdir.parent / f"{workdir.name}-nodes.yaml"
    nodes.write_text(NODES)
    # no platform file: the benchmark namespace is no team, and quotas are not what is measured here
    return make_stack(profile, workdir, dags_dirs=[REPO / "benchmarks" / "dags"], nodes_file=nodes,
                      airflow_settings={"AIRFLOW__SKIFF__PLATFORM_FILE": ""}), nodes


def _measure(profile: str) -> list[dict]:
    """The profile's runs on a fresh stack. A run whose component died (standalone: SQLite's "database is
    locked" kills the component whose write waited 5 s for the lock, and airflow standalone does not restart
    it) reports what it reached; the production profile then skips its second run."""
    stack, nodes = bench_stack(profile)
    done: dict[tuple[str, str], float] = {}
    stop = threading.Event()
    try:
        stack.start(timeout=300)
        api = stack.k8s()
        _setup_namespace(api)
        watcher = threading.Thread(target=_watch_completions, args=(api, done, stop), daemon=True)
        watcher.start()
        stack.wait_dag(DAG_ID)
        roots = _triggerer_roots(stack)
        runs = [_run(stack, roots, done)]
        _report(profile, runs[-1])
        if profile == "prod" and not runs[0]["died"]:
            runs.append(_run(stack, roots, done, kill=True))
            _report("prod, one triggerer killed", runs[-1])
        return runs
    finally:
        stop.set()
        stack.stop()
        nodes.unlink(missing_ok=True)


def _report(what: str, r: dict) -> None:
    print(f"[bench] prod_profile {what}: {r['state']} {r['succeeded']}/{TASKS}, max deferred {r['max_deferred']}, "
          f"spread {r['spread']}, lat {_lats(r, 'lat')}, fired->success {_lats(r, 'to_success')}, peak {r['peak']}, slope {r['slope']}, "
          f"cpu hold {r['cpu_hold']}, blocked { {n: len(b) for n, b in r['blocked'].items()} }, "
          f"victim {r['victim']} takeover {r['takeover']}", flush=True)


def run() -> str:
    sys.path.insert(0, str(REPO))  # devstack and kubesim run from the checkout
    os.environ["SKIFF_BENCH_DEFERRED_TASKS"] = str(TASKS)
    os.environ["SKIFF_BENCH_JOB_SECONDS"] = JOB_SECONDS
    (s, *_), (p, *f) = _measure("standalone"), _measure("prod")
    if not f:
        raise RuntimeError(f"production profile: {p['died']}")
    f = f[0]
    rows = [
        ("run result", _result(s), _result(p)),
        ("tasks deferred at the same time (max)", s["max_deferred"], p["max_deferred"]),
        ("all tasks deferred after (s from trigger)", _fmt(s["all_deferred_at"]), _fmt(p["all_deferred_at"])),
        ("triggers per triggerer at that moment", _spread(s["spread"]), _spread(p["spread"])),
        ("Job Complete -> task success, p50 / p95 / max", _lats(s, "lat"), _lats(p, "lat")),
        ("... of which Job Complete -> trigger fired (Skiff's trigger), p50 / p95 / max",
         _lats(s, "to_fire"), _lats(p, "to_fire")),
        ("... of which trigger fired -> task success (Airflow resumes the task on a worker), p50 / p95 / max",
         _lats(s, "to_success"), _lats(p, "to_success")),
        ("tasks resumed to success per minute, first Job Complete -> last task done", _rate(s), _rate(p)),
        ("triggerer memory before the run, USS / PSS (process tree)", _mib(s["idle"]), _mib(p["idle"])),
        ("triggerer memory at its peak, USS / PSS", _mib(s["peak"]), _mib(p["peak"])),
        ("memory per deferred task: slope of USS over triggers held", _kib(s["slope"]), _kib(p["slope"])),
        ("memory per deferred task: (peak - before) USS / most triggers held", _per_trigger(s), _per_trigger(p)),
        ("triggerer CPU while holding every task, before the first Job ends (share of one core)",
         _share(s["cpu_hold"]), _share(p["cpu_hold"])),
        ("triggerer CPU over the whole run (share of one core)", _share(s["cpu_run"]), _share(p["cpu_run"])),
        ("event loop blocked > 0.2 s (Airflow's warning): count, longest", _blk(s), _blk(p)),
        ("whole run, trigger to last task done", f"{s['wall']:.0f} s", f"{p['wall']:.0f} s"),
        ("REST API polls that got no answer within 30 s", s["api_stalls"], p["api_stalls"]),
    ]
    survivor = next(iter(f["peak"]), "")
    failover = [
        ("run result", _result(f)),
        ("triggers per triggerer when one was SIGKILLed", f"{_spread(f['spread'])}, at {_fmt(f['killed_at'])} "
                                                         f"from trigger; killed: {f['victim']}"),
        ("kill -> the survivor runs every trigger", _fmt(f["takeover"], "never")),
        ("most triggers the survivor ran at once", f"{f['peak_held'].get(survivor, 0)} ({survivor})"),
        ("Jobs per task", ", ".join(f"{v} tasks with {k} Job{'s' * (k != 1)}"
                                    for k, v in sorted(f["jobs_per_task"].items()))),
        ("Job Complete -> task success, p50 / p95 / max", _lats(f, "lat")),
        ("... of which Job Complete -> trigger fired, p50 / p95 / max", _lats(f, "to_fire")),
        ("survivor memory before the run (after the first), USS / PSS", _mib(f["idle"], survivor)),
        ("survivor memory at its peak, USS / PSS", _mib(f["peak"])),
        ("survivor memory per trigger: slope of USS; (peak - before) USS / most triggers held",
         f"{_kib(f['slope'])}; {_per_trigger(f)}"),
        ("survivor CPU while holding every task, before the first Job ends", _share(f["cpu_hold"])),
        ("survivor's event loop blocked > 0.2 s: count, longest", _blk(f, survivor)),
    ]
    table = "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)
    ftable = "\n".join(f"| {a} | {b} |" for a, b in failover)
    return f"""## Production profile: {TASKS} deferred training tasks at once

`benchmarks/dags/bench_deferred_many.py`: {TASKS} `TrainingJobOperator` tasks in one run, each Job running {JOB_SECONDS} s
in kubesim (4 roomy nodes, no quota), on each profile of the local stack one after the other. *Job Complete ->
task success*: from the moment a watch in the benchmark process saw the Job's Complete condition to the task
instance's `end_date`, split at the "Trigger fired event" line the triggerer writes in the task's trigger log.
Triggerer memory: each triggerer's process tree (supervisor + trigger runner) sampled every 2 s; USS is the
memory only it uses, PSS adds its share of the libraries it maps with other processes on this host (in a pod,
where nothing else maps them, the whole of them counts). The slope is a least-squares fit of USS against the
triggers the triggerer held, over the samples before the first Job ended (what one more deferred task costs;
the first trigger's one-off imports are not in it). Standalone's one triggerer is credited with every deferred
task; the production profile reads each trigger's `triggerer_id` from the metadata DB. CPU: user + system time
of the triggerer's process tree. A component that exits mid-run ends the run there (`airflow standalone`
does not restart it): the table shows what the run reached.

| measure | standalone (SQLite, LocalExecutor, 1 triggerer) | production profile (PostgreSQL, Celery on Redis, 2 schedulers, 2 triggerers) |
| --- | --- | --- |
{table}

**One triggerer holding them all.** On the same production-profile stack, a second run of the DAG; once every
task was deferred and every trigger running, the triggerer holding the most was SIGKILLed (no clean shutdown,
as a crashed pod). Its triggers stay assigned to its TriggererJob until the heartbeat is older than
`[triggerer] triggerer_health_check_threshold` (30 s); then the survivor takes them.

| measure | production profile, one of two triggerers killed |
| --- | --- |
{ftable}
"""


def _result(r: dict) -> str:
    tries = ", ".join(f"try {k}: {v}" for k, v in sorted(r["tries"].items()))
    return f"{r['state']}, {r['succeeded']}/{TASKS} tasks succeeded ({tries})"


def _fmt(v, none: str = "never all at once") -> str:
    return none if v is None else f"{v:.0f} s"


def _mib(values: dict, only: str | None = None) -> str:
    return ", ".join(f"{n}: {u:.0f} / {p:.0f} MiB" for n, (u, p, *_) in sorted(values.items())
                     if only in (None, n)) or "n/a"


def _kib(values: dict) -> str:
    return ", ".join(f"{n}: {v:.0f} KiB" for n, v in sorted(values.items()) if v is not None) or "n/a"


def _share(values: dict) -> str:
    return ", ".join(f"{n}: {v:.0%}" for n, v in sorted(values.items()) if v is not None) or "n/a"


def _blk(r: dict, only: str | None = None) -> str:
    return ", ".join(f"{n}: {len(b)}, {max(b, default=0):.2f} s" for n, b in sorted(r["blocked"].items())
                     if only in (None, n)) or "n/a"


def _spread(held: dict) -> str:
    return ", ".join(f"{n}: {v}" for n, v in sorted(held.items())) or "n/a"


def _rate(r: dict) -> str:
    return f"{r['resumed']:.0f}" if r["lat"] else "n/a"


def _per_trigger(r: dict) -> str:
    """USS growth of the triggerer that held the most triggers, per trigger it held."""
    name, held = max(r["peak_held"].items(), key=lambda kv: kv[1], default=("", 0))
    if not held or name not in r["peak"]:
        return "n/a"
    return f"{(r['peak'][name][0] - r['idle'][name][0]) * 1024 / held:.0f} KiB ({name}, {held} triggers)"


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def _lats(r: dict, key: str) -> str:
    v = r[key]
    if not v:
        return "n/a"
    return f"{_pct(v, 50):.2f} / {_pct(v, 95):.2f} / {v[-1]:.2f} s ({len(v)} tasks)"
