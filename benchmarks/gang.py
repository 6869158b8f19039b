"""Distributed training steps (issue 35): a gang of N pods (one Indexed Job, a headless Service, the env Skiff
gives each rank: ``operators.training.gang.env``) against what a user would do instead, in one run:

* create -> all N pods Running, N = 2, 4, 8, on a kubesim process node (the pods are real processes), against N
  plain pods created at once;
* under Kueue (``python -m kubesim --kueue``, scripted nodes): one Workload of count N (the gang, admitted whole)
  against N one-pod Jobs (N Workloads), create -> all N pods Running;
* the demo's data-parallel training (``devstack/demo_home/recsys/train_dp.py``, the ranks exchanging gradients over
  TCP between their pods) on 1 and on 2 workers, the same work (``dags/training_data_parallel.py``'s arguments):
  the training time each reports and the speed-up.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.kubesim_proc import kubesim_process
from kubesim.testing import wait_until

SIZES = (2, 4, 8)
REPEAT = 3
KUEUE_N = 8
RECSYS = Path(__file__).resolve().parents[1] / "devstack" / "demo_home" / "recsys"
DP_ARGS = ["--epochs", "2", "--samples", "20000", "--throttle", "0.02"]   # the demo DAG's
G, V = "kueue.x-k8s.io", "v1beta2"


def _clients(kubeconfig: Path):
    from kubernetes import client, config
    api = config.new_client_from_config(str(kubeconfig))
    return client.CoreV1Api(api), client.BatchV1Api(api), client.CustomObjectsApi(api)


def _until(predicate, timeout: float = 180.0, interval: float = 0.01):
    return wait_until(predicate, timeout, interval, what="benchmark condition")


def _running(core, selector: str) -> int:
    return sum(p.status.phase == "Running" for p in core.list_namespaced_pod("default", label_selector=selector).items)


def _container(command: list[str], cpu: str, env: list[dict] | None = None, **extra) -> dict:
    return {"name": "main", "image": "bench/venv", "command": command, "env": env or [],
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": "512Mi"}},
            **extra}


def _gang_job(name: str, n: int, command: list[str], cpu: str = "100m", labels: dict | None = None,
              annotations: dict | None = None, volumes: list | None = None, mounts: list | None = None) -> dict:
    """The Job a ``workers=n`` step makes (k8s_templates/training/job.yaml.j2's gang fields)."""
    from operators.training import gang

    env = [{"name": gang.INDEX_ENV, "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.annotations['{gang.INDEX_ANNOTATION}']"}}}]
    env += [{"name": k, "value": v} for k, v in gang.env(name, "default", n).items()] if n > 1 else []
    container = _container(command, cpu, env, **({"volumeMounts": mounts} if mounts else {}))
    spec = {"restartPolicy": "Never", "containers": [container], "volumes": volumes or []}
    if n > 1:
        spec["subdomain"] = gang.service_name(name)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n, "backoffLimit": 0,
                     "podFailurePolicy": {"rules": [{"action": "FailJob",
                                                     "onExitCodes": {"operator": "NotIn", "values": [0]}}]},
                     "template": {"metadata": {"annotations": annotations or {}}, "spec": spec}}}


def _service(name: str) -> dict:
    """k8s_templates/training/workers-service.yaml.j2's Service (its ports: the rendezvous's and TF_CONFIG's)."""
    from operators.training import gang

    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {"batch.kubernetes.io/job-name": name},
                     "ports": [{"name": "torch", "port": gang.MASTER_PORT, "targetPort": gang.MASTER_PORT},
                               {"name": "tf", "port": gang.TF_PORT, "targetPort": gang.TF_PORT}]}}


def _clean(core, batch) -> None:
    for j in batch.list_namespaced_job("default").items:
        batch.delete_namespaced_job(j.metadata.name, "default", propagation_policy="Background",
                                    grace_period_seconds=0)
    for p in core.list_namespaced_pod("default").items:
        core.delete_namespaced_pod(p.metadata.name, "default", grace_period_seconds=0)
    _until(lambda: not core.list_namespaced_pod("default").items, 120, 0.1)


