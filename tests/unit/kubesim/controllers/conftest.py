"""The shared fixtures of the kubesim tests (tests/support/<area>/fixtures.py)."""
from tests.support.kubesim.fixtures import *  # noqa: F401,F403
