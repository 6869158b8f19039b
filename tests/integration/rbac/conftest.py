"""The shared fixtures of the rbac tests (tests/support/<area>/fixtures.py)."""
from tests.support.rbac.fixtures import *  # noqa: F401,F403
