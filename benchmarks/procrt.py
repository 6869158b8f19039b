"""kubesim's process nodes (kubesim/kubelet/procrt) side by side with its scripted nodes, in one kubesim process:
pod create -> Running (p50/p95, target p95 <= 500 ms), a 1-second Job create -> Complete (target <= 2.5 s),
20 CPU-bound training pods at once on this machine's cores, and the memory an idle pod costs."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.kubesim_proc import kubesim_process

N_PODS = 20
N_JOBS = 5
N_IDLE = 10
TRAIN = ("import numpy as np\nrng = np.random.default_rng(0)\nx = rng.normal(size=(200, 200))\n"
         "for i in range(400):\n    x = np.tanh(x @ x.T / 200)\nprint('done', float(x.sum()))")


def _client(kubeconfig: Path):
    from kubernetes import client, config
    return client.CoreV1Api(config.new_client_from_config(str(kubeconfig))), \
        client.BatchV1Api(config.new_client_from_config(str(kubeconfig)))


def _pod(name: str, node: str, command: list[str], annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "main", "image": "bench/venv", "command": command}]}}


def _until(predicate, timeout: float = 120.0, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("benchmark condition not met")


def _phase(core, name: str) -> str | None:
    return core.read_namespaced_pod(name, "default").status.phase


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def _start_latency(core, node: str, tag: str) -> list[float]:
    out = []
    for i in range(N_PODS):
        name = f"{tag}-start-{i}"
        t0 = time.perf_counter()
        core.create_namespaced_pod("default", _pod(name, node, ["sleep", "30"], None if tag == "proc" else {
            "kubesim.io/duration": "30"}))
        _until(lambda n=name: _phase(core, n) == "Running")
        out.append(time.perf_counter() - t0)
        core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    return out


def _job_seconds(core, batch, node: str, tag: str) -> list[float]:
    out = []
    for i in range(N_JOBS):
        name = f"{tag}-job-{i}"
        tpl = _pod(name, node, ["sleep", "1"], None if tag == "proc" else {"kubesim.io/duration": "1"})
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
               "spec": {"backoffLimit": 0, "template": {"metadata": tpl["metadata"] | {"name": None},
                                                        "spec": tpl["spec"]}}}
        job["spec"]["template"]["metadata"].pop("name")
        t0 = time.perf_counter()
        batch.create_namespaced_job("default", job)
        _until(lambda n=name: (batch.read_namespaced_job_status(n, "default").status.succeeded or 0) >= 1)
        out.append(time.perf_counter() - t0)
    return out


def _burst(core, node: str, tag: str) -> tuple[float, float]:
    """20 training pods created at once: seconds until all Succeeded, and the slowest pod's own run."""
    t0 = time.perf_counter()
    for i in range(N_PODS):
        core.create_namespaced_pod("default", _pod(f"{tag}-train-{i}", node, ["python", "-c", TRAIN],
                                                   None if tag == "proc" else {"kubesim.io/duration": "2"}))
    _until(lambda: all(_phase(core, f"{tag}-train-{i}") in ("Succeeded", "Failed") for i in range(N_PODS)), 600, 0.1)
    total = time.perf_counter() - t0
    failed = sum(_phase(core, f"{tag}-train-{i}") == "Failed" for i in range(N_PODS))
    return total, failed


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _pss_kib(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def _idle_memory(core, kubesim_pid: int, node: str, tag: str) -> float:
    """PSS (KiB) of kubesim and everything it started, per idle pod (N_IDLE pods running `sleep`)."""
    before = _pss_kib([kubesim_pid, *_descendants(kubesim_pid)])
    for i in range(N_IDLE):
        core.create_namespaced_pod("default", _pod(f"{tag}-idle-{i}", node, ["sleep", "300"], None if tag == "proc"
                                                   else {"kubesim.io/duration": "300"}))
    _until(lambda: all(_phase(core, f"{tag}-idle-{i}") == "Running" for i in range(N_IDLE)))
    time.sleep(1.0)     # let the agents settle before sampling (a measurement, not a test wait)
    after = _pss_kib([kubesim_pid, *_descendants(kubesim_pid)])
    for i in range(N_IDLE):
        core.delete_namespaced_pod(f"{tag}-idle-{i}", "default", grace_period_seconds=0)
    return (after - before) / N_IDLE


def run() -> str:
    nodes = [{"name": "proc-1", "runtime": "process", "cpu": 64, "memory": "64Gi", "images": {"*": sys.prefix}},
             {"name": "sim-1", "cpu": 64, "memory": "64Gi"}]
    with tempfile.TemporaryDirectory() as tmp:
        nodes_file = Path(tmp) / "nodes.yaml"
        nodes_file.write_text(yaml.safe_dump(nodes))
        with kubesim_process("--nodes", str(nodes_file)) as sim:
            core, batch = _client(sim.kubeconfig)
            rows = {}
            for tag, node in (("proc", "proc-1"), ("scripted", "sim-1")):
                start = _start_latency(core, node, tag)
                jobs = _job_seconds(core, batch, node, tag)
                burst, failed = _burst(core, node, tag)
                mem = _idle_memory(core, sim.proc.pid, node, tag)
                rows[tag] = (start, jobs, burst, failed, mem)
    lines = ["## kubesim process nodes vs scripted nodes", "",
             f"One `python -m kubesim` with a process node and a scripted node; the client polls every 5 ms. "
             f"Create -> Running over {N_PODS} pods one by one; a Job whose pod runs `sleep 1` (scripted: "
             f"`kubesim.io/duration: 1`) create -> Complete, {N_JOBS} runs; {N_PODS} numpy training pods "
             f"(400 tanh(x x^T) steps on 200x200) created at once (scripted: 2 s each); PSS of kubesim and its "
             f"children per idle pod ({N_IDLE} pods).", "",
             "| | create -> Running p50 / p95 (ms) | 1 s Job -> Complete median (min-max) s | "
             f"{N_PODS} training pods at once: all done (s) | idle pod memory (PSS) |",
             "| --- | --- | --- | --- | --- |"]
    for tag, (start, jobs, burst, failed, mem) in rows.items():
        lines.append(f"| {tag} | {_pct(start, 50) * 1000:.0f} / {_pct(start, 95) * 1000:.0f} | "
                     f"{statistics.median(jobs):.2f} ({min(jobs):.2f}-{max(jobs):.2f}) | {burst:.1f}"
                     f"{f' ({failed} failed)' if failed else ''} | {mem / 1024:.1f} MiB |")
    lines += ["", "Targets: process pod create -> Running p95 <= 500 ms; a 1-second Job create -> Complete <= 2.5 s."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
