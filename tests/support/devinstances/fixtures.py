"""Fixtures for development-instance tests on kubesim: a team namespace with users' home PVCs and a shared one."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.devinstances.devinstance_support import NS, USERS, make_request  # noqa: F401 - re-exported for tests


@pytest.fixture
def team(k8s) -> str:
    """Namespace ``recsys`` with ``<user>-home`` for alice, bob and user00..user19, and ``datasets``."""
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": NS}})
    for claim in [f"{u}-home" for u in USERS] + ["datasets"]:
        core.create_namespaced_persistent_volume_claim(NS, {
            "metadata": {"name": claim},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        })
    return NS


from tests.support.training.kueue_support import kueue_teams  # noqa: E402, F401 - the two-team Kueue fixture
