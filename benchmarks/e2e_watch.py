"""Benchmark: 100 deferred tasks end to end under a real scheduler and triggerers, Skiff's
``TrainingJobOperator`` vs the provider's ``KubernetesJobOperator(deferrable=True)``, on one production-profile
stack (``devstack.prod``: PostgreSQL, Celery on Redis, 2 schedulers, 2 triggerers; kubesim in its own process).

The two DAGs run one after the other on the same stack, each on freshly restarted triggerers: ``benchmarks/dags/bench_deferred_many.py`` (Skiff, namespace
``bench``) then ``benchmarks/dags/bench_deferred_provider.py`` (the provider, ``bench-provider``), each ``TASKS``
tasks whose Jobs run ``JOB_SECONDS`` s, long enough that every task is deferred before the first Job ends. The
run itself is ``prod_profile``'s (task states, triggers per triggerer, triggerer memory and CPU sampled every
2 s, Job Complete seen by a watch in this process, "Trigger fired event" in the trigger logs); beside it this
module samples kubesim's ``/kubesim/stats`` every second: watches open and the request counter. Measured per side:

* watches open on kubesim: the peak during the run, less the benchmark's own (the most open in the 20 s before
  the run: this process's completion watch, cluster-wide, re-opened every 5 s);
* requests per minute while waiting: kubesim's counter from the moment every trigger of the run was assigned
  to a triggerer (+5 s: the triggers' first lists, watches, log streams, polls) to the first Job Complete; the
  requests on the cluster-wide Job path (only the benchmark's watch uses it) are not counted anywhere;
* triggerer memory: both triggerers' process trees (supervisor + trigger runner), before the run and at their
  peak: USS (memory only it uses) and RSS (summed over the tree's processes);
* Job Complete -> task success p50/p95, split at the trigger's "Trigger fired event".
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time

import httpx

from benchmarks import prod_profile as pp
from benchmarks.shared_watch import _markdown

TASKS = int(os.environ.get("SKIFF_BENCH_E2E_TASKS", "100"))
JOB_SECONDS = os.environ.get("SKIFF_BENCH_E2E_JOB_SECONDS", "180")
BASELINE_S = 20.0
SETTLE_S = 5.0
SIDES = [  # (key, DAG, namespace, label)
    ("skiff", "bench_deferred_many", "bench", "Skiff `TrainingJobOperator` (deferrable)"),
    ("provider", "bench_deferred_provider", "bench-provider", "provider `KubernetesJobOperator(deferrable=True)`"),
]


OWN = "GET /apis/batch/v1/jobs"  # the benchmark's completion watch: the only request on the cluster-wide path


def _job_key(job) -> tuple[str | None, str | None]:
    """(run id, task id) of a Skiff Job; of a provider Job (run id as a label value): its pod template carries
    KubernetesPodOperator's labels."""
    if (job.metadata.labels or {}).get("skiff.io/task-id"):
        return pp.skiff_job_key(job)
    labels = (job.spec.template.metadata.labels if job.spec and job.spec.template.metadata else None) or {}
    return labels.get("run_id"), labels.get("task_id")


