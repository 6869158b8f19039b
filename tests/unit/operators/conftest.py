"""The shared fixtures of the rbac, training tests (tests/support/<area>/fixtures.py)."""
from tests.support.rbac.fixtures import *  # noqa: F401,F403
from tests.support.training.fixtures import *  # noqa: F401,F403
