"""Issue 30, class 5: the platform file is parsed once per content, read at most 1 MiB, and its errors listed
within bounds. Every page route, task and exporter refresh calls ``load_platform``; a large file was parsed
again by each of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from operators.platform import PlatformError, load_platform
from operators.platform import _parsed as parsed_cache
from operators.platform.loader import MAX_BYTES, MAX_ERRORS, parse_platform

EXAMPLE = (Path(__file__).parents[3] / "operators" / "platform" / "example.yaml").read_text()


def test_the_same_content_is_parsed_once_and_a_change_is_seen_at_once(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(EXAMPLE)
    first = load_platform(path)
    again = load_platform(path)
    assert again is first  # the same Platform object: not parsed again (it is immutable)
    path.write_text(EXAMPLE.replace("name: nlp", "name: speech"))
    changed = load_platform(path)
    assert changed is not first and [t.name for t in changed.teams] == ["recsys", "speech"]
    path.write_text(EXAMPLE)
    assert load_platform(path) is first  # the content decides, not the time the file was written


def test_a_bad_file_is_not_parsed_again_either(tmp_path):
    path = tmp_path / "platform.yaml"
    path.write_text(EXAMPLE.replace('cpu: "4"', "cpu: 1e309"))
    with pytest.raises(PlatformError) as first:
        load_platform(path)
    hits = parsed_cache.cache_info().hits
    with pytest.raises(PlatformError) as again:
        load_platform(path)
    assert str(again.value) == str(first.value) and "quota.cpu" in str(first.value)
    assert parsed_cache.cache_info().hits == hits + 1


def test_a_file_over_1_mib_is_refused_unread(tmp_path):
    path = tmp_path / "platform.yaml"
    with path.open("w") as f:
        f.write(EXAMPLE)
        f.write("# " + "z" * (5 * MAX_BYTES) + "\n")
    with pytest.raises(PlatformError) as info:
        load_platform(path)
    assert f"{path}:1: (file): over {MAX_BYTES} bytes" in str(info.value)


def test_a_message_lists_at_most_max_errors_and_counts_the_rest():
    teams = "".join(f"  - {{name: t{i}, quota: {{cpu: '1', memory: 1Gi, storage: 1Gi}}, members: [{{user: u{i}}}]}}\n"
                    for i in range(200))  # 200 teams whose members' volumes do not fit their storage quota
    with pytest.raises(PlatformError) as info:
        parse_platform("version: 1\nteams:\n" + teams, "p.yaml")
    lines = str(info.value).splitlines()
    assert len(lines) == MAX_ERRORS + 1 and lines[-1] == f"p.yaml: ... and {200 - MAX_ERRORS} more errors"
