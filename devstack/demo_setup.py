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
