"""The container command cannot inject shell: run the rendered argv with a real bash (hypothesis)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from operators.training.spec import build_command

PAYLOADS = [
    "$(touch {canary})", "`touch {canary}`", "; touch {canary}", "&& touch {canary}", "| touch {canary}",
    "\ntouch {canary}\n", "'; touch {canary}; '", '"; touch {canary}; "', "${{IFS}}touch${{IFS}}{canary}",
    "$((1+1))", "*", "~", "!!", "$HOME", "\\", "-e", "--", "> {canary}", "<(touch {canary})",
]
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
hostile = st.one_of(text, st.sampled_from(PAYLOADS), st.tuples(text, st.sampled_from(PAYLOADS), text).map("".join))
PRINT_ARGV = [sys.executable, "-c", "import sys, json; sys.stdout.write(json.dumps(sys.argv[1:]))"]


def _run(argv: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HISTFILE": "/dev/null"}
    return subprocess.run(argv, capture_output=True, env=env, cwd=home, timeout=30, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    return tmp_path_factory.mktemp("inject")


# entry paths that are absolute or climb out of /root are refused (tests/integration/hostile: train-entry-*), not run
relative = hostile.filter(lambda e: bool(e) and not e.startswith("/") and ".." not in e.split("/"))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=relative, run_args=st.lists(hostile, max_size=5), env_word=hostile)
@example(entry="x; touch {canary}", run_args=["$(touch {canary})", "`touch {canary}`"], env_word="'")
def test_argv_arrives_byte_identical_and_nothing_runs(sandbox, entry, run_args, env_word):
    canary = sandbox / "canary"
    fill = lambda s: s.replace("{canary}", str(canary))  # noqa: E731
    entry, run_args, env_word = fill(entry), [fill(a) for a in run_args], fill(env_word)
    argv = build_command(str(sandbox), [*PRINT_ARGV, env_word], entry, run_args)
    result = _run(argv, sandbox)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [env_word, f"/root/{entry}", *run_args]
    assert not canary.exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=hostile.filter(lambda s: s not in ("", ".", "..") and "/" not in s and len(s.encode()) < 200))
def test_work_dir_is_entered_verbatim(sandbox, name):
    canary = sandbox / "canary"
    name = name.replace("{canary}", "canary-text")
    work = sandbox / "dirs" / name
    work.mkdir(parents=True, exist_ok=True)
    argv = build_command(str(work), [sys.executable, "-c", "import os, sys; sys.stdout.write(os.getcwd())"], None, [])
    result = _run(argv, sandbox)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == str(work)
    assert not canary.exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(work_dir=hostile)
def test_hostile_work_dir_never_executes(sandbox, work_dir):
    canary = sandbox / "canary"
    work_dir = "/nonexistent/" + work_dir.replace("{canary}", str(canary))
    result = _run(build_command(work_dir, ["true"], None, []), sandbox)
    assert result.returncode != 0  # cd fails; the program is never reached
    assert not canary.exists()


def test_exec_command_string_is_split_once_not_evaluated():
    assert build_command("/w", "python -u", "t.py", [])[7:] == ["python", "-u", "/root/t.py"]
    assert build_command("/w", "python '$(id)'", None, [])[7:] == ["python", "$(id)"]
