"""kubesim at scale (issue 11): `python -m kubesim` in its own process holds 1,000 short Jobs with their pods
in 10 namespaces while 2,000 watches are open — what a triggerer following 1,000 training tasks the naive way
(one Job watch and one pod watch per task) puts on an API server.

The 2,000 watches (raw aiohttp streams in this process, namespace-scoped): 1,000 Job watches selected by name
(`fieldSelector=metadata.name=<job>`), 900 pod watches selected by label (`labelSelector=job-name=<job>`), and
10 label-selected Job watches per namespace (`labelSelector=bench=scale`, 100 in all, each sees every Job of
its namespace). Measured: kubesim's RSS and CPU seconds per phase, watch fan-out latency (a PATCH of a Job →
each of the 11 watches that select it has the MODIFIED event: p50/p95 over all pairs, one update at a time
and 200 concurrent), list latency with the watches open, and the time until every Job is Complete.

`python -m benchmarks.kubesim_scale --profile OUT.prof` runs the same load with kubesim's loop thread under
cProfile and prints the functions that cost most.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

import aiohttp

from benchmarks.kubesim_proc import KUBESIM, bounded, kubesim_process

N_NS = 10
N_JOBS = 1000
N_POD_WATCHES = 900
WIDE_PER_NS = 10          # label-selected Job watches per namespace
SEQUENTIAL_UPDATES = 100
BURST_UPDATES = 200
CONCURRENCY = 20
TICK = "bench.skiff.io/tick"
TICK_HZ = os.sysconf("SC_CLK_TCK")


def _ns(i: int) -> str:
    return f"scale-{i % N_NS}"


def _job_name(i: int) -> str:
    return f"job-{i:04d}"


def _job(i: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": _job_name(i), "labels": {"bench": "scale"}},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": {"bench": "scale"}, "annotations": {"kubesim.io/duration": "1"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}


class Proc:
    """RSS and CPU seconds of the kubesim process, from /proc."""

    def __init__(self, pid: int):
        self.pid = pid

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK_HZ


class Watches:
    """The open watch streams; `arrivals[(ns, job, tick)]` lists when each selecting watch saw that tick."""

    def __init__(self, session: aiohttp.ClientSession, url: str):
        self.session, self.url = session, url
        self.arrivals: dict[tuple, list[float]] = {}
        self.tasks: list[asyncio.Task] = []
        self.events = 0

    def open(self, path: str, **params) -> None:
        self.tasks.append(asyncio.create_task(self._stream(path, {"watch": "1", **params})))

    async def _stream(self, path: str, params: dict) -> None:
        async with self.session.get(self.url + path, params=params, timeout=aiohttp.ClientTimeout(None)) as r:
            assert r.status == 200, r.status
            buf = b""
            async for chunk in r.content.iter_any():
                now = time.perf_counter()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    self._seen(line, now)

    def _seen(self, line: bytes, now: float) -> None:
        self.events += 1
        if b'"MODIFIED"' not in line or TICK.encode() not in line:
            return
        md = json.loads(line)["object"]["metadata"]
        key = (md["namespace"], md["name"], md["annotations"][TICK])
        self.arrivals.setdefault(key, []).append(now)

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _stats(session, url) -> dict:
    async with session.get(f"{url}/kubesim/stats") as r:
        return await r.json()


async def _open_watches(session, url, w: Watches) -> float:
    t0 = time.perf_counter()
    for i in range(N_JOBS):
        base = f"/apis/batch/v1/namespaces/{_ns(i)}/jobs"
        w.open(base, fieldSelector=f"metadata.name={_job_name(i)}")
        if i < N_POD_WATCHES:
            w.open(f"/api/v1/namespaces/{_ns(i)}/pods", labelSelector=f"job-name={_job_name(i)}")
    for n in range(N_NS):
        for _ in range(WIDE_PER_NS):
            w.open(f"/apis/batch/v1/namespaces/scale-{n}/jobs", labelSelector="bench=scale")
    want = N_JOBS + N_POD_WATCHES + N_NS * WIDE_PER_NS
    while (await _stats(session, url))["watches_open"] < want:
        await asyncio.sleep(0.1)
    return time.perf_counter() - t0


async def _create_jobs(session, url) -> float:
    async def create(i):
        async with session.post(f"{url}/apis/batch/v1/namespaces/{_ns(i)}/jobs", json=_job(i)) as r:
            assert r.status == 201, (r.status, await r.text())
    t0 = time.perf_counter()
    await bounded([create(i) for i in range(N_JOBS)], CONCURRENCY)
    return time.perf_counter() - t0


async def _all_complete(session, url, timeout: float = 600) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        async with session.get(f"{url}/apis/batch/v1/jobs", params={"labelSelector": "bench=scale"}) as r:
            items = (await r.json())["items"]
        done = sum(1 for j in items if any(c["type"] == "Complete" and c["status"] == "True"
                                           for c in (j.get("status") or {}).get("conditions") or []))
        if done == N_JOBS:
            return time.perf_counter() - t0
        await asyncio.sleep(0.5)
    raise TimeoutError(f"only {done} of {N_JOBS} Jobs Complete after {timeout} s")


async def _update(session, url, w: Watches, i: int, tick: str, latencies: list[float]) -> None:
    """PATCH Job i with a new tick; wait until every watch selecting it has the event; record latencies."""
    key, want = (_ns(i), _job_name(i), tick), 1 + WIDE_PER_NS
    t0 = time.perf_counter()
    async with session.patch(f"{url}/apis/batch/v1/namespaces/{_ns(i)}/jobs/{_job_name(i)}",
                             data=json.dumps({"metadata": {"annotations": {TICK: tick}}}),
                             headers={"Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 200, (r.status, await r.text())
    deadline = t0 + 60
    while len(w.arrivals.get(key, ())) < want:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{key}: {len(w.arrivals.get(key, ()))} of {want} watches notified in 60 s")
        await asyncio.sleep(0.002)
    latencies.extend((t - t0) * 1000 for t in w.arrivals[key])


async def _list_ms(session, url, path: str, params: dict, expect: int, runs: int = 20) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        async with session.get(url + path, params=params) as r:
            body = await r.json()
        out.append((time.perf_counter() - t0) * 1000)
        assert len(body["items"]) == expect, len(body["items"])
    return out


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


async def _scenario(url: str, proc: Proc) -> dict:
    f: dict = {"rss_start": proc.rss_mib()}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for n in range(N_NS):
            async with session.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": f"scale-{n}"}}) as r:
                assert r.status == 201, await r.text()
        w = Watches(session, url)
        cpu = proc.cpu_s()
        f["open_s"] = await _open_watches(session, url, w)
        f["watches"] = (await _stats(session, url))["watches_open"]
        f["rss_watches"], f["cpu_open"] = proc.rss_mib(), proc.cpu_s() - cpu
        cpu = proc.cpu_s()
        f["create_s"] = await _create_jobs(session, url)
        f["complete_s"] = f["create_s"] + await _all_complete(session, url)
        f["cpu_jobs"], f["rss_jobs"] = proc.cpu_s() - cpu, proc.rss_mib()
        cpu = proc.cpu_s()
        await asyncio.sleep(5)
        f["idle_cpu_pct"] = (proc.cpu_s() - cpu) / 5 * 100
        seq: list[float] = []
        cpu = proc.cpu_s()
        for k in range(SEQUENTIAL_UPDATES):
            await _update(session, url, w, (k * 7) % N_JOBS, f"s{k}", seq)
        f["cpu_per_update_ms"] = (proc.cpu_s() - cpu) / SEQUENTIAL_UPDATES * 1000
        burst: list[float] = []
        t0 = time.perf_counter()
        await asyncio.gather(*(_update(session, url, w, (k * 13) % N_JOBS, f"b{k}", burst)
                               for k in range(BURST_UPDATES)))
        f["burst_s"] = time.perf_counter() - t0
        f["seq"], f["burst"] = seq, burst
        f["list_ns"] = await _list_ms(session, url, "/apis/batch/v1/namespaces/scale-0/jobs", {}, N_JOBS // N_NS)
        f["list_pods"] = await _list_ms(session, url, "/api/v1/pods", {"labelSelector": "bench=scale"}, N_JOBS)
        f["rss_end"], f["events"] = proc.rss_mib(), w.events
        await w.close()
    return f


def measure(profile: str | None = None) -> dict:
    command = (sys.executable, "-m", "benchmarks.kubesim_scale", "--serve-profiled", profile) if profile else KUBESIM
    with kubesim_process(command=command, ready_s=60) as sim:
        return asyncio.run(_scenario(sim.url, Proc(sim.proc.pid)))


def report(f: dict) -> str:
    seq, burst = f["seq"], f["burst"]
    ms = lambda v: f"{statistics.median(v):.1f} ms / {_pct(v, 0.95):.1f} ms"  # noqa: E731
    return f"""## kubesim at scale

