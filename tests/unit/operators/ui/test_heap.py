"""``operators.ui.heap``: the api-server's loaded heap leaves garbage collection once, at the plugin app's start-up,
and collections longer than ``LONG_PAUSE_S`` are logged (the ui benchmark counts those lines). The real
api-server's start-up is checked in test_page_api (its log names what it froze)."""

from __future__ import annotations

import gc
import logging
import os

import pytest
from fastapi.testclient import TestClient

from operators.ui import heap
from operators.ui.app import create_app


@pytest.fixture
def unfrozen(monkeypatch):
    gc.unfreeze()
    monkeypatch.setattr(heap, "_frozen_in", None)
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()  # the test process's heap goes back to being collected, at its own thresholds
    gc.set_threshold(*thresholds)


def test_freeze_moves_every_live_object_out_of_collection_once_per_process(unfrozen):
    assert gc.get_freeze_count() == 0
    kept = [[i] for i in range(1000)]  # container objects alive at the freeze
    frozen = heap.freeze()
    # a frozen object that dies leaves the count (in the full suite, threads of earlier tests free some meanwhile)
    assert frozen >= gc.get_freeze_count() > len(kept)
    assert gc.get_threshold()[0] == heap.GEN0_THRESHOLD != 700
    collected = {id(x) for x in gc.get_objects()}  # what collections walk: none of the frozen objects
    assert gc.is_tracked(kept[0]) and not {id(x) for x in kept} & collected
    later = [[i] for i in range(1000)]  # made after the freeze: collected as usual, and a second call freezes nothing
    assert heap.freeze() <= frozen  # a second freeze would add `later` (1,000 more) to the count
    assert id(later[0]) in {id(x) for x in gc.get_objects()}


def test_the_plugin_app_freezes_the_heap_when_the_api_server_starts_it(unfrozen):
    app = create_app()
    assert gc.get_freeze_count() == 0  # creating the app (importing the plugin) freezes nothing yet
    with TestClient(app):  # runs the app's lifespan, as Airflow's api-server does for every mounted app
        assert heap._frozen_in == os.getpid() and gc.get_freeze_count() > 0


def test_a_collection_longer_than_the_threshold_is_logged_and_a_short_one_is_not(monkeypatch, caplog):
    heap.watch_pauses()
    heap.watch_pauses()
    try:
        assert gc.callbacks.count(heap._on_gc) == 1
        caplog.set_level(logging.WARNING, logger="skiff.ui")
        monkeypatch.setattr(heap, "LONG_PAUSE_S", 60.0)
        gc.collect()
        assert "gc pause" not in caplog.text
        monkeypatch.setattr(heap, "LONG_PAUSE_S", 0.0)
        gc.collect()
        assert "gc pause: generation 2 took" in caplog.text
    finally:
        gc.callbacks.remove(heap._on_gc)
