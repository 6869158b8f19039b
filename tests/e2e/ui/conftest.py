"""The shared fixtures of the ui tests (tests/support/<area>/fixtures.py)."""
from tests.support.ui.fixtures import *  # noqa: F401,F403
