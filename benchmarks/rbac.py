"""What RBAC enforcement costs kubesim: simple GETs per second as Skiff's ServiceAccount on
``python -m kubesim --authz rbac`` (Skiff's RBAC installed, plus 50 team namespaces, each with Skiff's 5
RoleBindings and 4 members' = 450 RoleBindings) against the same requests on a kubesim without authorization.
Both servers run as processes, side by side in one run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from benchmarks.kubesim_proc import get_rate, kubesim_process

N_GET = 4000
CONCURRENCY = 16
TEAMS = 50


def _setup(kubeconfig: Path) -> str:
    """Skiff's RBAC, TEAMS team namespaces with Skiff's and the members' RoleBindings, a PVC; returns Skiff's token."""
    from kubernetes import client, config

    from kubesim.apiserver.auth.authz import request_token
    from operators.k8s import Kube
    from operators.rbac import apply_manifests, install_manifests, team_manifests

    with config.new_client_from_config(str(kubeconfig)) as admin:
        core = client.CoreV1Api(admin)
        core.create_namespace({"metadata": {"name": "airflow"}})
        apply_manifests(Kube(admin), install_manifests())
        for i in range(TEAMS):
            team = f"team-{i:02d}"
            core.create_namespace({"metadata": {"name": team}})
            apply_manifests(Kube(admin), team_manifests([team]))          # a cluster admin's step per team
            for j in range(4):        # members' RoleBindings, as the platform sync makes them
                client.RbacAuthorizationV1Api(admin).create_namespaced_role_binding(team, {
                    "metadata": {"name": f"m{j}"}, "subjects": [{"kind": "User", "name": f"u{i}-{j}"}],
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "skiff-member"}})
        core.create_namespaced_persistent_volume_claim("team-07", {"metadata": {"name": "home"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
        return request_token(admin.configuration.host, "airflow", "skiff")


def _gets(url: str, token: str | None, n: int = N_GET) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return asyncio.run(get_rate(f"{url}/api/v1/namespaces/team-07/persistentvolumeclaims/home", n, CONCURRENCY,
                                headers))


def run() -> str:
    from operators.rbac import team_roles

    with kubesim_process() as plain, kubesim_process("--authz", "rbac") as rbac:
        _setup(plain.kubeconfig)
        token = _setup(rbac.kubeconfig)
        _gets(plain.url, None, 500)          # warm both up
        _gets(rbac.url, token, 500)
        off = _gets(plain.url, None)
        on = _gets(rbac.url, token)
    return (f"## RBAC enforcement in kubesim\n\n"
            f"GET of one PVC as Skiff's ServiceAccount, {CONCURRENCY} concurrent clients, {N_GET} requests; "
            f"Skiff's RBAC + {TEAMS} teams ({TEAMS * (4 + len(team_roles()))} RoleBindings: Skiff's and 4 members' "
            f"each) installed on both servers.\n\n"
            f"| kubesim | requests/s |\n| --- | --- |\n| no authorization | {off:,.0f} |\n"
            f"| `--authz rbac` | {on:,.0f} |\n\nRatio: enforcement keeps {on / off:.0%} of the throughput.\n")
