"""The page's idle times (``operators.ui.idle_times``): a request never makes the per-instance reads itself beyond a
short first wait, a stale value is served while it is read again, and one instance is never read twice at once."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from kubesim.testing import wait_until
from operators.devinstances import idle
from operators.ui import idle_times

LAST = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def reads(monkeypatch):
    """The service-proxy read replaced: it records each key and, while ``gate`` is clear, blocks."""
    calls: list[tuple[str, str]] = []
    gate = threading.Event()
    gate.set()

    def read(kube, namespace, service):
        calls.append((namespace, service))
        assert gate.wait(10)
        return LAST, None

    monkeypatch.setattr(idle, "read_last_activity", read)
    idle_times.clear()
    yield calls, gate
    gate.set()
    idle_times.clear()


def test_an_instance_never_read_is_read_within_the_first_wait(reads):
    calls, _ = reads
    got = idle_times.last_activities(None, [("recsys", "alice--nb")])
    assert got == {("recsys", "alice--nb"): (LAST, None)} and calls == [("recsys", "alice--nb")]
    idle_times.last_activities(None, [("recsys", "alice--nb")])  # fresh: not read again
    assert len(calls) == 1


def test_a_slow_read_costs_the_request_the_first_wait_at_most_and_is_not_started_twice(reads, monkeypatch):
    calls, gate = reads
    monkeypatch.setattr(idle_times, "FIRST_WAIT", 0.2)
    gate.clear()  # Jupyter (or the proxy) does not answer
    t0 = time.monotonic()
    got = idle_times.last_activities(None, [("recsys", "a--nb")])
    assert time.monotonic() - t0 < 2
    assert got == {("recsys", "a--nb"): (None, idle_times.NOT_READ)}
    idle_times.last_activities(None, [("recsys", "a--nb")])
    assert calls == [("recsys", "a--nb")]  # the read under way is not started again
    gate.set()
    wait_until(lambda: idle_times.last_activities(None, [("recsys", "a--nb")])[("recsys", "a--nb")][0] == LAST,
               5, 0.05, what="the read's value served")


def test_a_stale_value_is_served_at_once_while_it_is_read_again(reads):
    calls, gate = reads
    key = ("recsys", "bob--nb")
    idle_times.last_activities(None, [key], now=time.monotonic() - idle_times.TTL - 1)  # read long ago
    assert len(calls) == 1
    with idle_times._lock:  # the value is as old as the TTL and more
        idle_times._known[key] = (time.monotonic() - idle_times.TTL - 1, idle_times._known[key][1])
    gate.clear()
    t0 = time.monotonic()
    assert idle_times.last_activities(None, [key]) == {key: (LAST, None)}  # the old value, not waiting
    assert time.monotonic() - t0 < 0.5
    wait_until(lambda: len(calls) == 2, 5, 0.05, what="the stale value read again in the background")
