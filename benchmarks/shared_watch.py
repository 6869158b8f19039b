"""Benchmark: many deferred training tasks in one triggerer, with shared informers vs a watch pair per task.

``N`` Jobs in one namespace on an in-process kubesim (each one pod, ``JOB_SECONDS`` of real time, 3 log lines),
followed at once in one event loop the way the triggerer runs its triggers (``follow_job``, what
``TrainingJobTrigger.run`` awaits): first through one ``Informers`` (what the trigger uses), then, in the same
run, with two watches of each follower's own (what it did before). Measured from kubesim's own counters: watches
opened and open at the peak (log streams are not watches), all requests; notice delay from the Job's Complete
condition committed in kubesim to the follower returning (p50 / p95); the followers' thread CPU time.
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import threading
import time

N = int(os.environ.get("SKIFF_BENCH_SHARED_N", "100"))
JOB_SECONDS = float(os.environ.get("SKIFF_BENCH_SHARED_JOB_SECONDS", "20"))
NAMESPACE = "bench-shared"


def _manifests(prefix: str, n: int, seconds: float) -> list[dict]:
    from operators import TrainingJobOperator
    from operators.training.naming import TaskInstanceKey

    out = []
    for i in range(n):
        op = TrainingJobOperator(task_id=f"{prefix}{i}", namespace=NAMESPACE, image="bench:1", owner="bench",
                                 entry_path="train.py", cpu="50m", memory=0.1,
                                 pod_annotations={"kubesim.io/duration": str(seconds),
                                                  "kubesim.io/log-lines": "3"})
        out.append(op.build_manifest(TaskInstanceKey("bench", f"{prefix}{i}", "r1", 1)))
    return out


async def _follow_all(sim, names: list[str], shared: bool) -> dict[str, float]:
    from kubesim.testing import async_api_client
    from operators.k8s.informer import Informers
    from operators.training.follow import FollowSettings, follow_job

    informers = Informers(lambda: async_api_client(sim.url)) if shared else None
    noticed: dict[str, float] = {}

    async def one(api, name: str) -> None:
        result = await follow_job(api, NAMESPACE, name, FollowSettings(), lambda line: None, informers=informers)
        assert result["status"] == "success", result
        noticed[name] = time.monotonic()

    async with async_api_client(sim.url) as api:
        await asyncio.gather(*(one(api, n) for n in names))
    return noticed


def _scenario(sim, kube, prefix: str, shared: bool, completed: dict[str, float], n: int = N,
              seconds: float = JOB_SECONDS) -> dict:
    from operators.k8s.resource import JOBS

    names = [kube.create(JOBS, NAMESPACE, m)["metadata"]["name"] for m in _manifests(prefix, n, seconds)]
    sim.reset_stats()
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], sim.store.watch_count)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0 = resource.getrusage(resource.RUSAGE_THREAD)
    wall0 = time.monotonic()
    noticed = asyncio.run(_follow_all(sim, names, shared))
    wall = time.monotonic() - wall0
    cpu1 = resource.getrusage(resource.RUSAGE_THREAD)
    done.set()
    sampler.join()
    stats = sim.stats()["by_resource"]
    delays = sorted(noticed[n] - completed[n] for n in names)
    return {"watches": stats.get("watch jobs.batch", 0) + stats.get("watch pods", 0), "peak": peak[0],
            "requests": sum(stats.values()), "p50": statistics.median(delays),
            "p95": delays[max(int(len(delays) * 0.95) - 1, 0)], "wall": wall,
            "cpu": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)}


def run() -> str:
    from kubesim.server import KubeSim
    from operators.k8s.resource import PVCS, Resource
    from operators.k8s.rest import Kube

    sim = KubeSim().start()
    completed: dict[str, float] = {}

    def on_change(event_type, rt, obj, old) -> None:  # kubesim's store hook: when each Job became Complete
        name = obj["metadata"]["name"]
        if rt.kind == "Job" and name not in completed:
            if any(c.get("type") == "Complete" and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or []):
                completed[name] = time.monotonic()

    sim.store.subscribe(on_change)
    kube = Kube(sim.api_client())
    try:
        kube.create(Resource("v1", "namespaces"), None, {"metadata": {"name": NAMESPACE}})
        kube.create(PVCS, NAMESPACE, {"metadata": {"name": "bench-home"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        _scenario(sim, kube, "w", True, completed, n=2, seconds=0.5)  # warm-up: first imports and connections
        shared = _scenario(sim, kube, "s", True, completed)
        own = _scenario(sim, kube, "o", False, completed)
    finally:
        sim.stop()
    rows = []
    for label, r in (("shared informers (the trigger now)", shared), ("a Job and a pod watch per task (before)", own)):
        rows.append(f"| {label} | {r['watches']} | {r['peak']} | {r['requests']} | {r['p50']:.2f} s | "
                    f"{r['p95']:.2f} s | {r['cpu']:.2f} s | {r['wall']:.0f} s |")
    return "\n".join([
        f"## Shared watches: {N} deferred training tasks in one namespace, one triggerer\n",
        __doc__.split("\n\n", 1)[1].strip().replace("\n", " ").replace("``N``", str(N))
        .replace("``JOB_SECONDS``", f"{JOB_SECONDS:g} s").replace("``", "`") + "\n",
        "| followers | watches opened | watches open at the peak | requests | notice p50 | notice p95 | "
        "followers' CPU | wall |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
        f"Watches per namespace: {shared['watches']} shared vs {own['watches']} ({own['watches'] / max(shared['watches'], 1):.0f}x); "
        "each task still opens one log stream per pod while it runs. kubesim runs in the same process (its own "
        "thread): the CPU column is the followers' thread only, the delays include waiting for kubesim's thread.",
        "",
    ])


if __name__ == "__main__":
    print(run())