class KubesimStats(threading.Thread):
    """``/kubesim/stats`` every second: (wall time, requests counted, watches open, requests by verb+resource, by
    verb), the requests of the benchmark's own completion watch (``OWN``) taken out."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.samples, self.stop = url, [], threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=10) as http:
            while not self.stop.wait(1.0):
                try:
                    s = http.get(f"{self.url}/kubesim/stats").json()
                except httpx.HTTPError:
                    continue
                own = s["by_path"].get(OWN, 0)  # watch requests for Jobs
                by_res = {**s["by_resource"], "watch jobs.batch": s["by_resource"].get("watch jobs.batch", 0) - own}
                by_verb = {**s["by_verb"], "watch": s["by_verb"].get("watch", 0) - own}
                self.samples.append((time.time(), s["total"] - own, s["watches_open"], by_res, by_verb))

    def between(self, t0: float, t1: float) -> list[tuple]:
        return [s for s in self.samples if t0 <= s[0] <= t1]


def _rate(samples: list[tuple]) -> float | None:
    """Requests per minute over the samples (None under 10 s)."""
    if len(samples) < 2 or samples[-1][0] - samples[0][0] < 10:
        return None
    return (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0]) * 60


def _count(samples: list[tuple], verb: str) -> int:
    return samples[-1][4].get(verb, 0) - samples[0][4].get(verb, 0) if len(samples) >= 2 else 0


def _assigned(held: dict) -> int:
    return sum(v for k, v in held.items() if k != "unassigned")


def _fresh_triggerers(stack) -> dict:
    """Stop each triggerer (SIGTERM: it ends its TriggererJob) and start it again: each side starts on triggerers
    that have run no trigger yet, not on what the other side left in them. Returns their process roots."""
    import signal

    from devstack.stack import _stop_all

    for name in list(stack.triggerer_jobs):
        stack.expect_exit(name)  # on purpose: the stack's watchdog must not restart it
        _stop_all([stack.procs[name]], signal.SIGTERM, timeout=60)
        stack.start_triggerer(name)
    return pp._triggerer_roots(stack)


def _side(stack, done: dict, stats: KubesimStats, dag_id: str, run_key) -> dict:
    roots = _fresh_triggerers(stack)
    before = time.time()
    time.sleep(BASELINE_S)
    base = stats.between(before, time.time())
    r = pp._run(stack, roots, done, dag_id=dag_id, tasks=TASKS, run_key=run_key)
    during = stats.between(r["t0"], r["t0"] + r["wall"])
    # waiting: from every surviving trigger held by a triggerer (+ SETTLE_S) to the first Job Complete
    held = [(s[0], _assigned(s[1])) for s in r["samples"] if s[0] <= r["first_done"]]
    most = max((n for _, n in held), default=0)
    all_held = next((t for t, n in held if n == most), None) if most else None
    window = stats.between(all_held + SETTLE_S, r["first_done"]) if all_held else []
    kinds = {}
    if len(window) >= 2:
        kinds = {k: v - window[0][3].get(k, 0) for k, v in window[-1][3].items() if v > window[0][3].get(k, 0)}
    r.update({
        "held_most": most, "all_held_at": all_held and all_held - r["t0"],
        "own_watches": max((s[2] for s in base), default=0), "base_rpm": _rate(base),
        "watches_peak": max((s[2] for s in during), default=0),
        "watch_requests": _count(during, "watch"),
        "requests": during[-1][1] - during[0][1] if during else 0,
        "rpm": _rate(window), "window": window[-1][0] - window[0][0] if len(window) >= 2 else 0.0,
        "kinds": sorted(kinds.items(), key=lambda kv: -kv[1])[:3],
        "errors": _errors(stack, dag_id, r["run_id"]),
    })
    return r


def _errors(stack, dag_id: str, run_id: str) -> list[str]:
    """The last error line of the failed tasks' logs (the first 20), counted: what made them fail."""
    from collections import Counter

    out: Counter = Counter()
    failed = [ti for ti in pp._tis(stack, run_id, dag_id) if ti["state"] == "failed"]
    for ti in failed[:20]:
        lines = [ln for ln in stack.task_log(dag_id, run_id, ti["task_id"], ti["try_number"] or 1).splitlines()
                 if "Error" in ln or "Exception" in ln]
        out[(lines[-1] if lines else "no error in its log")[:200]] += 1
    return [f"{n} x {msg}" for msg, n in out.most_common(3)]


def _measure() -> dict[str, dict]:
    from kubernetes import client

    stack, nodes = pp.bench_stack("prod")
    done: dict[tuple[str, str], float] = {}
    stop = threading.Event()
    stats = None
    try:
        stack.start(timeout=300)
        api = stack.k8s()
        pp._setup_namespace(api)  # bench, with the PVC Skiff's tasks mount
        client.CoreV1Api(api).create_namespace({"metadata": {"name": SIDES[1][2]}})
        # one cluster-wide watch: a path neither side uses, so its requests are taken out of kubesim's counts
        threading.Thread(target=pp._watch_completions, args=(api, done, stop, None, _job_key), daemon=True).start()
        stats = KubesimStats(stack.kubesim_url)
        stats.start()
        for _, dag_id, _, _ in SIDES:
            stack.wait_dag(dag_id)
        from airflow.providers.cncf.kubernetes.pod_generator import make_safe_label_value

        out = {}
        for side, dag_id, _, _ in SIDES:
            out[side] = _side(stack, done, stats, dag_id, str if side == "skiff" else make_safe_label_value)
            _print(side, out[side])
        return out
    finally:
        stop.set()
        if stats is not None:
            stats.stop.set()
        stack.stop()
        nodes.unlink(missing_ok=True)


