"""pytest plugin (loaded with ``-p devstack.testing``): Airflow test home, connections, SMTP sink, full stack.

Imported before any test module, so the Airflow environment below is in place before Airflow is imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from devstack.airflow_env import REPO, airflow_env, kubernetes_connection_uri
from devstack.smtp import SmtpSink, smtp_connection_uri

# Under pytest-xdist (make test-unit: -n 2) each worker has a home of its own: dag.test() writes to the SQLite DB in
# it and the session migrates it, which two processes must not do to one file at once.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEST_HOME = REPO / ".airflow" / ("test" if not _WORKER else f"test-{_WORKER}")
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


E2E_DAGS = [REPO / "dags", REPO / "tests" / "e2e_dags"]
_running: dict[str, object] = {}  # profile -> its started stack, so that only one runs at a time


def _start_stack(profile: str, tmp_path_factory, *, key: str | None = None, start_timeout: float = 240, **kw):
    """Start a stack of ``profile``, stopping the others first (two full Airflows on a 2-core machine slow
    both; the ``prod`` tests run last, see ``pytest_collection_modifyitems``). ``key`` names a stack with
    settings of its own (``kw``: ``make_stack``'s, e.g. ``airflow_settings``), stopped like the others."""
    from devstack.prod import make_stack
    from devstack.stack import free_port_range

    key = key or profile
    for other in [p for p in _running if p != key]:
        _running.pop(other).stop()
    # the end-to-end suite runs under RBAC enforcement with Skiff's ServiceAccount as kubernetes_default
    # (SKIFF_TEST_AUTHZ=none runs it with kubesim authorizing everything, to tell an RBAC gap from a bug)
    # instances' external ports from a block free on this machine now, not the default 20000-29999: the browser
    # test serves them on loopback, and another session's stack would hand out the same ports
    kw["airflow_settings"] = {"AIRFLOW__SKIFF__DEVINSTANCE_PORT_RANGE": free_port_range(100),
                              **kw.get("airflow_settings", {})}
    stack = make_stack(profile, tmp_path_factory.mktemp(key), dags_dirs=E2E_DAGS,
                       rbac=os.environ.get("SKIFF_TEST_AUTHZ", "rbac") == "rbac", **kw)
    # a machine shared by several test runs took 6 minutes to bring airflow standalone up: the wait is settable
    stack.start(timeout=float(os.environ.get("SKIFF_TEST_STACK_START_S", start_timeout)))
    _running[key] = stack
    return stack


@pytest.fixture(scope="session")
def airflow_stack(tmp_path_factory):
    """kubesim + SMTP sink + a real ``airflow standalone`` (scheduler, triggerer, dag-processor, api-server),
    kubesim enforcing RBAC and Airflow acting as Skiff's ServiceAccount.

    Each pytest session gets its own stack directory, so two sessions never share an Airflow home.
    """
    stack = _start_stack("standalone", tmp_path_factory)
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def prod_stack(tmp_path_factory):
    """The production profile (``devstack.prod``): PostgreSQL, CeleryExecutor on Redis, two schedulers, one
    Celery worker, two triggerers, a dag-processor and the api-server, each its own process."""
    stack = _start_stack("prod", tmp_path_factory)
    yield stack
    stack.stop()


@pytest.fixture(scope="session")
def process_stack(tmp_path_factory):
    """A stack on the demo's process nodes (devstack/demo_nodes.yaml: kubesim/kubelet/procrt runs every pod as real
    processes), with the example teams, shared by every module that asks for it: those tests run one after the
    other (``pytest_collection_modifyitems``), so it starts once."""
    stack = _start_stack("standalone", tmp_path_factory, key="procrt", nodes_file=REPO / "devstack" / "demo_nodes.yaml")
    _with_demo_team(stack)  # recsys and nlp, alice's and bob's home PVCs, the pools
    yield stack
    _running.pop("procrt", None)
    stack.stop()


@contextmanager
def own_stack(profile: str, tmp_path_factory, *, key: str, **kw):
    """A stack for one test module with settings of its own, stopped when the module is done (or when
    another stack starts first)."""
    stack = _start_stack(profile, tmp_path_factory, key=key, **kw)
    try:
        yield stack
    finally:
        if _running.get(key) is stack:
            _running.pop(key)
        stack.stop()


def with_demo_team(stack):
    return _with_demo_team(stack)


def _with_demo_team(stack):
    from devstack.demo_setup import setup_demo

    if not getattr(stack, "demo_team_ready", False):
        setup_demo(stack)
        stack.demo_team_ready = True
    return stack


@pytest.fixture(scope="session")
def team_stack(airflow_stack):
    """The stack with the example platform file applied (teams ``recsys`` and ``nlp``: quotas, alice's and bob's
    home PVCs, pools ``skiff-<team>``), as in the demo."""
    return _with_demo_team(airflow_stack)


@pytest.fixture(scope="session")
def prod_team_stack(prod_stack):
    """``team_stack`` on the production profile."""
    return _with_demo_team(prod_stack)


def profile_params() -> list:
    """Parameters for a fixture that runs shared end-to-end scenarios on both profiles (``prod`` marked)."""
    return ["standalone", pytest.param("prod", marks=pytest.mark.prod)]


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "prod: end-to-end tests on the production profile (PostgreSQL, Celery on Redis, 2 schedulers, "
                   "2 triggerers); they run after every other test")
    config.addinivalue_line(
        "markers", "stack: starts Airflow (a stack, an api-server or the demo); set by tests/conftest.py on every "
                   "e2e test and every test using a stack fixture; make test-unit runs -m 'not stack'")
    config.addinivalue_line(
        "markers", "own_stack: starts a stack with settings of its own (start_stack), which stops the session's "
                   "stacks; runs after the other standalone tests, before the prod ones")
    config.addinivalue_line(
        "markers", "soak: the short soak under faults (also alone: make soak-short); runs after every other test")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """Run the ``own_stack`` tests after the other standalone ones (those on ``process_stack`` last among them) and
    the ``prod`` tests last (stable order otherwise), so each profile's stack starts once, and the short
    soak after them: it stops every running stack to start its own, which the tests after it would find dead."""
    items.sort(key=lambda item: (item.get_closest_marker("soak") is not None,
                                 item.get_closest_marker("prod") is not None,
                                 item.get_closest_marker("own_stack") is not None,
                                 "process_stack" in getattr(item, "fixturenames", ())))
