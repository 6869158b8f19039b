"""The RBAC proof tests run on kubesim enforcing RBAC (`kubesim.testing`'s `kubesim_rbac`)."""
from __future__ import annotations

import os

import pytest


@pytest.fixture
def rbac_sim(kubesim_rbac, monkeypatch, airflow_db):
    # airflow_db: the UI scenario reads task instances from Airflow's metadata DB
    # skiff_env points kubernetes_default at Skiff's kubeconfig: monkeypatch restores it after the test
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", os.environ.get("AIRFLOW_CONN_KUBERNETES_DEFAULT", ""))
    return kubesim_rbac
