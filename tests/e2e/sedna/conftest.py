"""The shared fixtures of the sedna tests (tests/support/<area>/fixtures.py)."""
from tests.support.sedna.fixtures import *  # noqa: F401,F403
