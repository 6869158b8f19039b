"""The idle time of running instances for the page, read off the request path.

Each instance's last activity costs one service-proxy request (``operators.devinstances.idle``); with 500 running
instances that is 500 requests, 1.4 s when a page request made them itself every ``TTL`` seconds (measured,
BENCHMARKS.md ui). Here a request takes what is known: a value younger than ``TTL`` as is, an older one as is
while a background reader fetches a new one (stale while revalidating), and an instance never read is read now,
the request waiting for it ``FIRST_WAIT`` seconds at most (a few instances are read within it; of hundreds, those
not read by then show "not known yet" until the next refresh). Reads run on ``READERS`` threads, at most one per
instance at a time.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from datetime import datetime

TTL = 30.0  # seconds a value is fresh
FIRST_WAIT = 1.0  # seconds a request waits for instances never read before
FORGET = 600.0  # a value not asked for this long is dropped (its instance was deleted or stopped)
READERS = 4
NOT_READ = "not read yet: reading it now"

Key = tuple[str, str]  # (namespace, service)
Found = tuple[datetime | None, str | None]  # (last activity, None) or (None, why it is not known)

_lock = threading.Lock()
_known: dict[Key, tuple[float, Found]] = {}  # key -> (when read, what was found)
_asked: dict[Key, float] = {}  # key -> when a request last asked for it
_reading: dict[Key, Future] = {}
_pool = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="skiff-idle")


def last_activities(kube, keys: list[Key], *, now: float | None = None) -> dict[Key, Found]:
    """What is known of each key's last activity (see the module's docstring for how fresh)."""
    now = time.monotonic() if now is None else now
    with _lock:
        for key in keys:
            _asked[key] = now
            hit = _known.get(key)
            if (hit is None or now - hit[0] >= TTL) and key not in _reading:
                _reading[key] = _pool.submit(_read, kube, key)
        first = [_reading[k] for k in keys if k not in _known and k in _reading]
        _forget(now)
    if first:
        wait_futures(first, timeout=FIRST_WAIT)
    with _lock:
        return {k: _known[k][1] if k in _known else (None, NOT_READ) for k in keys}


def _read(kube, key: Key) -> None:
    from operators.devinstances import idle

    try:
        found = idle.read_last_activity(kube, *key)
    except Exception as exc:  # noqa: BLE001 - the page says why, the reader thread lives on
        found = (None, str(exc))
    with _lock:
        _known[key] = (time.monotonic(), found)
        _reading.pop(key, None)


def _forget(now: float) -> None:
    for key in [k for k, t in _asked.items() if now - t > FORGET]:
        _asked.pop(key, None)
        _known.pop(key, None)


def clear() -> None:
    """Forget everything (tests)."""
    with _lock:
        _known.clear()
        _asked.clear()
