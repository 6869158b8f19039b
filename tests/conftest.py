"""Project-wide pytest plugins (each team appends its own plugin module to the list), and the ``stack`` marker."""
from pathlib import Path

import pytest

pytest_plugins = ["kubesim.testing"]

# Fixtures that start Airflow: a whole stack (devstack/testing.py) or an api-server of its own (tests/ui/conftest.py).
# A test that uses one of them (directly or through another fixture) is marked ``stack``, as is every ``e2e`` test
# (those start a stack or the demo through own_stack or `make demo`), and every test under tests/e2e/ (the layout of
# tools/test_moves.py); `make test-unit` runs ``-m "not stack"``.
STACK_FIXTURES = frozenset({"airflow_stack", "prod_stack", "process_stack", "team_stack", "prod_team_stack",
                            "api_server", "tpu_server"})
E2E_DIR = Path(__file__).parent / "e2e"


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection and xdist's groups (their modifyitems hooks)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("e2e") or STACK_FIXTURES.intersection(getattr(item, "fixturenames", ())) \
                or E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.stack)
        # pytest-xdist (make test-unit: -n 2 --dist loadgroup): the tests of a module sharing a module-scoped
        # fixture (a process-node cluster, a JupyterLab, a DagBag, a built virtualenv) run in one worker, so it is set
        # up once; a test's own xdist_group mark wins
        if not item.get_closest_marker("xdist_group") and _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(name=item.module.__name__))


def _uses_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return bool(info) and any(defs[-1].scope == "module" for defs in info.name2fixturedefs.values() if defs)
