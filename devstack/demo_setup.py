"""What a platform owner sets up before a team's first run: the demo team's queue on the demo cluster."""

from __future__ import annotations

from operators.teams import ensure_queue, queue_manifests

DEMO_TEAM = "recsys"
DEMO_USERS = ["alice", "bob"]
# Room for the example pipeline (one step at a time: 1 cpu, 2Gi, 1 GPU for training).
DEMO_QUOTA = {
    "limits.cpu": "8",
    "limits.memory": "32Gi",
    "requests.cpu": "8",
    "requests.memory": "32Gi",
    "requests.nvidia.com/gpu": "2",
    "requests.storage": "100Gi",
}


def setup_demo_cluster(api_client) -> dict[str, list[str]]:
    return ensure_queue(api_client, queue_manifests(DEMO_TEAM, DEMO_USERS, DEMO_QUOTA, user_storage="20Gi"))


# The demo user's development instance, created through dev_instance_create as alice would from the UI's form.
DEMO_INSTANCE_OWNER = "alice"
DEMO_INSTANCE = {"name": "notebook", "team": DEMO_TEAM, "cpu": 1, "memory": 2}


def demo_instance_lines(api_client, owner: str = DEMO_INSTANCE_OWNER) -> list[str]:
    """How to open ``owner``'s instances: state, addresses and the ssh line (never the password)."""
    from operators.devinstances.inventory import list_instances
    from operators.devinstances.settings import Settings

    lines = []
    for v in list_instances(api_client, owner, Settings.from_env(), with_idle=False):
        lines.append(f"{v.owner}'s instance {v.namespace}/{v.name}: {v.state}, image {v.image_name} "
                     f"({v.resources.get('cpu')} CPU, {v.resources.get('memory')})")
        lines += [f"  {svc:<12} {url}" for svc, url in v.urls.items()]
        if v.ssh:
            lines.append(f"  {'ssh':<12} {v.ssh}")
    return lines
