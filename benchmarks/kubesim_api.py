"""kubesim's speed as an API server: simple requests per second and the latency of listing 1,000 pods.

kubesim runs as its own process (``python -m kubesim``), as in the demo and the e2e tests, so that the client's
work is not counted against the server. Targets from issue 2: >= 2,000 simple requests/s, a 1,000-pod list in
under 50 ms.
"""

from __future__ import annotations

import asyncio
import statistics
import time

import aiohttp

from benchmarks.kubesim_proc import get_rate, kubesim_process

N_GET = 6000
CONCURRENCY = 16
N_PODS = 1000


def _pod(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i:04d}", "labels": {"app": "bench", "shard": str(i % 10)}},
        # bound to a node that does not exist: no scheduler or kubelet work skews the API figures
        "spec": {"nodeName": "bench-node", "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }


async def _list_ms(url: str, runs: int = 30) -> list[float]:
    async with aiohttp.ClientSession() as s:
        out = []
        for _ in range(runs):
            t0 = time.perf_counter()
            async with s.get(f"{url}/api/v1/namespaces/default/pods") as r:
                body = await r.json()
            out.append((time.perf_counter() - t0) * 1000)
            assert len(body["items"]) == N_PODS
        return out


def run() -> str:
    from kubernetes import client, config

    with kubesim_process() as sim:
        url = sim.url
        api = client.CoreV1Api(config.new_client_from_config(str(sim.kubeconfig)))
        t0 = time.perf_counter()
        for i in range(N_PODS):
            api.create_namespaced_pod("default", _pod(i))
        create_rate = N_PODS / (time.perf_counter() - t0)

        raw_rate = asyncio.run(get_rate(f"{url}/api/v1/namespaces/default/pods/bench-0000", N_GET, CONCURRENCY))
        t0 = time.perf_counter()
        for _ in range(500):
            api.read_namespaced_pod("bench-0000", "default")
        client_rate = 500 / (time.perf_counter() - t0)

        raw_list = asyncio.run(_list_ms(url))
        t0 = time.perf_counter()
        for _ in range(10):
            assert len(api.list_namespaced_pod("default").items) == N_PODS
        client_list = (time.perf_counter() - t0) * 100
        t0 = time.perf_counter()
        for _ in range(50):
            assert len(api.list_namespaced_pod("default", label_selector="shard=3").items) == N_PODS // 10
        selector_list = (time.perf_counter() - t0) * 20

    p50 = statistics.median(raw_list)
    p95 = sorted(raw_list)[int(len(raw_list) * 0.95) - 1]
    return f"""## kubesim API server

kubesim as a process, clients in another process on the same 2-core machine.

| measure | result | target | ratio to target |
| --- | --- | --- | --- |
| simple GETs/s, raw HTTP ({CONCURRENCY} concurrent aiohttp clients, {N_GET} requests) | {raw_rate:,.0f}/s | 2,000/s | {raw_rate / 2000:.1f}x |
| list of {N_PODS} pods, raw HTTP, p50 / p95 | {p50:.1f} ms / {p95:.1f} ms | < 50 ms | {50 / p50:.1f}x headroom |
| GETs/s through the `kubernetes` client, sequential | {client_rate:,.0f}/s | | |
| list of {N_PODS} pods through the `kubernetes` client (deserialised into models) | {client_list:.0f} ms | | |
| list with a label selector (100 of {N_PODS}) through the `kubernetes` client | {selector_list:.1f} ms | | |
| creates/s through the `kubernetes` client, sequential | {create_rate:,.0f}/s | | |

The `kubernetes` client's own model deserialisation dominates its figures: the server answers the same list
in {p50:.1f} ms.
"""
