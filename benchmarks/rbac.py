"""What RBAC enforcement costs kubesim: simple GETs per second as Skiff's ServiceAccount on
``python -m kubesim --authz rbac`` (Skiff's RBAC installed, plus 50 team namespaces, each with Skiff's 5
RoleBindings and 4 members' = 450 RoleBindings) against the same requests on a kubesim without authorization.
Both servers run as processes, side by side in one run.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from devstack.stack import _spawn, _wait_for_line, free_port

N_GET = 4000
CONCURRENCY = 16
TEAMS = 50


def _start(tmp: Path, name: str, *extra: str):
    kubeconfig = tmp / f"{name}.kubeconfig"
    argv = [sys.executable, "-m", "kubesim", "--port", str(free_port()), "--kubeconfig", str(kubeconfig), *extra]
    proc = _spawn(argv, tmp / f"{name}.log", dict(os.environ))
    url = _wait_for_line(proc, tmp / f"{name}.log", r"kubesim ready (\S+)", 30).group(1)
    return proc, url, kubeconfig


def _setup(kubeconfig: Path, tmp: Path) -> str:
    """Skiff's RBAC, TEAMS team namespaces with Skiff's and the members' RoleBindings, a PVC; returns Skiff's token."""
    from kubernetes import client, config

    from kubesim.authz import request_token
    from operators.rbac import apply_manifests, install_manifests, team_manifests

    with config.new_client_from_config(str(kubeconfig)) as admin:
        core = client.CoreV1Api(admin)
        core.create_namespace({"metadata": {"name": "airflow"}})
        apply_manifests(admin, install_manifests())
        for i in range(TEAMS):
            team = f"team-{i:02d}"
            core.create_namespace({"metadata": {"name": team}})
            apply_manifests(admin, team_manifests([team]))          # a cluster admin's step per team
            for j in range(4):        # members' RoleBindings, as the platform sync makes them
                client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(team, {
                    "metadata": {"name": f"m{j}"}, "subjects": [{"kind": "User", "name": f"u{i}-{j}"}],
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "skiff-member"}})
        core.create_namespaced_persistent_volume_claim("team-07", {"metadata": {"name": "home"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        return request_token(admin.configuration.host, "airflow", "skiff")


async def _gets(url: str, token: str | None, n: int = N_GET) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(headers=headers) as s:
        target = f"{url}/api/v1/namespaces/team-07/persistentvolumeclaims/home"
        left = n

        async def worker():
            nonlocal left
            while left > 0:
                left -= 1
                async with s.get(target) as r:
                    await r.read()
                    assert r.status == 200, r.status

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
        return n / (time.perf_counter() - t0)


def run() -> str:
    from operators.rbac import team_roles

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        procs = []
        try:
            plain, plain_url, plain_cfg = _start(tmp, "plain")
            procs.append(plain)
            rbac, rbac_url, rbac_cfg = _start(tmp, "rbac", "--authz", "rbac")
            procs.append(rbac)
            _setup(plain_cfg, tmp)
            token = _setup(rbac_cfg, tmp)
            asyncio.run(_gets(plain_url, None, 500))          # warm both up
            asyncio.run(_gets(rbac_url, token, 500))
            off = asyncio.run(_gets(plain_url, None))
            on = asyncio.run(_gets(rbac_url, token))
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=20)
    return (f"## RBAC enforcement in kubesim\n\n"
            f"GET of one PVC as Skiff's ServiceAccount, {CONCURRENCY} concurrent clients, {N_GET} requests; "
            f"Skiff's RBAC + {TEAMS} teams ({TEAMS * (4 + len(team_roles()))} RoleBindings: Skiff's and 4 members' "
            f"each) installed on both servers.\n\n"
            f"| kubesim | requests/s |\n| --- | --- |\n| no authorization | {off:,.0f} |\n"
            f"| `--authz rbac` | {on:,.0f} |\n\nRatio: enforcement keeps {on / off:.0%} of the throughput.\n")
