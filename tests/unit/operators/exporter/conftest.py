"""The shared fixtures of the metrics tests (tests/support/<area>/fixtures.py)."""
from tests.support.metrics.fixtures import *  # noqa: F401,F403
