"""Benchmark: N deferred training tasks waiting at once in one triggerer, at 100 and 1,000 — Skiff's
``TrainingJobTrigger`` (shared informers), the same follower with a Job and a pod watch of its own per task
(what the trigger did before), and the provider's ``KubernetesJobTrigger`` (what
``KubernetesJobOperator(deferrable=True)`` defers to), side by side.

Each row on a fresh ``python -m kubesim`` in its own process: N Jobs in ``N_NS`` namespaces (Skiff's training Job
manifest for every row: one pod running ``JOB_SECONDS`` of real time, 3 log lines), created 20 at a time; then a
follower process, the triggerer, starts the N triggers' ``run()`` in one event loop, as Airflow's triggerer runs
them (its ``TriggerRunner`` needs a whole deployment's database and supervisor). Measured:

* watches open on kubesim (peak; log streams are not watches) and watch requests made;
* start-up: from the triggers' start until each had made its first requests (lists, watches and log streams;
  the provider's: a first poll), as kubesim counted them;
* requests per minute while waiting: kubesim's request counter over the last ``WINDOW`` s before the first Job
  completed, and after the start-up;
* triggerer RSS: the follower's peak (``ru_maxrss``), and after its imports, before any trigger ran;
* Job Complete -> trigger fired: from kubesim committing the Job's Complete condition (a store hook in the
  kubesim process) to the trigger yielding its event (``CLOCK_MONOTONIC`` in both processes), p50/p95/max;
* CPU seconds of the follower and of kubesim from the triggers' start to the last event.

The triggers' log lines go to the follower's stdout (a file), as the triggerer writes them to the task logs.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = tuple(int(s) for s in os.environ.get("SKIFF_BENCH_SHARED_SIZES", "100,1000").split(","))
VARIANTS = tuple(os.environ.get("SKIFF_BENCH_SHARED_VARIANTS", "shared,own,provider").split(","))
JOB_SECONDS = float(os.environ.get("SKIFF_BENCH_SHARED_JOB_SECONDS", "120"))
N_NS = 10
N_NODES = 12  # 110 pods each
WINDOW = 30.0  # "while waiting": the last WINDOW s before the first Job completed (the triggers' start-up is over)
POLL = 10.0  # KubernetesJobOperator's job_poll_interval default, passed to its trigger
CREATE_CONCURRENCY = 20
LABELS = {
    "shared": "Skiff `TrainingJobTrigger` (shared informers)",
    "own": "Skiff follower, a Job and a pod watch per task (before)",
    "provider": "provider `KubernetesJobTrigger` (poll every 10 s)",
}
TICK_HZ = os.sysconf("SC_CLK_TCK")


def _ns(i: int) -> str:
    return f"team-{i % N_NS}"


def _manifests(n: int) -> list[tuple[str, dict]]:
    from operators import TrainingJobOperator
    from operators.training.naming import TaskInstanceKey

    out = []
    for i in range(n):
        op = TrainingJobOperator(task_id=f"t{i}", namespace=_ns(i), image="bench:1", owner="bench",
                                 entry_path="train.py", cpu="50m", memory=0.1,
                                 pod_annotations={"kubesim.io/duration": str(JOB_SECONDS),
                                                  "kubesim.io/log-lines": "3"})
        out.append((_ns(i), op.build_manifest(TaskInstanceKey("bench", f"t{i}", "r1", 1))))
    return out


def _proc(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of process ``pid``, from /proc."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return rss, (int(fields[11]) + int(fields[12])) / TICK_HZ


# ---- the triggerer: every trigger's run() in one event loop -------------------------------------------------

def _triggers(variant: str):
    """``make(ns, name)``: a trigger-like object with an async-generator ``run()`` yielding one event, as the
    triggerer drives it (the variant's modules imported now, before the baseline RSS is read)."""
    from airflow.triggers.base import TriggerEvent

    if variant == "shared":
        from operators.training.trigger import TrainingJobTrigger

        return lambda ns, name: TrainingJobTrigger(namespace=ns, name=name)
    if variant == "provider":
        from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger

        # what KubernetesJobOperator(deferrable=True) defers with (its defaults); config_file is ignored by the
        # trigger's hook (a known provider bug), so the kubeconfig comes from the kubernetes_default connection
        return lambda ns, name: KubernetesJobTrigger(
            job_name=name, job_namespace=ns, pod_names=[], pod_namespace=ns, base_container_name="base",
            kubernetes_conn_id="kubernetes_default", poll_interval=POLL, get_logs=True, do_xcom_push=False)

    from operators.k8s.connection import async_api_client
    from operators.training.follow import FollowSettings, follow_job

    class OwnWatches:
        """``TrainingJobTrigger.run`` as it was before the shared informers: ``follow_job``, watches of its own."""

        def __init__(self, ns: str, name: str) -> None:
            self.ns, self.name = ns, name

        async def run(self):
            async with async_api_client(None) as api:
                result = await follow_job(api, self.ns, self.name, FollowSettings(), lambda line: None)
            yield TriggerEvent(result)

    return OwnWatches


def _follow(spec_path: str, out_path: str) -> int:
    """The follower process: run every trigger of the spec in one loop; write when each fired."""
    spec = json.loads(Path(spec_path).read_text())
    os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
        {"conn_type": "kubernetes", "extra": {"kube_config_path": spec["kubeconfig"]}})
    make = _triggers(spec["variant"])
    triggers = [(f"{ns}/{name}", make(ns, name)) for ns, name in spec["jobs"]]
    rss_base = _proc(os.getpid())[0]
    fired: dict[str, tuple[float, str]] = {}

    async def one(key: str, trigger) -> None:
        async for event in trigger.run():
            fired[key] = (time.monotonic(), event.payload.get("status"))
            return

    async def main() -> None:
        tasks = [asyncio.create_task(one(k, t)) for k, t in triggers]
        print(f"following {time.monotonic()}", flush=True)
        results = await asyncio.gather(*tasks, return_exceptions=True)
        errors = [repr(r) for r in results if isinstance(r, BaseException)]
        if errors:
            print(f"{len(errors)} triggers failed, e.g. {errors[:3]}", flush=True)

    cpu0 = time.process_time()
    asyncio.run(main())
    Path(out_path).write_text(json.dumps({
        "fired": fired, "rss_base": rss_base, "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "cpu": time.process_time() - cpu0}))
    return 0


# ---- kubesim with a probe: when each Job became Complete -----------------------------------------------------

def _serve_kubesim(out: str, argv: list[str]) -> int:
    """``python -m kubesim ARGV`` plus a store hook (Job writes only) appending "ns/name monotonic" to ``out``
    when a Job's Complete condition is committed."""
    from kubesim import __main__ as kmain
    from kubesim.server import KubeSim

    sink = open(out, "a", buffering=1)  # noqa: SIM115 - open for the life of the process

    def complete(obj: dict | None) -> bool:
        return any(c.get("type") == "Complete" and c.get("status") == "True"
                   for c in ((obj or {}).get("status") or {}).get("conditions") or [])

    def on_job(event_type: str, rt, obj: dict, old: dict | None) -> None:
        if event_type != "DELETED" and complete(obj) and not complete(old):
            sink.write(f"{obj['metadata']['namespace']}/{obj['metadata']['name']} {time.monotonic()}\n")

    plain = KubeSim.start

    def start(self):
        plain(self)
        self.store.subscribe(on_job, kinds={("batch", "jobs")})
        return self

    KubeSim.start = start
    return kmain.main(argv)


# ---- one row ------------------------------------------------------------------------------------------------

async def _create(session, url: str, manifests: list[tuple[str, dict]]) -> list[tuple[str, str]]:
    from benchmarks.kubesim_proc import bounded

    for i in range(N_NS):
        async with session.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": _ns(i)}}) as r:
            assert r.status == 201, await r.text()
        async with session.post(f"{url}/api/v1/namespaces/{_ns(i)}/persistentvolumeclaims", json={
                "metadata": {"name": "bench-home"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}) as r:
            assert r.status == 201, await r.text()

    async def create(ns: str, manifest: dict) -> tuple[str, str]:
        async with session.post(f"{url}/apis/batch/v1/namespaces/{ns}/jobs", json=manifest) as r:
            assert r.status == 201, (r.status, await r.text())
            return ns, (await r.json())["metadata"]["name"]
    return await bounded([create(ns, m) for ns, m in manifests], CREATE_CONCURRENCY)


def _startup(stats: dict) -> int:
    """Requests a trigger makes once, when it starts: lists, watch opens, log streams (Skiff's), polls of the
    Job (the provider's: its first poll is one of them)."""
    by = stats["by_resource"]
    return (sum(v for k, v in by.items() if k.startswith(("list ", "watch "))) + by.get("get pods/log", 0)
            + by.get("get jobs.batch/status", 0))


async def _row(n: int, variant: str, manifests: list[tuple[str, dict]]) -> dict:
    import aiohttp

    from devstack.stack import _spawn, _wait_for_line, free_port

    work = Path(tempfile.mkdtemp(prefix="shared-watch-"))
    completions, kubeconfig, nodes = work / "complete.txt", work / "kubeconfig", work / "nodes.yaml"
    # room for every pod at once (kubesim's default nodes hold 220 pods)
    nodes.write_text(json.dumps([{"name": f"node-{i}", "cpu": 64, "memory": "256Gi"} for i in range(N_NODES)]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    me = [sys.executable, "-m", "benchmarks.shared_watch"]
    sim = _spawn([*me, "--serve-kubesim", str(completions), "--port", str(free_port()), "--kubeconfig",
                  str(kubeconfig), "--nodes", str(nodes)], work / "kubesim.log", env)
    follower = None
    try:
        url = _wait_for_line(sim, work / "kubesim.log", r"kubesim ready (\S+)", 60).group(1)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            t0 = time.monotonic()
            jobs = await _create(session, url, manifests[:n])
            t_create = time.monotonic() - t0
            spec = work / "spec.json"
            spec.write_text(json.dumps({"variant": variant, "kubeconfig": str(kubeconfig), "jobs": jobs}))
            follower = _spawn([*me, "--follow", str(spec), str(work / "out.json")], work / "follower.log", env)
            started = float(_wait_for_line(follower, work / "follower.log", r"following (\S+)", 120).group(1))
            sim_cpu0 = _proc(sim.pid)[1]
            samples = []  # (monotonic, requests so far, watches open, start-up requests so far)
            deadline = time.monotonic() + JOB_SECONDS * 3 + 120
            while follower.poll() is None and time.monotonic() < deadline:
                async with session.get(f"{url}/kubesim/stats") as r:
                    stats = await r.json()
                samples.append((time.monotonic(), stats["total"], stats["watches_open"], _startup(stats)))
                await asyncio.sleep(1.0)
            if follower.poll() is None:
                raise TimeoutError(f"{variant} at {n}: the triggers had not all fired after {deadline - t0:.0f} s")
            sim_cpu, sim_rss = _proc(sim.pid)[1] - sim_cpu0, _proc(sim.pid)[0]
            async with session.get(f"{url}/kubesim/stats") as r:
                stats = await r.json()
    finally:
        for p in (follower, sim):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=60)
    out = json.loads((work / "out.json").read_text())
    done = {}
    for line in completions.read_text().splitlines():
        key, at = line.split()
        done.setdefault(key, float(at))
    keys = [f"{ns}/{name}" for ns, name in jobs]
    bad = [k for k in keys if k not in out["fired"] or out["fired"][k][1] != "success" or k not in done]
    assert not bad, f"{variant} at {n}: {len(bad)} tasks did not fire success after a Complete, e.g. {bad[:3]}"
    delays = sorted(out["fired"][k][0] - done[k] for k in keys)
    w1 = min(done.values())
    before = [s for s in samples if s[0] <= w1]
    # the start-up is over once every trigger has made its first requests: lists, watches and log streams
    # (Skiff), a first poll each (the provider), as counted before the first Job completed
    target = max((s[3] for s in before), default=0) if variant != "provider" else n
    settled = next((s[0] for s in before if s[3] >= target), w1)
    w0 = max(w1 - WINDOW, settled)
    window = [s for s in samples if w0 <= s[0] <= w1]
    rpm = ((window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0]) * 60
           if len(window) >= 2 and window[-1][0] - window[0][0] >= 10 else None)
    by_verb, by_res = stats["by_verb"], stats["by_resource"]
    return {"n": n, "variant": variant, "t_create": t_create, "startup": settled - started, "watches_peak": max(s[2] for s in samples),
            "watch_requests": by_verb.get("watch", 0), "log_streams": by_res.get("get pods/log", 0),
            "requests": stats["total"], "rpm": rpm, "window": (window[-1][0] - window[0][0]) if window else 0,
            "rss_base": out["rss_base"], "rss_peak": out["rss_peak"], "cpu": out["cpu"], "sim_cpu": sim_cpu,
            "sim_rss": sim_rss, "p50": statistics.median(delays), "p95": delays[max(int(len(delays) * 0.95) - 1, 0)],
            "max": delays[-1], "min": delays[0]}


# ---- the section ----------------------------------------------------------------------------------------------

def run() -> str:
    sys.path.insert(0, str(REPO))
    manifests = _manifests(max(SIZES))
    rows = []
    for n in SIZES:
        for variant in VARIANTS:
            rows.append(asyncio.run(_row(n, variant, manifests)))
            r = rows[-1]
            print(f"[bench] shared_watch: {n} {variant}: created in {r['t_create']:.1f} s, start-up {r['startup']:.0f} s, watches {r['watches_peak']}, rpm {r['rpm']}, "
                  f"RSS {r['rss_peak']:.0f} MiB, p50/p95 {r['p50']:.2f}/{r['p95']:.2f} s", flush=True)
    return _report(rows)


def _markdown(text: str) -> str:
    """Docstring paragraphs and ``*`` items as Markdown: each paragraph and item on one line."""
    out = []
    for para in text.strip().split("\n\n"):
        items = [" ".join(item.split()) for item in ("\n" + para).split("\n* ")]
        out.append("\n".join([items[0], *(f"* {i}" for i in items[1:])]).strip())
    return "\n\n".join(out)


def _report(rows: list[dict]) -> str:
    def rpm(r):
        return "?" if r["rpm"] is None else f"{r['rpm']:,.0f}"

    table = [f"| {r['n']:,} | {LABELS[r['variant']]} | {r['watches_peak']:,} | {r['watch_requests']:,} | "
             f"{r['startup']:.0f} s | {rpm(r)} ({r['window']:.0f} s) | {r['requests']:,} | {r['rss_peak']:.0f} MiB ({r['rss_base']:.0f}) | "
             f"{r['p50']:.2f} / {r['p95']:.2f} / {r['max']:.2f} s | {r['cpu']:.1f} s | {r['sim_cpu']:.1f} s "
             f"({r['sim_rss']:.0f} MiB) |"
             for r in rows]
    lines = [
        f"## Shared watches: {' and '.join(f'{n:,}' for n in SIZES)} deferred training tasks in one triggerer\n",
        _markdown(__doc__.split("\n\n", 1)[1]).replace("``N_NS``", str(N_NS))
        .replace("``JOB_SECONDS``", f"{JOB_SECONDS:g} s").replace("``WINDOW``", f"{WINDOW:g}").replace("``", "`")
        + "\n",
        "| tasks | triggers | watches open (peak) | watch requests | start-up | requests / min while waiting "
        "(window) | requests in "
        "all | triggerer RSS, peak (after imports) | Complete -> fired p50 / p95 / max | triggerer CPU | "
        "kubesim CPU (RSS at the end) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *table,
        "",
    ]
    goals = []
    for r in rows:
        if r["variant"] == "shared" and r["n"] == max(SIZES):
            goals = [
                (f"watches O(namespaces), not O(tasks) ({N_NS} namespaces)", r["watches_peak"] <= 2 * N_NS,
                 f"{r['watches_peak']} open at the peak"),
                (f"Complete -> fired p95 <= 2 s at {r['n']:,}", r["p95"] <= 2.0, f"{r['p95']:.2f} s"),
                (f"triggerer RSS <= 1 GiB at {r['n']:,}", r["rss_peak"] <= 1024, f"{r['rss_peak']:.0f} MiB"),
            ]
    if goals:
        lines += ["| goal (issue 11) | met | measured |", "| --- | --- | --- |",
                  *(f"| {g} | {'yes' if ok else 'no'} | {m} |" for g, ok, m in goals), ""]
    lines += [
        *[f"The provider's triggers would make {6 * r['n']:,} requests a minute at their 10 s interval; at "
          f"{r['n']:,} they made {rpm(r)}: every poll builds a new API client (an SSL context and a connection "
          f"pool), which took the triggerer {r['cpu']:.0f} CPU s, so the polls fell behind their interval.\n"
          for r in rows if r["variant"] == "provider" and r["rpm"] is not None and r["rpm"] < 6 * r["n"] * 0.8],
        "Every row's Jobs are the same (Skiff's manifest) so that only the waiting differs. A Skiff trigger "
        "shares its namespace's Job and pod watches, streams its pod's log while it runs (one request each, "
        "open until the container ends) and makes no other request while waiting; the provider's trigger reads "
        "the Job every 10 s through a new API client (connection) each time and reads no log until the task "
        "resumes on a worker. Its delay is where the Job's end falls between two polls: [0, 10) s. What the "
        "triggerer does after the event (the task resuming on a worker) is not included.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--follow"]:
        sys.exit(_follow(sys.argv[2], sys.argv[3]))
    if sys.argv[1:2] == ["--serve-kubesim"]:
        sys.exit(_serve_kubesim(sys.argv[2], sys.argv[3:]))
    print(run())
