from __future__ import annotations

from pathlib import Path

import pytest

PROMTOOL = "/usr/bin/promtool"


@pytest.fixture(scope="module")
def promtool() -> str:
    """Debian's promtool (`make monitoring`): the alert rules are checked and unit-tested by it."""
    if not Path(PROMTOOL).exists():
        pytest.fail("/usr/bin/promtool missing: run `make monitoring` (apt-get install prometheus)")
    return PROMTOOL
