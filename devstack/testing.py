"""pytest plugin (loaded with ``-p devstack.testing``): Airflow test home, connections, SMTP sink, full stack.

Imported before any test module, so the Airflow environment below is in place before Airflow is imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.airflow_env import REPO, airflow_env, kubernetes_connection_uri
from devstack.smtp import SmtpSink, smtp_connection_uri

TEST_HOME = REPO / ".airflow" / "test"
TEST_HOME.mkdir(parents=True, exist_ok=True)
for _k in [k for k in os.environ if k.startswith("AIRFLOW__") or k.startswith("AIRFLOW_CONN_")]:
    del os.environ[_k]  # a developer's own Airflow settings must not leak into the tests
os.environ.update(airflow_env(TEST_HOME))


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated SQLite metadata DB in the project-local test home (``dag.test()`` needs one)."""
    subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        check=True, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    return TEST_HOME


@pytest.fixture
def kube_conn(kubesim, kubeconfig, monkeypatch) -> str:
    """``kubernetes_default`` pointing at the ``kubesim`` fixture's cluster."""
    uri = kubernetes_connection_uri(kubeconfig)
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", uri)
    return uri


@pytest.fixture
def smtp_sink(monkeypatch):
    """A real SMTP server on localhost; ``smtp_default`` points at it."""
    sink = SmtpSink().start()
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_DEFAULT", smtp_connection_uri(sink.port))
    yield sink
    sink.stop()


@pytest.fixture(scope="session")
def airflow_stack(tmp_path_factory):
    """kubesim + SMTP sink + a real ``airflow standalone`` (scheduler, triggerer, dag-processor, api-server),
    kubesim enforcing RBAC and Airflow acting as Skiff's ServiceAccount.

    Each pytest session gets its own stack directory, so two sessions never share an Airflow home.
    """
    from devstack.stack import Stack

    # the end-to-end suite runs under RBAC enforcement with Skiff's ServiceAccount as kubernetes_default
    # (SKIFF_TEST_AUTHZ=none runs it with kubesim authorizing everything, to tell an RBAC gap from a bug)
    stack = Stack(tmp_path_factory.mktemp("stack"), dags_dirs=[REPO / "dags", REPO / "tests" / "e2e_dags"],
                  rbac=os.environ.get("SKIFF_TEST_AUTHZ", "rbac") == "rbac")
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def team_stack(airflow_stack):
    """The stack with the example platform file applied (teams ``recsys`` and ``nlp``: quotas, alice's and bob's
    home PVCs, pools ``skiff-<team>``), as in the demo."""
    from devstack.demo_setup import setup_demo

    setup_demo(airflow_stack)
    return airflow_stack
