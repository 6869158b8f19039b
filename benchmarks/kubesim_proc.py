"""kubesim as its own process for a benchmark (as in the demo and the e2e tests, so the client's work is not
counted against the server), and the raw-HTTP GET rate the API benchmarks measure against it."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from devstack.stack import _spawn, _wait_for_line, free_port

KUBESIM = (sys.executable, "-m", "kubesim")


class Kubesim(NamedTuple):
    proc: object          # subprocess.Popen
    url: str
    kubeconfig: Path


@contextmanager
def kubesim_process(*extra: str, command: Sequence[str] = KUBESIM, ready_s: float = 30) -> Iterator[Kubesim]:
    """``python -m kubesim --port P --kubeconfig K *extra`` (``command`` replaces ``python -m kubesim``), with
    only ``PATH`` in its environment; stopped and its directory (log, kubeconfig) removed on exit."""
    with tempfile.TemporaryDirectory(prefix="kubesim-bench-") as tmp:
        log, kubeconfig = Path(tmp) / "kubesim.log", Path(tmp) / "kubeconfig"
        argv = [*command, "--port", str(free_port()), "--kubeconfig", str(kubeconfig), *extra]
        proc = _spawn(argv, log, {"PATH": str(Path(sys.executable).parent)})
        try:
            url = _wait_for_line(proc, log, r"kubesim ready (\S+)", ready_s).group(1)
            yield Kubesim(proc, url, kubeconfig)
        finally:
            proc.terminate()
            proc.wait(timeout=60)


async def get_rate(target: str, n: int, concurrency: int, headers: dict[str, str] | None = None) -> float:
    """``n`` GETs of ``target`` by ``concurrency`` aiohttp clients in one session: requests per second."""
    import aiohttp

    async with aiohttp.ClientSession(headers=headers or {}) as s:
        left = n

        async def worker():
            nonlocal left
            while left > 0:
                left -= 1
                async with s.get(target) as r:
                    await r.read()
                    assert r.status == 200, r.status

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return n / (time.perf_counter() - t0)


async def bounded(coros, limit: int) -> list:
    """Await ``coros`` with at most ``limit`` in flight (creating many objects without 1,000 connections at once)."""
    sem = asyncio.Semaphore(limit)

    async def one(c):
        async with sem:
            return await c
    return await asyncio.gather(*(one(c) for c in coros))