def _print(side: str, r: dict) -> None:
    print(f"[bench] e2e_watch {side}: {r['state']} {r['states']}, deferred max {r['max_deferred']}, held {r['held_most']} "
          f"at {r['all_held_at']}, first done {r['first_done'] - r['t0']:.0f} s, watches {r['watches_peak']} "
          f"(own {r['own_watches']}), rpm {r['rpm']} over {r['window']:.0f} s (base {r['base_rpm']}) {r['kinds']}, "
          f"lat {pp._lats(r, 'lat')}, idle {r['idle']}, peak {r['peak']}, errors {r['errors']}", flush=True)


def run() -> str:
    sys.path.insert(0, str(pp.REPO))
    os.environ["SKIFF_BENCH_DEFERRED_TASKS"] = str(TASKS)  # both DAGs read these when parsed
    os.environ["SKIFF_BENCH_JOB_SECONDS"] = JOB_SECONDS
    return _report(_measure())


# ---- the section ----------------------------------------------------------------------------------------------

def _total(values: dict, i: int) -> float:
    """Summed over the triggerers: index 0 USS, 2 RSS."""
    return sum(v[i] for v in values.values())


def _slope(r: dict, i: int) -> float | None:
    """KiB per trigger held: least squares of both triggerers' summed memory (index 0 USS, 2 RSS) against the
    triggers they held, over the samples before the first Job ended; the one-off cost of a trigger class's first
    use (imports, Skiff's shared informers) is the intercept, so the side that runs first pays nothing extra."""
    pts = [(_assigned(s[1]), sum(m[i] for m in s[2].values())) for s in r["samples"] if s[0] <= r["first_done"]]
    if len({x for x, _ in pts}) < 3:
        return None
    return statistics.linear_regression([x for x, _ in pts], [y for _, y in pts]).slope * 1024


def _net(r: dict) -> tuple[int, float | None]:
    """(watches, requests/min) the run's triggers account for: the benchmark's own watch subtracted."""
    return max(r["watches_peak"] - r["own_watches"], 0), r["rpm"]


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "n/a"
    if b == 0:
        return "n/a (Skiff: 0)" if a else "1 (both 0)"
    return f"{a / b:.1f}x"


def _p(r: dict, key: str, q: int) -> float | None:
    return pp._pct(r[key], q) if r[key] else None