`python -m kubesim` in its own process; {N_JOBS} short Jobs (1 s pods) in {N_NS} namespaces; {f['watches']:,} watches
open from one aiohttp client process ({N_JOBS} Job watches by name, {N_POD_WATCHES} pod watches by label,
{N_NS * WIDE_PER_NS} label-selected namespace-wide Job watches). Goal (issue 11): holds 1,000 Jobs with pods and
2,000+ open watches.

| measure | result |
| --- | --- |
| kubesim RSS: started / {f['watches']:,} watches open / 1,000 Jobs done / end | {f['rss_start']:.0f} / {f['rss_watches']:.0f} / {f['rss_jobs']:.0f} / {f['rss_end']:.0f} MiB |
| open {f['watches']:,} watches (kubesim CPU) | {f['open_s']:.1f} s ({f['cpu_open']:.1f} CPU s) |
| create {N_JOBS} Jobs ({CONCURRENCY} concurrent) / all Complete | {f['create_s']:.1f} s / {f['complete_s']:.1f} s |
| kubesim CPU for the 1,000 Jobs, their pods and every watch event | {f['cpu_jobs']:.1f} CPU s |
| kubesim CPU while idle with the watches open | {f['idle_cpu_pct']:.1f} % |
| fan-out, one update at a time: PATCH → each of its 11 watches notified, p50 / p95 | {ms(seq)} |
| kubesim CPU per update (PATCH, fan-out, the controllers' reaction) | {f['cpu_per_update_ms']:.1f} ms |
| fan-out, {BURST_UPDATES} concurrent updates, p50 / p95 (all done in) | {ms(burst)} ({f['burst_s']:.1f} s) |
| list 100 Jobs of one namespace, p50 / p95 | {ms(f['list_ns'])} |
| list 1,000 pods across namespaces by label, p50 / p95 | {ms(f['list_pods'])} |
| watch events delivered to the client | {f['events']:,} |

The concurrent updates open {BURST_UPDATES} new connections at once. The lists' p95 are one or two slow runs of
twenty (not investigated; Python's full garbage collection of kubesim's heap is a candidate).
"""


def run() -> str:
    return report(measure())


def _serve_profiled(out: str, argv: list[str]) -> int:
    """`python -m kubesim` with the loop thread (HTTP + controllers) under cProfile; stats to `out` at exit."""
    import cProfile

    from kubesim import __main__ as kmain
    from kubesim.server import KubeSim

    prof, plain = cProfile.Profile(), KubeSim._run

    def profiled(self):
        prof.enable()
        try:
            plain(self)
        finally:
            prof.disable()
            prof.dump_stats(out)
    KubeSim._run = profiled
    return kmain.main(argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-profiled"]:
        sys.exit(_serve_profiled(sys.argv[2], sys.argv[3:]))
    if sys.argv[1:2] == ["--profile"]:
        import pstats
        out = str(Path(sys.argv[2]).resolve())
        print(report(measure(out)))
        pstats.Stats(out).sort_stats("tottime").print_stats(25)
    else:
        print(run())
