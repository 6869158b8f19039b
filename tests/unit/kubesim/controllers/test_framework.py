"""The controllers' work queue re-queues like client-go's rate-limited queue (k8s.io/client-go/util/workqueue:
`default_rate_limiters.go` `DefaultControllerRateLimiter`, per item `ItemExponentialFailureRateLimiter(5ms,
1000s)`; a controller's processNextWorkItem calls `AddRateLimited(key)` when its sync returned an error and
`Forget(key)` when it did not). kubesim's queue once dropped a key whose handler raised."""
from __future__ import annotations

import asyncio
import logging

from kubesim.controllers.framework import WorkQueue
from kubesim.testing import async_wait_until


async def test_a_key_whose_handler_raised_is_retried_with_a_growing_back_off_then_forgotten(caplog):
    loop = asyncio.get_running_loop()
    runs: list[float] = []

    def handler(key):
        runs.append(loop.time())
        if len(runs) <= 3:
            raise RuntimeError("transient")

    queue = WorkQueue("test", handler)
    queue.start()
    try:
        with caplog.at_level(logging.ERROR):
            queue.add("k")
            await async_wait_until(lambda: len(runs) == 4, timeout=5, what="the fourth run")
        gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
        assert [g >= d * 0.9 for g, d in zip(gaps, (0.005, 0.010, 0.020), strict=True)] == [True] * 3
        assert queue.num_requeues("k") == 0                   # it succeeded: Forget
        assert caplog.text.count("test: error reconciling k") == 3
    finally:
        await queue.stop()


async def test_a_handler_that_requeues_its_own_key_keeps_its_failures_until_it_ends_clean():
    """A conflict (409) retry is `add_rate_limited` from inside the handler: each one doubles that key's delay;
    another key's failures are its own; a clean run forgets them."""
    conflicts = iter([True, True, True, False])
    seen: list[tuple[str, int]] = []        # (key, its failures so far) at each run
    queue: WorkQueue

    def handler(key):
        seen.append((key, queue.num_requeues(key)))
        if key == "a" and next(conflicts):
            queue.add_rate_limited("a")

    queue = WorkQueue("test", handler)
    queue.start()
    try:
        queue.add("a")
        queue.add("b")
        await async_wait_until(lambda: len(seen) == 5, timeout=5, what="a's clean run")
        assert [n for k, n in seen if k == "a"] == [0, 1, 2, 3] and ("b", 0) in seen
        assert queue.num_requeues("a") == 0
    finally:
        await queue.stop()
