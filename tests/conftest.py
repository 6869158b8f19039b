"""Project-wide pytest plugins (each team appends its own plugin module to the list), and the ``stack`` marker."""
from pathlib import Path

import pytest

pytest_plugins = ["kubesim.testing"]

# Fixtures that start Airflow: a whole stack (devstack/testing.py) or an api-server of its own (tests/support/ui/fixtures.py).
# A test that uses one of them (directly or through another fixture) is marked ``stack``, as is every ``e2e`` test
# (those start a stack or the demo through own_stack or `make demo`), and every test under tests/e2e/ (the layout of
# tools/test_moves.py); `make test-unit` runs ``-m "not stack"``.
STACK_FIXTURES = frozenset({"airflow_stack", "prod_stack", "process_stack", "team_stack", "prod_team_stack",
                            "api_server", "tpu_server"})
E2E_DIR = Path(__file__).parent / "e2e"


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection (its pytest_collection_modifyitems)
def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("e2e") or STACK_FIXTURES.intersection(getattr(item, "fixturenames", ())) \
                or E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.stack)


@pytest.fixture(autouse=True)
def _no_leftover_gc_callback():
    """A test that builds the page's app in-process installs the api-server's gc-pause logger (operators.ui.heap):
    take it out again, or every later long collection in this worker logs through a handler whose captured stream
    pytest has closed ("Logging error ... I/O operation on closed file")."""
    import gc

    before = list(gc.callbacks)
    yield
    gc.callbacks[:] = [c for c in gc.callbacks if c in before]
