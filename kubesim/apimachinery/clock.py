"""Time in kubesim: the store's `Clock`, and the one parser and formatters of the API's RFC 3339 times."""
from __future__ import annotations

import re
from datetime import UTC, datetime

_FRACTION = re.compile(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$")


class Clock:
    """Wall-clock time; cluster.py may substitute a faster or manual clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    @staticmethod
    def rfc3339(dt: datetime) -> str:
        return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339nano(dt: datetime) -> str:
    """`2026-01-02T03:04:05.123456000Z`: the kubelet's log timestamps (RFC 3339 with nanoseconds)."""
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def parse_time(text: str) -> datetime:
    """An RFC 3339 time (`Z` or an offset, up to nanoseconds) as an aware datetime (UTC when it has no
    offset); ValueError when it is not one."""
    text = text.strip().replace("Z", "+00:00")
    m = _FRACTION.match(text)
    if m and m.group(2):
        text = m.group(1) + m.group(2)[:7] + m.group(3)     # Python keeps microseconds
    dt = datetime.fromisoformat(text)
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
