"""The api-server's Python heap and the page's latency: ``freeze`` once the app is loaded, ``watch_pauses`` logs
long collections.

Once Airflow's app and its plugins are loaded the api-server's heap holds ~770,000-900,000 objects tracked by the
garbage collector (modules, SQLAlchemy metadata, FastAPI routes, pydantic models), none of which ever becomes
garbage. Every full (generation-2) collection walked all of them: 0.4 s on an idle core, 1.0-2.6 s on the
benchmark's busy 2-core machine, about every 8th ``/skiff/api/instances`` request (each parses the 1,000
StatefulSets and pods it lists, which is what triggers collections). That was the page API's p95. ``gc.freeze``
moves every object alive at that moment to the permanent generation, which collections no longer walk: a full
collection then costs what the request itself holds (~10 ms for a 1,000-object list).

What is left is how often collections run. A request of the page parses ~1,000 objects (~25 tracked dicts and
lists each: ~25,000 per list, ~50,000 with the rows it builds and encodes); at CPython's default threshold (a
generation-0 collection every 700 net allocations, generation 1 every 10 of those, generation 2 every 10 of those)
each request ran ~70 young collections, promoted its own short-lived objects into the older generations, and
after the freeze (which leaves generation 2 nearly empty, so its 25% rule no longer holds full collections back)
set off a full one about every other request: on the benchmark's busy machine those still took 130-230 ms (its
log, 2026-12-01). ``GEN0_THRESHOLD`` makes a young collection wait for 50,000 allocations, about one request's
worth: most of a request's objects die by reference counting before any collection sees them, and full
collections come every few hundred requests. A young collection of up to 50,000 objects takes a few milliseconds.

Called from the plugin app's lifespan: Airflow's api-server (``airflow.api_fastapi.app.lifespan``) enters the
lifespan of every mounted FastAPI app at start-up, after every plugin is mounted, in each worker process (uvicorn
workers are separate processes, each loads the app and runs its lifespan: each freezes its own heap).
"""

from __future__ import annotations

import gc
import logging
import os
import time

log = logging.getLogger("skiff.ui")
GEN0_THRESHOLD = 50_000  # allocations between young collections (CPython's default: 700); generations 1, 2 kept
LONG_PAUSE_S = 0.1  # a collection longer than this is logged (the page API's own target is 0.2 s at p95)

_frozen_in: int | None = None  # the pid that froze (a forked child has its parent's frozen objects already)
_started: dict[int, float] = {}


def freeze() -> int:
    """Collect what is garbage now, then move every surviving object out of the collected generations and make
    young collections wait for ``GEN0_THRESHOLD`` allocations (once per process). Returns the number of frozen
    objects."""
    global _frozen_in
    if _frozen_in == os.getpid():
        return gc.get_freeze_count()
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
    _frozen_in = os.getpid()
    log.info("froze %d objects of the loaded api-server out of garbage collection; thresholds %s",
             gc.get_freeze_count(), gc.get_threshold())
    return gc.get_freeze_count()


def _on_gc(phase: str, info: dict) -> None:
    gen = info.get("generation", -1)
    if phase == "start":
        _started[gen] = time.perf_counter()
        return
    t0 = _started.pop(gen, None)
    if t0 is not None and (took := time.perf_counter() - t0) > LONG_PAUSE_S:
        log.warning("gc pause: generation %d took %.0f ms (%d objects collected, %d frozen)",
                    gen, took * 1000, info.get("collected", 0), gc.get_freeze_count())


def watch_pauses() -> None:
    """Log every collection longer than ``LONG_PAUSE_S`` (the benchmark counts these lines)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
