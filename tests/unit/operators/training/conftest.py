"""The shared fixtures of the training tests (tests/support/<area>/fixtures.py)."""
from tests.support.training.fixtures import *  # noqa: F401,F403
