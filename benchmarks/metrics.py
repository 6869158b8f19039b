"""Skiff's Prometheus endpoint at 50 teams and 1,000 training Jobs: requests to the cluster and milliseconds
per scrape, against reading the cluster per team on every scrape.

kubesim runs as its own process; requests are counted by kubesim (``/kubesim/stats``). The scrape is the
endpoint's work in this process (cache, cluster read, gauges, text format), without the api-server's HTTP and
auth in front. The Jobs are suspended (queued, as Kueue holds them), so kubesim runs no pod for them.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.kubesim_proc import kubesim_process

TEAMS, JOBS_PER_TEAM = 50, 20


def _seed(api) -> None:
    from kubernetes import client

    from operators.k8s.resource import JOBS
    from operators.k8s.rest import Kube
    from operators.platform.model import QUOTA_NAME

    core, kube = client.CoreV1Api(api), Kube(api)
    for t in range(TEAMS):
        ns = f"team-{t:02d}"
        core.create_namespace({"metadata": {"name": ns}})
        core.create_namespaced_resource_quota(ns, {"metadata": {"name": QUOTA_NAME}, "spec": {"hard": {
            "requests.cpu": "64", "requests.memory": "256Gi", "requests.nvidia.com/gpu": "8"}}})
        for j in range(JOBS_PER_TEAM):
            kube.create(JOBS, ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
                "name": f"train-{j:03d}", "labels": {"app.kubernetes.io/managed-by": "skiff",
                                                     "app.kubernetes.io/name": "skiff-training"}},
                "spec": {"suspend": True, "backoffLimit": 0, "template": {"spec": {
                    "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}})


def _per_team_read(kube) -> None:
    """What a hand-written exporter does: the team's quota and its Jobs, per team, on every scrape."""
    from operators.k8s.resource import JOBS, RESOURCEQUOTAS

    for t in range(TEAMS):
        ns = f"team-{t:02d}"
        kube.list(RESOURCEQUOTAS, ns)
        kube.list(JOBS, ns, label_selector="app.kubernetes.io/managed-by=skiff")


def run() -> str:
    import httpx
    from kubernetes import config

    from operators.exporter.endpoint import ClusterCache, exposition, read_cluster
    from operators.k8s.rest import Kube

    with kubesim_process() as sim:
        api = config.new_client_from_config(str(sim.kubeconfig))
        http = httpx.Client(timeout=60)
        _seed(api)
        kube = Kube(api)

        def measure(fn, n: int) -> tuple[float, float]:
            """(median ms, requests per call)"""
            http.post(f"{sim.url}/kubesim/stats/reset")
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1000)
            return statistics.median(times), http.get(f"{sim.url}/kubesim/stats").json()["total"] / n

        fresh = ClusterCache(lambda: read_cluster(kube), max_age=0)  # every scrape re-reads the cluster
        refresh = measure(lambda: exposition(fresh.get(), fresh, 0), 5)
        cached = ClusterCache(lambda: read_cluster(kube), max_age=3600)
        cached.get()
        hit = measure(lambda: exposition(cached.get(), cached, 0), 200)
        naive = measure(lambda: _per_team_read(kube), 5)
        body = exposition(cached.get(), cached, 0)
        series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    return f"""## metrics: Skiff's Prometheus endpoint with {TEAMS} teams and {TEAMS * JOBS_PER_TEAM:,} training Jobs

kubesim as a process; the endpoint's work in this process (cache, cluster read, gauges, text format; no HTTP
or auth in front). Requests counted by kubesim. {series} series per scrape ({len(body):,} bytes).

| scrape | requests to the cluster | ms (median) |
|---|---|---|
| Skiff, cache older than `metrics_cache_seconds` (re-reads the cluster) | {refresh[1]:g} | {refresh[0]:.1f} |
| Skiff, within the cache age (every other scrape) | {hit[1]:g} | {hit[0]:.2f} |
| reading each team's quota and Jobs per scrape (a hand-written exporter) | {naive[1]:g} | {naive[0]:.1f} |

The endpoint's cost per scrape does not grow with teams or Jobs in requests (7 cluster-wide lists: quotas,
Jobs, instance StatefulSets, 2 Sedna kinds, Skiff's pods and Sedna's joint-inference pods for skiff_pod_info),
only in the bytes those lists carry; with the default 15 s cache and Prometheus' 30 s interval each scrape
re-reads once.
"""
