"""An RBAC-enforcing kubesim for the RBAC proof tests (one per session, reset per test)."""
from __future__ import annotations

import os

import pytest

from kubesim import KubeSim


@pytest.fixture(scope="session")
def rbac_server():
    sim = KubeSim(authz="rbac").start()
    yield sim
    sim.stop()


@pytest.fixture
def rbac_sim(rbac_server, monkeypatch):
    rbac_server.reset()
    rbac_server.access.denials.clear()
    # skiff_env points kubernetes_default at Skiff's kubeconfig: undo it after the test
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", os.environ.get("AIRFLOW_CONN_KUBERNETES_DEFAULT", ""))
    return rbac_server
