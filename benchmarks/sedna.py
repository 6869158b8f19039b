"""Sedna reconcile at scale: 10 -> 100 -> 1,000 FederatedLearningJobs (4 children each: aggregation pod,
2 training pods, Service), plus JointInferenceServices, with kubesim in its OWN process (as devstack runs it),
so the wall time is the reconcile's plus the API server's and the CPU time (``time.process_time`` of this
process) is Skiff's own.

For each size, on a fresh kubesim: the first pass (creates every child) with bounded concurrent writes, a
pass with no drift (time, CPU, list requests per kind, writes: must be 0), and healing 100 deleted pods in
one pass. At the largest size the first pass runs again on another fresh kubesim with concurrency 1 (the
sequential writes of before), side by side. Sedna's own controller (a Go binary with informers) cannot run
here, so the comparison is with concurrency 1 and the issue's targets.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = tuple(int(s) for s in os.environ.get("SEDNA_BENCH_SIZES", "10,100,1000").split(","))
CONCURRENCY = int(os.environ.get("SEDNA_BENCH_CONCURRENCY", "16"))
HEAL = 100
N_JI = 200
# a real API server commits each write to etcd (a Raft round and an fsync: milliseconds); kubesim answers at
# once, so a sequential pass on it is bound by CPU, not by waiting. The side-by-side also runs with this much
# added to every write (kubesim's latency injection, an asyncio sleep that blocks nothing else)
WRITE_LATENCY = float(os.environ.get("SEDNA_BENCH_WRITE_LATENCY", "0.005"))
NS = "default"


def _sample(name: str) -> dict:
    import yaml

    return yaml.safe_load((REPO / "tests" / "support" / "sedna" / "samples" / name).read_text())


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def kubesim_process():
    """``python -m kubesim`` in its own process; yields (ApiClient, url, pid)."""
    from kubernetes import config

    from devstack.stack import _spawn, _wait_for_line, free_port

    work = Path(tempfile.mkdtemp(prefix="sedna-bench-"))
    log, kubeconfig = work / "kubesim.log", work / "kubeconfig"
    proc = _spawn([sys.executable, "-m", "kubesim", "--port", str(free_port()), "--kubeconfig", str(kubeconfig)],
                  log, {"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(REPO)})
    try:
        url = _wait_for_line(proc, log, r"kubesim ready (\S+)", 30).group(1)
        yield config.new_client_from_config(str(kubeconfig)), url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def _server_stats(url: str, reset: bool = False) -> dict:
    req = urllib.request.Request(f"{url}/kubesim/stats{'/reset' if reset else ''}", method="POST" if reset else "GET")
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read() or b"{}")


def _setup(api, n_fl: int, n_ji: int = 0) -> float:
    """CRDs, Models/Datasets and the CRs (created 8 at a time: set-up, not measured as the reconcile)."""
    from operators.sedna.install import install_crds
    from operators.sedna.kube import DATASETS, FL_JOBS, JI_SERVICES, MODELS, Kube

    kube = Kube(api)
    install_crds(kube)

    def mk(res, name, spec):
        kube.create(res, NS, {"apiVersion": "sedna.io/v1alpha1", "kind": "Model" if res is MODELS else "Dataset",
                              "metadata": {"name": name}, "spec": spec})

    mk(MODELS, "surface-defect-detection-model", {"url": "/models/sdd/model.ckpt", "format": "ckpt"})
    for d in ("edge1-surface-defect-detection-dataset", "edge2-surface-defect-detection-dataset"):
        mk(DATASETS, d, {"url": f"/data/{d}/train.txt", "format": "txt", "nodeName": "edge-node"})
    mk(MODELS, "helmet-detection-inference-little-model", {"url": "/data/little/little.pb", "format": "pb"})
    mk(MODELS, "helmet-detection-inference-big-model", {"url": "/data/big/big.pb", "format": "pb"})
    fl, ji = _sample("federatedlearningjob_v1alpha2.yaml"), _sample("jointinferenceservice_v1alpha1.yaml")
    bodies = []
    for i in range(n_fl):
        job = copy.deepcopy(fl)
        job["metadata"] = {"name": f"fl-{i:04d}", "namespace": NS}
        bodies.append((FL_JOBS, job))
    for i in range(n_ji):
        svc = copy.deepcopy(ji)
        svc["metadata"] = {"name": f"ji-{i:04d}", "namespace": NS}
        bodies.append((JI_SERVICES, svc))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda rb: kube.create(rb[0], NS, rb[1]), bodies))
    return time.perf_counter() - t0


def _timed(fn, *args, **kwargs):
    """(wall s, this process's CPU s, result)"""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, time.process_time() - c0, out


def _lists(summary: dict) -> str:
    lists = {k.split(" ", 1)[1]: v for k, v in summary["requests"].items() if k.startswith("list ")}
    return ", ".join(f"{k} {v}" for k, v in sorted(lists.items()))


def _fl_size(n: int) -> dict:
    from operators.sedna.kube import PODS, Kube
    from operators.sedna.reconcile import reconcile_federated_learning

    with kubesim_process() as (api, url, pid):
        t_create = _setup(api, n)
        server0 = process_cpu(pid)
        t_first, cpu_first, first = _timed(reconcile_federated_learning, Kube(api), concurrency=CONCURRENCY)
        server_first = process_cpu(pid) - server0
        assert not first["errors"], first["errors"][:3]
        nodrift = []
        for _ in range(3):
            _server_stats(url, reset=True)
            t, cpu, s = _timed(reconcile_federated_learning, Kube(api), concurrency=CONCURRENCY)
            nodrift.append((t, cpu, s, _server_stats(url)["by_resource"]))
        kube = Kube(api)
        pods = [p["metadata"]["name"] for p in kube.list(PODS, NS, "federatedlearningjob.sedna.io/name")]
        victims = pods[:: max(1, len(pods) // HEAL)][:HEAL]
        for name in victims:
            kube.delete(PODS, NS, name)
        t_heal, cpu_heal, heal = _timed(reconcile_federated_learning, Kube(api), concurrency=CONCURRENCY)
        back = {p["metadata"]["name"] for p in kube.list(PODS, NS, "federatedlearningjob.sedna.io/name")}
    _, _, s_nd, server = nodrift[-1]
    return {
        "n": n, "created": first.get("created", 0), "t_create": t_create, "t_first": t_first,
        "cpu_first": cpu_first, "server_first": server_first, "t_nd": statistics.median(t for t, *_ in nodrift),
        "cpu_nd": statistics.median(c for _, c, *_ in nodrift), "writes_nd": max(s["writes"] for _, _, s, _ in nodrift),
        "lists": _lists(s_nd), "max_server_lists": max(v for k, v in server.items() if k.startswith("list ")),
        "victims": len(victims), "healed": heal.get("created", 0), "t_heal": t_heal, "all_back": set(victims) <= back,
    }


def _fl_first_pass(n: int, concurrency: int, write_latency: float = 0.0) -> dict:
    """The first pass over ``n`` FL jobs on a fresh kubesim: wall, Skiff's CPU, kubesim's CPU."""
    from operators.k8s import Kube
    from operators.sedna.reconcile import reconcile_federated_learning

    with kubesim_process() as (api, url, pid):
        _setup(api, n)
        for verb in ("create", "update", "patch", "delete") if write_latency else ():
            req = urllib.request.Request(f"{url}/kubesim/latency", method="POST", data=json.dumps(
                {"verb": verb, "seconds": write_latency, "count": None}).encode())
            urllib.request.urlopen(req, timeout=30).close()
        server0 = process_cpu(pid)
        t, cpu, s = _timed(reconcile_federated_learning, Kube(api), concurrency=concurrency)
        assert not s["errors"], s["errors"][:3]
        return {"t": t, "cpu": cpu, "server": process_cpu(pid) - server0, "created": s.get("created", 0),
                "writes": s["writes"]}


def _ji() -> dict:
    from operators.k8s import Kube
    from operators.sedna.reconcile import reconcile_joint_inference

    with kubesim_process() as (api, url, _pid):
        _setup(api, 0, N_JI)
        t_first, cpu_first, first = _timed(reconcile_joint_inference, Kube(api), concurrency=CONCURRENCY)
        _server_stats(url, reset=True)
        t_nd, cpu_nd, nd = _timed(reconcile_joint_inference, Kube(api), concurrency=CONCURRENCY)
        lists = {k: v for k, v in _server_stats(url)["by_resource"].items() if k.startswith("list ")}
    return {"t_first": t_first, "created": first.get("created", 0), "t_nd": t_nd, "cpu_nd": cpu_nd,
            "writes_nd": nd["writes"], "lists": ", ".join(f"{k} {v}" for k, v in sorted(lists.items()))}


def run() -> str:
    sys.path.insert(0, str(REPO))  # kubesim and devstack run from the checkout
    rows = []
    for n in SIZES:
        rows.append(_fl_size(n))
        r = rows[-1]
        print(f"[bench] sedna: {n} FL jobs: first {r['t_first']:.2f} s (concurrency {CONCURRENCY}), "
              f"no-drift {r['t_nd']:.3f} s, heal {r['victims']} in {r['t_heal']:.2f} s", flush=True)
    n = rows[-1]["n"]
    side = {"seq": _fl_first_pass(n, 1)}
    if WRITE_LATENCY:
        side["seq_lat"] = _fl_first_pass(n, 1, WRITE_LATENCY)
        side["par_lat"] = _fl_first_pass(n, CONCURRENCY, WRITE_LATENCY)
    print(f"[bench] sedna: {n} FL jobs, first pass: " + ", ".join(f"{k} {v['t']:.2f} s" for k, v in side.items()),
          flush=True)
    ji = _ji()

    latencies = []
    if os.environ.get("SEDNA_BENCH_STANDALONE", "1") != "0":
        from benchmarks.sedna_standalone import standalone_latency

        latencies = standalone_latency()
        print(f"[bench] sedna: standalone latencies {[round(x, 2) for x in latencies]}", flush=True)
    return _report(rows, side, ji, latencies)


def _per_cr_ms(seconds: float, n: int) -> str:
    return f"{seconds / n * 1000:.2f}"


def _report(rows: list[dict], side: dict, ji: dict, latencies: list[float]) -> str:
    big, n = rows[-1], rows[-1]["n"]
    seq = side["seq"]
    speedup = seq["t"] / big["t_first"]
    # two processes on this machine's cores overlap at best down to the larger of their CPU totals
    bound = seq["t"] / max(big["cpu_first"], big["server_first"])
    checks = [
        (f"first pass at {n:,} CRs <= 10 s (concurrency {CONCURRENCY}, kubesim as it answers)",
         big["t_first"] <= 10.0, f"{big['t_first']:.2f} s"),
        ("... >= 4x faster than concurrency 1 in the same run (no added latency)", speedup >= 4.0,
         f"{speedup:.1f}x ({seq['t']:.2f} s with concurrency 1; at most {bound:.1f}x possible here, see above)"),
    ]
    if "seq_lat" in side:
        lat_speedup = side["seq_lat"]["t"] / side["par_lat"]["t"]
        checks += [(f"... the same with {WRITE_LATENCY * 1000:.0f} ms added to each write (kubesim's latency "
                    "injection, standing in for an etcd commit): >= 4x", lat_speedup >= 4.0,
                    f"{lat_speedup:.1f}x ({side['seq_lat']['t']:.2f} s -> {side['par_lat']['t']:.2f} s)"),
                   (f"... with {WRITE_LATENCY * 1000:.0f} ms added to each write: concurrency {CONCURRENCY} <= 10 s",
                    side["par_lat"]["t"] <= 10.0, f"{side['par_lat']['t']:.2f} s")]
    checks += [
        ("0 writes when nothing drifted", big["writes_nd"] == 0, f"{big['writes_nd']} writes"),
        ("<= 1 list request per kind (no drift)", big["max_server_lists"] <= 1,
         f"max {big['max_server_lists']} (kubesim's count)"),
        (f"heal {HEAL} deleted pods in one pass <= 3 s", big["t_heal"] <= 3.0 and big["all_back"],
         f"{big['t_heal']:.2f} s, {big['healed']} recreated, all back: {big['all_back']}"),
    ]
    lines = [
        "## Sedna reconcile (FederatedLearningJob / JointInferenceService)\n",
        "kubesim in its own process (`python -m kubesim`, as devstack runs it) with garbage collection on; the "
        "reconcile in this process with an `ApiClient` from the kubeconfig (what the DAG task does after "
        "`KubernetesHook`). Each FederatedLearningJob is the v1alpha2 sample (aggregation pod + 2 training pods "
        "+ Service = 4 children); every measurement on a fresh kubesim. *Skiff CPU* is `time.process_time()` of "
        "the reconcile's process; *kubesim CPU* is the API server process's (from /proc). The no-drift pass "
        "renders every child and compares it with the live one (hand edits are reverted), and writes nothing.\n",
        f"| CRs | children created | create CRs (s) | first pass (s), concurrency {CONCURRENCY} | Skiff CPU per CR, "
        "first (ms) | kubesim CPU per CR, first (ms) | no-drift pass (s, median of 3) | Skiff CPU per CR, no drift "
        "(ms) | writes (no drift) | list requests (no drift) | pods deleted | recreated | heal pass (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['n']:,} | {r['created']:,} | {r['t_create']:.2f} | {r['t_first']:.2f} | "
            f"{_per_cr_ms(r['cpu_first'], r['n'])} | {_per_cr_ms(r['server_first'], r['n'])} | {r['t_nd']:.3f} | "
            f"{_per_cr_ms(r['cpu_nd'], r['n'])} | {r['writes_nd']} | {r['lists']} | {r['victims']} | "
            f"{r['healed']} | {r['t_heal']:.2f} |")
    lines += [
        "",
        f"First pass at {n:,} FederatedLearningJobs ({seq['writes']:,} writes), side by side, each on a fresh "
        "kubesim:",
        "",
        "| API server | concurrency | wall (s) | Skiff CPU per CR (ms) | kubesim CPU per CR (ms) |",
        "|---|---:|---:|---:|---:|",
        f"| kubesim | {CONCURRENCY} | {big['t_first']:.2f} | {_per_cr_ms(big['cpu_first'], n)} | "
        f"{_per_cr_ms(big['server_first'], n)} |",
        f"| kubesim | 1 | {seq['t']:.2f} | {_per_cr_ms(seq['cpu'], n)} | {_per_cr_ms(seq['server'], n)} |",
    ]
    for key, conc in (("seq_lat", 1), ("par_lat", CONCURRENCY)):
        if key in side:
            r = side[key]
            lines.append(f"| kubesim + {WRITE_LATENCY * 1000:.0f} ms per write | {conc} | {r['t']:.2f} | "
                         f"{_per_cr_ms(r['cpu'], n)} | {_per_cr_ms(r['server'], n)} |")
    lines += [
        "",
        "Concurrency overlaps waiting; it does not remove work. kubesim answers a write as soon as its CPU "
        "work is done (one Python process that decodes, validates, stores and notifies its controllers), so a "
        "sequential pass on it hardly waits: its wall time is about Skiff's CPU plus kubesim's CPU. Overlapping "
        f"the two processes on this machine's {os.cpu_count()} cores can at best bring the pass down to the "
        f"larger of the two: {_per_cr_ms(big['cpu_first'], n)} ms (Skiff) and "
        f"{_per_cr_ms(big['server_first'], n)} ms (kubesim) per CR at concurrency {CONCURRENCY}, i.e. at most "
        f"{bound:.1f}x faster than the {seq['t']:.2f} s of concurrency 1, whatever the concurrency. The >= 4x of "
        "issue 11 needs writes that wait, as on a real API server, where every write is an etcd commit (a Raft "
        f"round and an fsync: milliseconds): the rows with {WRITE_LATENCY * 1000:.0f} ms added to each write "
        "(kubesim's latency injection, an asyncio sleep that blocks nothing else) show what the bounded pool "
        "hides there. Those are the only runs where the 4x can be met; the no-added-latency rows are reported "
        "beside them as they are.",
        "",
        f"JointInferenceService: {N_JI} services -> first pass {ji['t_first']:.2f} s ({ji['created']} children), "
        f"no-drift pass {ji['t_nd']:.3f} s ({_per_cr_ms(ji['cpu_nd'], N_JI)} ms Skiff CPU per CR) with "
        f"{ji['writes_nd']} writes, lists: {ji['lists']}.",
        "",
        "| target | met | measured |",
        "|---|---|---|",
    ]
    if latencies:
        q = statistics.quantiles(latencies, n=20, method="inclusive")
        p50, p95 = statistics.median(latencies), q[18]
        checks += [("under airflow standalone, pod deleted -> recreated p50 <= 3 s", p50 <= 3.0, f"{p50:.2f} s"),
                   ("... p95 <= 8 s", p95 <= 8.0, f"{p95:.2f} s (n={len(latencies)}, max {max(latencies):.2f} s)")]
    lines += [f"| {what} | {'yes' if ok else '**NO**'} | {measured} |" for what, ok, measured in checks]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
