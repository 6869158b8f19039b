"""Fixtures for the training tests: a team namespace with the owner's PVC, task contexts, a task state store."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.training.kueue_support import kueue_teams  # noqa: F401 - the two-team Kueue fixture
from tests.support.training.training_support import NAMESPACE, make_context  # noqa: F401 - re-exported for tests


@pytest.fixture
def team(k8s, kube_conn) -> str:
    """Namespace ``recsys`` with ``alice-home`` (alice's default PVC) and ``recsys-datasets``; kubernetes_default set."""
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    for claim in ("alice-home", "recsys-datasets"):
        core.create_namespaced_persistent_volume_claim(NAMESPACE, {
            "metadata": {"name": claim},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        })
    return NAMESPACE
