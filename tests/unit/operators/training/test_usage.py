"""operators/training/usage.py's peak on the step's Job (issue 37, the page's training row): what is recorded, when
it is written again, and how a hand-written annotation is refused (pure)."""

from __future__ import annotations

import json

import pytest

from operators.training.usage import (
    PEAK_MAX_CHARS,
    PEAK_WRITE_MIN_S,
    Peak,
    Seen,
    encode_peak,
    peak_of,
    read_peak,
    should_write,
)

MiB = 1 << 20


def test_a_gangs_peak_is_its_highest_pod_and_a_one_pod_step_has_the_summarys_figures():
    seen = {"rank-0": Seen(memory=[100 * MiB, 120 * MiB], cpu=[0.5, 0.7]),
            "rank-1": Seen(memory=[300 * MiB, 280 * MiB, 290 * MiB], cpu=[0.2, 0.2, 0.5]),
            "never-read": Seen()}
    assert peak_of(seen) == Peak(memory=300 * MiB, cpu=0.7, cpu_mean=0.6, readings=3, pods=2)
    one = peak_of({"p": Seen(memory=[1, 5, 3], cpu=[0.1, 0.4, 0.1])}, final=True)
    # the summary line's figures: peak memory seen, the mean CPU, the readings
    assert (one.memory, one.cpu_mean, one.readings, one.cpu, one.final) == (5, 0.2, 3, 0.4, True)


def test_no_reading_records_no_number():
    assert peak_of({}) == Peak(None, None, None, 0, 0)
    assert peak_of({"p": Seen()}, final=True, oom=True) == Peak(None, None, None, 0, 0, True, True)


def test_what_is_written_reads_back_the_same_and_stays_small():
    for peak in (Peak(300 * MiB, 0.734, 0.512, 12, 1), Peak(2**40, 64.0, 32.5, 10**6, 8, True, False),
                 Peak(None, None, None, 0, 0, True, True)):
        text = encode_peak(peak)
        assert read_peak(text) == peak and len(text) < 200, text
    assert json.loads(encode_peak(Peak(1, 0.5, 0.5, 1, 1)))["v"] == 1


def test_written_at_the_first_reading_then_only_when_grown_and_not_within_a_minute():
    first = Peak(100 * MiB, 0.5, 0.5, 1, 1)
    assert not should_write(None, Peak(None, None, None, 0, 0), None)   # nothing to say yet
    assert should_write(None, first, None)
    grown = Peak(110 * MiB, 0.5, 0.5, 5, 1)
    assert not should_write(first, Peak(104 * MiB, 0.5, 0.5, 5, 1), PEAK_WRITE_MIN_S)   # under 5 %: not a change
    assert not should_write(first, Peak(100 * MiB, 0.5, 0.5, 50, 1), 3600)   # more readings alone: no write
    assert not should_write(first, grown, PEAK_WRITE_MIN_S - 1)              # grown, but written a moment ago
    assert should_write(first, grown, PEAK_WRITE_MIN_S)
    assert should_write(first, Peak(100 * MiB, 0.9, 0.6, 5, 1), PEAK_WRITE_MIN_S)   # the CPU peak grew


GOOD = {"v": 1, "memory": 1000, "cpu": 0.5, "cpu_mean": 0.25, "readings": 3, "pods": 1, "final": False, "oom": False}


@pytest.mark.parametrize("value", [
    None, 12, b"{}", "", "not json", "[1, 2]", "null", json.dumps({**GOOD, "v": 2}), json.dumps({**GOOD, "v": "1"}),
    json.dumps({**GOOD, "memory": "1Gi"}), json.dumps({**GOOD, "memory": -1}), json.dumps({**GOOD, "memory": 1.5}),
    json.dumps({**GOOD, "memory": 2**60}), json.dumps({**GOOD, "memory": True}), json.dumps({**GOOD, "cpu": 1e6}),
    json.dumps({**GOOD, "readings": 10**400}), json.dumps({**GOOD, "cpu": "NaN"}),
    json.dumps({**GOOD, "final": "yes"}), json.dumps({**GOOD, "readings": 0}),
    json.dumps({k: v for k, v in GOOD.items() if k != "pods"}),
    json.dumps({**GOOD, "memory": None}), json.dumps({**GOOD, "pad": "x" * PEAK_MAX_CHARS}),
    '{"v": 1, "cpu": NaN, "memory": 1, "cpu_mean": 1, "readings": 1, "pods": 1}',
    '{"v": 1, "cpu": Infinity, "memory": 1, "cpu_mean": 1, "readings": 1, "pods": 1}',
    "[" * 200 + "]" * 200,
], ids=lambda v: repr(v)[:40])
def test_an_annotation_someone_else_wrote_is_refused_with_a_reason(value):
    with pytest.raises(ValueError):
        read_peak(value)


def test_unknown_keys_are_ignored_and_nothing_but_numbers_comes_through():
    peak = read_peak(json.dumps({**GOOD, "note": "<img src=x onerror=alert(1)>"}))
    assert peak == Peak(1000, 0.5, 0.25, 3, 1)