def _gang_vs_pods(core, batch) -> dict[int, tuple[list[float], list[float]]]:
    out = {}
    for n in SIZES:
        gangs, pods = [], []
        for r in range(REPEAT):
            name = f"gang{n}-{r}"
            core.create_namespaced_service("default", _service(name))
            t0 = time.perf_counter()
            batch.create_namespaced_job("default", _gang_job(name, n, ["sleep", "300"]))
            _until(lambda s=f"batch.kubernetes.io/job-name={name}", n=n: _running(core, s) == n)
            gangs.append(time.perf_counter() - t0)
            core.delete_namespaced_service(name, "default")
            _clean(core, batch)
            t0 = time.perf_counter()
            for i in range(n):
                core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": f"single{n}-{r}-{i}", "labels": {"bench": f"single{n}-{r}"}}, "spec": {
                    "restartPolicy": "Never", "containers": [_container(["sleep", "300"], "100m")]}})
            _until(lambda s=f"bench=single{n}-{r}", n=n: _running(core, s) == n)
            pods.append(time.perf_counter() - t0)
            _clean(core, batch)
        out[n] = (gangs, pods)
    return out


def _kueue(core, batch, co) -> tuple[list[float], list[float]]:
    co.create_cluster_custom_object(G, V, "resourceflavors", {"apiVersion": f"{G}/{V}", "kind": "ResourceFlavor",
                                                              "metadata": {"name": "default"}, "spec": {}})
    co.create_cluster_custom_object(G, V, "clusterqueues", {
        "apiVersion": f"{G}/{V}", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
            "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                                  {"name": "memory", "nominalQuota": "64Gi"}]}]}]}})
    co.create_namespaced_custom_object(G, V, "default", "localqueues", {
        "apiVersion": f"{G}/{V}", "kind": "LocalQueue", "metadata": {"name": "q"}, "spec": {"clusterQueue": "cq"}})
    queue = {"kueue.x-k8s.io/queue-name": "q"}
    sim = {"kubesim.io/duration": "300"}
    gangs, singles = [], []
    for r in range(REPEAT):
        name = f"kgang-{r}"
        t0 = time.perf_counter()
        batch.create_namespaced_job("default", _gang_job(name, KUEUE_N, ["sleep", "300"], labels=queue,
                                                         annotations=sim))
        _until(lambda s=f"batch.kubernetes.io/job-name={name}": _running(core, s) == KUEUE_N)
        gangs.append(time.perf_counter() - t0)
        _clean(core, batch)
        t0 = time.perf_counter()
        for i in range(KUEUE_N):
            job = _gang_job(f"kone-{r}-{i}", 1, ["sleep", "300"], labels=queue, annotations=sim)
            job["spec"]["template"]["metadata"]["labels"] = {"bench": f"kone-{r}"}
            batch.create_namespaced_job("default", job)
        _until(lambda s=f"bench=kone-{r}": _running(core, s) == KUEUE_N)
        singles.append(time.perf_counter() - t0)
        _clean(core, batch)
    return gangs, singles


def _train(core, batch, workers: int) -> float:
    """train_dp.py on `workers` pods: the training seconds rank 0 reports."""
    name = f"dp{workers}"
    files = {f.name: f.read_text() for f in (RECSYS / "train_dp.py", RECSYS / "demo_lib.py")}
    core.create_namespaced_config_map("default", {"metadata": {"name": name}, "data": files})
    if workers > 1:
        core.create_namespaced_service("default", _service(name))
    command = ["python", "-u", "/app/train_dp.py", *DP_ARGS, "--model-out", "/tmp/model"]
    batch.create_namespaced_job("default", _gang_job(
        name, workers, command, cpu="1", volumes=[{"name": "app", "configMap": {"name": name}}],
        mounts=[{"name": "app", "mountPath": "/app"}]))
    _until(lambda: (batch.read_namespaced_job_status(name, "default").status.succeeded or 0) == workers
           or batch.read_namespaced_job_status(name, "default").status.failed, 600, 0.2)
    pods = core.list_namespaced_pod("default", label_selector=f"batch.kubernetes.io/job-name={name}").items
    pod = next((p for p in pods if p.metadata.annotations.get("batch.kubernetes.io/job-completion-index") == "0"),
               None)
    if pod is None:
        raise RuntimeError(f"{name}: no pod of rank 0 ({batch.read_namespaced_job_status(name, 'default').status}, "
                           f"{[(p.metadata.name, p.status.phase) for p in pods]})")
    log = core.read_namespaced_pod_log(pod.metadata.name, "default")
    said = re.search(r"trained on (\d+) worker\(s\) in ([\d.]+) s", log)
    if said is None or int(said.group(1)) != workers:
        raise RuntimeError(f"{name}: rank 0 did not finish: {log[-800:]}")
    _clean(core, batch)
    core.delete_namespaced_config_map(name, "default")
    if workers > 1:
        core.delete_namespaced_service(name, "default")
    return float(said.group(2))


def _med(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:.0f} ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def run() -> str:
    nodes = [{"name": f"proc-{i}", "runtime": "process", "cpu": 64, "memory": "64Gi", "images": {"*": sys.prefix}}
             for i in (1, 2)]
    with tempfile.TemporaryDirectory() as tmp:
        nodes_file = Path(tmp) / "nodes.yaml"
        nodes_file.write_text(yaml.safe_dump(nodes))
        with kubesim_process("--nodes", str(nodes_file)) as sim:
            core, batch, _ = _clients(sim.kubeconfig)
            started = _gang_vs_pods(core, batch)
            trained = {w: _train(core, batch, w) for w in (1, 2)}
        sim_nodes = Path(tmp) / "sim.yaml"
        sim_nodes.write_text(yaml.safe_dump([{"name": "sim-1", "cpu": 64, "memory": "64Gi"}]))
        with kubesim_process("--kueue", "--nodes", str(sim_nodes)) as sim:
            core, batch, co = _clients(sim.kubeconfig)
            kgangs, ksingles = _kueue(core, batch, co)
    lines = ["## Distributed training steps: gangs (issue 35)", "",
             f"Create -> all N pods Running, median (min-max) of {REPEAT} in ms; the client polls every 10 ms. A gang "
             "is one Indexed Job of N pods (completions = parallelism = N, a headless Service, the rank env "
             "`operators.training.gang.env` writes) on two kubesim process nodes, each pod a real process "
             "(`sleep`); the alternative is N plain pods created at once.", "",
             "| N | gang (one Indexed Job) | N plain pods at once |", "| --- | --- | --- |"]
    for n, (gangs, pods) in started.items():
        lines.append(f"| {n} | {_med(gangs)} | {_med(pods)} |")
    lines += ["", f"Kueue (kubesim `--kueue`, scripted nodes, 64 CPUs of quota): {KUEUE_N} pods as one gang "
              f"(one Workload, pod set count {KUEUE_N}, admitted whole) against {KUEUE_N} one-pod Jobs "
              f"({KUEUE_N} Workloads admitted one by one), create -> all {KUEUE_N} Running, ms:", "",
              f"| one gang of {KUEUE_N} | {KUEUE_N} single-pod Jobs |", "| --- | --- |",
              f"| {_med(kgangs)} | {_med(ksingles)} |", "",
              "The demo's data-parallel training (`train_dp.py`, the arguments of `dags/training_data_parallel.py`: "
              f"`{' '.join(DP_ARGS)}`; `--throttle` stands in for a real model's accelerator time per batch, which "
              "the workers share), on process nodes, the same work on 1 and on 2 pods (the 2 ranks exchange "
              "gradients over TCP through rank 0 every batch): training time rank 0 reports.", "",
              "| 1 worker (s) | 2 workers (s) | speed-up |", "| --- | --- | --- |",
              f"| {trained[1]:.1f} | {trained[2]:.1f} | {trained[1] / trained[2]:.2f}x |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(run())
