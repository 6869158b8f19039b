"""The shared fixtures of the devinstances tests (tests/support/<area>/fixtures.py)."""
from tests.support.devinstances.fixtures import *  # noqa: F401,F403
