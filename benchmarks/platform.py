"""platform_sync at the SPEC's size: 50 teams x 20 users (1,000 home PVCs, 1,300 objects), first and second run.

kubesim runs as its own process (as in the demo); writes are counted by kubesim's request counters
(``/kubesim/stats``). Side by side: what a user would do instead, re-applying every object each run
(``kubectl apply --server-side -f`` of the rendered manifests), against Skiff's observe-diff-apply.
"""

from __future__ import annotations

import time

from benchmarks.kubesim_proc import kubesim_process

TEAMS, USERS = 50, 20
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def platform_text() -> str:
    lines = ["version: 1", "users: {default_pvc_size: 5Gi}", "registries:", "  - {secret: regcred, teams: all}",
             "teams:"]
    for t in range(TEAMS):
        lines += [f"  - name: team-{t:02d}", '    quota: {cpu: "64", memory: 256Gi, gpu: 8, storage: 100Gi, jobs: 16}',
                  "    members:"]
        lines += [f"      - {{user: user-{t:02d}-{u:02d}, role: {'admin' if u == 0 else 'member'}}}"
                  for u in range(USERS)]
    return "\n".join(lines) + "\n"


def _stats(http, url: str) -> dict:
    return http.get(f"{url}/kubesim/stats").json()


def _writes(stats: dict) -> int:
    return sum(n for verb, n in stats["by_verb"].items() if verb in WRITE_VERBS)


def _timed(http, url: str, fn) -> tuple[float, int, int]:
    http.post(f"{url}/kubesim/stats/reset")
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    stats = _stats(http, url)
    return seconds, _writes(stats), stats["total"]


def run() -> str:
    import httpx
    from kubernetes import config

    from operators.k8s import Kube
    from operators.platform import parse_platform
    from operators.platform.desired import desired_objects
    from operators.platform.sync import apply_request, sync_cluster

    platform = parse_platform(platform_text(), "bench-platform.yaml")
    with kubesim_process() as sim:
        url = sim.url
        api = config.new_client_from_config(str(sim.kubeconfig))
        http = httpx.Client(timeout=60)
        reports = []
        first = _timed(http, url, lambda: reports.append(sync_cluster(Kube(api), platform)))
        second = _timed(http, url, lambda: reports.append(sync_cluster(Kube(api), platform)))
        assert not reports[0].errors and not reports[1].applied, (reports[0].errors[:3], reports[1].applied[:3])
        objects = [d for t in desired_objects(platform) for d in t.setup + t.rest + t.volumes]
        kube = Kube(api)

        def blind_apply():
            for doc in objects:
                apply_request(kube, doc)

        blind = _timed(http, url, blind_apply)
    n = len(objects)
    return f"""## platform_sync ({TEAMS} teams x {USERS} users)

kubesim as a process, the sync in this process, on the same machine. {n} objects: per team a Namespace,
ResourceQuota, LimitRange, ServiceAccount and 2 RoleBindings, and {TEAMS * USERS} home PVCs.

| run | seconds | write requests | all requests |
|---|---|---|---|
| Skiff platform_sync, first run (creates everything) | {first[0]:.2f} | {first[1]} | {first[2]} |
| Skiff platform_sync, second run (nothing changed) | {second[0]:.2f} | {second[1]} | {second[2]} |
| re-applying every object (`kubectl apply --server-side` style), nothing changed | {blind[0]:.2f} | {blind[1]} | {blind[2]} |

The unchanged second run makes {second[2]} list requests and no write: {blind[0] / max(second[0], 1e-9):.0f}x faster
than re-applying all {n} objects (each a no-op on the server, but {blind[1]} requests).
"""
