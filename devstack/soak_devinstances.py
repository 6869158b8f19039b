"""The soak's development-instance load: alice creates, stops and deletes up to three instances through the
``dev_instance_*`` DAGs (as from the UI's forms) while faults and kills go on; afterwards the tcp-services
ConfigMap (ingress-nginx's node ports) is read for the auditor's duplicated / leaked ports check."""

from __future__ import annotations

import random

OWNER, TEAM = "alice", "recsys"
NAMES = [f"soak-dev-{i}" for i in range(3)]     # at most 3 instances per user
ACTIONS = ["create", "create", "stop", "delete"]


def step(stack, rng: random.Random, runs: list[tuple[str, str]]) -> str:
    """Trigger one random action on one of alice's soak instances (the run may fail under faults: that is the
    point; what it leaves behind is audited)."""
    action, name = rng.choice(ACTIONS), rng.choice(NAMES)
    conf = {"name": name, "team": TEAM}
    if action == "create":
        conf.update(cpu=0.5, memory=1)
    try:
        run_id = stack.trigger(f"dev_instance_{action}", conf, user=OWNER)
    except RuntimeError as e:  # refused by the API (e.g. a param check): say so in the tally
        return f"{action} refused: {str(e)[:40]}"
    runs.append((f"dev_instance_{action}", run_id))
    return action


def ports(api) -> tuple[dict[str, str], set[str]]:
    """(tcp-services data: node port -> "ns/service:port", every Service that exists as "ns/name")."""
    from kubernetes import client

    from operators.devinstances.settings import Settings

    # the stack's [skiff] devinstance_* settings are the declared defaults (stack.py passes it no AIRFLOW*
    # variable)
    s = Settings()
    core = client.CoreV1Api(api)
    try:
        data = core.read_namespaced_config_map(s.tcp_name, s.tcp_namespace).data or {}
    except client.ApiException as e:
        if e.status != 404:
            raise
        data = {}
    live = {f"{svc.metadata.namespace}/{svc.metadata.name}" for svc in core.list_service_for_all_namespaces().items}
    return dict(data), live