def _report(out: dict[str, dict]) -> str:
    s, p = out["skiff"], out["provider"]
    (sw, sr), (pw, pr) = _net(s), _net(p)

    def mem(r, i):
        return f"{_total(r['idle'], i):.0f} -> {_total(r['peak'], i):.0f} MiB"

    def grow(r):
        return _total(r["peak"], 0) - _total(r["idle"], 0)

    def rpm(r, net):
        base = "n/a" if r["base_rpm"] is None else f"{r['base_rpm']:.0f}"
        return "n/a" if net is None else f"{net:.0f} ({r['window']:.0f} s; before the run: {base})"

    def kib(r, i):
        v = _slope(r, i)
        return "n/a" if v is None else f"{v:.0f} KiB"

    def kinds(r):
        return ", ".join(f"{k}: {v}" for k, v in r["kinds"]) or "none"

    def lat(r, key):
        return pp._lats(r, key)

    def result(r):
        states = ", ".join(f"{k}: {v}" for k, v in sorted(r["states"].items()))
        return f"{r['state']}, {r['succeeded']}/{TASKS} succeeded ({states})"

    rows = [
        ("run result", result(s), result(p), ""),
        ("tasks deferred at the same time (max); all deferred after", f"{s['max_deferred']}; {pp._fmt(s['all_deferred_at'])}",
         f"{p['max_deferred']}; {pp._fmt(p['all_deferred_at'])}", ""),
        ("triggers held by the triggerers (max before the first Job ended), per triggerer",
         f"{s['held_most']} ({pp._spread(s['spread'])})", f"{p['held_most']} ({pp._spread(p['spread'])})", ""),
        ("**watches open on kubesim, peak** (benchmark's own subtracted)", f"{sw} ({s['watches_peak']} - {s['own_watches']})",
         f"{pw} ({p['watches_peak']} - {p['own_watches']})", _ratio(pw, sw)),
        ("watch requests during the run", s["watch_requests"], p["watch_requests"], _ratio(p["watch_requests"], s["watch_requests"])),
        ("**requests / min while every task waits** (window; in the 20 s before the run)", rpm(s, sr), rpm(p, pr),
         _ratio(pr, sr)),
        ("... the most frequent in that window", kinds(s), kinds(p), ""),
        ("requests in all during the run (create, start-up, waiting, resume)", s["requests"], p["requests"],
         _ratio(p["requests"], s["requests"])),
        ("**triggerer memory, USS, both triggerers: before -> peak**", mem(s, 0), mem(p, 0), ""),
        ("... growth during the run (peak - before, USS)", f"{grow(s):.0f} MiB", f"{grow(p):.0f} MiB",
         _ratio(grow(p), grow(s))),
        ("triggerer RSS, both triggerers (summed over each tree): before -> peak", mem(s, 2), mem(p, 2),
         _ratio(_total(p["peak"], 2), _total(s["peak"], 2))),
        ("**memory per deferred task** (slope over triggers held, both triggerers): USS; RSS",
         f"{kib(s, 0)}; {kib(s, 2)}", f"{kib(p, 0)}; {kib(p, 2)}",
         f"USS {_ratio(_slope(p, 0), _slope(s, 0))}, RSS {_ratio(_slope(p, 2), _slope(s, 2))}"),
        ("triggerer CPU while holding every task (share of one core)", pp._share(s["cpu_hold"]),
         pp._share(p["cpu_hold"]), ""),
        ("**Job Complete -> task success, p50 / p95 / max**", lat(s, "lat"), lat(p, "lat"),
         f"p50 {_ratio(_p(p, 'lat', 50), _p(s, 'lat', 50))}, p95 {_ratio(_p(p, 'lat', 95), _p(s, 'lat', 95))}"),
        ("... Job Complete -> trigger fired", lat(s, "to_fire"), lat(p, "to_fire"), ""),
        ("... trigger fired -> task success (Airflow resumes the task on a worker)", lat(s, "to_success"),
         lat(p, "to_success"), ""),
        ("event loop blocked > 0.2 s: count, longest", pp._blk(s), pp._blk(p), ""),
        ("whole run, trigger to last task done", f"{s['wall']:.0f} s", f"{p['wall']:.0f} s", ""),
    ]
    table = "\n".join(f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows)
    found = ("" if p["succeeded"] < TASKS else " No provider task failed to find its pod after creating its Job "
             "(it lists pods 4 times without waiting; apache/airflow#70585) at this load.")
    errors = "".join(f"\n* {label}: {e}" for side, _, _, label in SIDES for e in out[side]["errors"])
    return f"""## End to end: {TASKS} deferred tasks under a real scheduler and triggerers, Skiff vs the provider

{_markdown(__doc__.split(chr(10) * 2, 1)[1]).replace("``TASKS``", str(TASKS)).replace("``JOB_SECONDS``", JOB_SECONDS).replace("``", "`")}

| measure | {SIDES[0][3]} | {SIDES[1][3]} | provider / Skiff |
| --- | --- | --- | --- |
{table}
{f"{chr(10)}Failed tasks, by their last error line:{errors}{chr(10)}" if errors else ""}
Both sides' Jobs: one pod of 100m CPU / 128 MiB running {JOB_SECONDS} s and writing 5 log lines, `retries=0`,
`backoffLimit: 0`. The provider's operator is used as a user would write it: its own arguments
(`wait_until_job_complete=True`, without which `deferrable=True` does not wait), default `job_poll_interval`
(10 s) and `get_logs`.{found} Skiff's informers are per triggerer process: its watches are 2 (Job, pod) per namespace
per triggerer holding triggers.
"""
