"""The training row's peak as the page words it (``static/skiff-training.js`` ``peakLine``), in English and Simplified
Chinese, run in Node.js on a small DOM stand-in: the figures against the limit and request, "so far" while the step
runs, a gang's pods, an OOM kill, and words, never a number, without a readable peak. The browser test
(tests/e2e/ui/test_platform_page_in_browser.py) reads the rendered row on the real page."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from devstack.airflow_env import REPO

STATIC = REPO / "operators" / "ui" / "static"
GiB, MiB = 2**30, 2**20
EMPTY = {"memory": None, "memory_limit": None, "memory_percent": None, "cpu": None, "cpu_mean": None,
         "cpu_request": None, "cpu_percent": None, "readings": 0, "pods": 0, "final": False, "oom": False}

DOM = """
class Node {
  constructor(tag) { this.tag = tag; this.children = []; this.attrs = {}; }
  append(...c) { this.children.push(...c); }
  setAttribute(k, v) { this.attrs[k] = String(v); }
  addEventListener() {}
  get textContent() { return this.children.map((c) => c.textContent).join(""); }
}
class Text extends Node { constructor(t) { super("#text"); this.t = t; } get textContent() { return this.t; } }
globalThis.Node = Node;
globalThis.document = { createElement: (tag) => new Node(tag), createTextNode: (t) => new Text(t), documentElement: { lang: "" } };
"""


def _render(tmp_path, peaks: list[dict | None], lang: str) -> list[dict | None]:
    for name in ("skiff-common.js", "skiff-i18n.js", "skiff-training.js"):
        shutil.copy(STATIC / name, tmp_path / name)
    (tmp_path / "package.json").write_text('{"type": "module"}')
    script = DOM + (
        f"globalThis.localStorage = {{ getItem: (k) => k === 'i18nextLng' ? {json.dumps(lang)} : null }};\n"
        f"const m = await import({json.dumps((tmp_path / 'skiff-training.js').as_uri())});\n"
        f"console.log(JSON.stringify({json.dumps(peaks)}.map((p) => {{ const el = m.peakLine(p);\n"
        "  return el && { text: el.textContent, attrs: el.attrs, cls: el.className }; })));\n")
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


RUNNING = {**EMPTY, "memory": 300 * MiB, "memory_limit": float(GiB), "memory_percent": 29.3, "cpu": 0.5,
           "cpu_mean": 0.48, "cpu_request": 1.0, "cpu_percent": 50.0, "readings": 4, "pods": 1, "missing": None}
GANG = {**RUNNING, "memory": 512 * MiB, "memory_percent": 50.0, "pods": 3, "readings": 20, "final": True}


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's module")
def test_the_peak_reads_against_the_limit_and_request_so_far_or_final_in_english_and_chinese(tmp_path):
    running, gang, none = _render(tmp_path, [RUNNING, GANG, None], "en")
    assert running["text"] == ("peak memory 0.29 of 1 GiB limit (29 %), peak CPU 0.5 of 1 cores requested · "
                               "4 reading(s) · so far")
    assert running["cls"] == "sub peak" and running["attrs"]["data-memory"] == str(300 * MiB)
    assert running["attrs"]["data-final"] == "false"
    assert gang["text"] == ("peak memory 0.5 of 1 GiB limit (50 %), peak CPU 0.5 of 1 cores requested · "
                            "20 reading(s) · highest of its 3 pods")
    assert gang["attrs"]["data-final"] == "true" and none is None
    (zh,) = _render(tmp_path, [RUNNING], "zh-CN")
    assert zh["text"] == "内存峰值 0.29，限额 1 GiB（29 %）；CPU 峰值 0.5，请求 1 核 · 4 次读数 · 截至目前"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's module")
def test_an_oom_kill_and_a_missing_or_unreadable_peak_are_said_in_words_without_a_number(tmp_path):
    oom = {**EMPTY, "memory_limit": float(GiB), "oom": True, "final": True, "missing": None}
    oom_no_limit = {**oom, "memory_limit": None}
    no_limits = {**RUNNING, "memory_limit": None, "memory_percent": None, "cpu_request": None, "cpu_percent": None}
    missing = [{**EMPTY, "missing": m} for m in ("no_reading", "none", "unreadable")]
    got = [r["text"] for r in _render(tmp_path, [oom, oom_no_limit, no_limits, *missing], "en")]
    assert got == ["peak memory at its limit of 1 GiB (OOMKilled)",   # no reading: no count either
                   "peak memory: the container was OOM-killed",
                   "peak memory 0.29 GiB (no limit), peak CPU 0.5 (no request) · 4 reading(s) · so far",
                   "peak: no reading yet", "peak: none recorded",
                   "peak: not readable (the Job's skiff.io/usage-peak annotation is not Skiff's)"]
    zh = [r["text"] for r in _render(tmp_path, missing, "zh-CN")]
    assert zh == ["峰值：暂无读数", "峰值：没有记录", "峰值：无法读取（作业的 skiff.io/usage-peak 注解不是 Skiff 写的）"]
