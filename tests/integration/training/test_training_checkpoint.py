"""Checkpoints and grace (issue 28 part 1): the step's directory, its env, the grace period, and the container's
wrapper script run for real by bash (SIGTERM passed on, the directory removed only after a finished success)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import kubernetes_validate
import pytest

from operators.training import checkpoint
from operators.training.naming import TaskInstanceKey
from operators.training.operator import TrainingJobOperator
from operators.training.spec import SCRIPT, build_command, env_vars

KEY = TaskInstanceKey("reco_daily", "train", "scheduled__2026-11-29T03:00:00+00:00", 2)


# ---- the directory: per DAG, task and logical run; names checked and bounded ----------------------------------
def test_the_directory_is_per_dag_task_and_run_and_the_same_for_every_try():
    one = checkpoint.checkpoint_dir("reco_daily", "train", "manual__2026-12-01T10:00:00+00:00")
    assert one.startswith("/root/.skiff/checkpoints/reco_daily/train/manual__2026-12-01T10_00_00_00_00-")
    assert one == checkpoint.checkpoint_dir("reco_daily", "train", "manual__2026-12-01T10:00:00+00:00")
    assert one != checkpoint.checkpoint_dir("reco_daily", "train", "manual__2026-12-01T10_00_00_00_00")
    assert checkpoint.checkpoint_dir("d", "t", "r", 3) == "/root/.skiff/checkpoints/d/t/r.m3"
    others = {checkpoint.checkpoint_dir(*ids) for ids in (("d", "t", "r2"), ("d", "t2", "r"), ("d2", "t", "r"))}
    assert len(others) == 3 and checkpoint.checkpoint_dir("d", "t", "r") not in others


@pytest.mark.parametrize("field,ids", [("dag_id", ("..", "t", "r")), ("task_id", ("d", ".", "r")),
                                       ("run_id", ("d", "t", "a\x00b")), ("run_id", ("d", "t", ""))])
def test_dot_dot_nul_and_empty_ids_are_refused_naming_the_field(field, ids):
    with pytest.raises(ValueError, match=f"^{field}="):
        checkpoint.checkpoint_dir(*ids)


def test_components_are_bounded_and_never_climb():
    long_run = "x" * 5000
    path = checkpoint.checkpoint_dir("d", "t", long_run)
    assert len(path.rsplit("/", 1)[1]) <= checkpoint.MAX_COMPONENT
    assert path != checkpoint.checkpoint_dir("d", "t", long_run + "y")       # a hash keeps them apart
    for hostile in ("../../etc", "/abs", "a/../../b", ".hidden", "a b;rm -rf /"):
        built = checkpoint.checkpoint_dir(hostile, hostile, hostile)
        parts = built.split("/")
        assert len(parts) == 7 and ".." not in parts and not any(p.startswith(".") for p in parts[5:])
        assert os.path.normpath(built) == built


# ---- the Job: env, annotations, grace ---------------------------------------------------------------------------
def _op(**over) -> TrainingJobOperator:
    args = dict(task_id="train", image="registry.local/recsys/train:1", entry_path="train.py", owner="alice",
                namespace="recsys")
    return TrainingJobOperator(**{**args, **over})


def test_the_job_carries_the_directory_try_resume_preemptions_and_the_grace_period():
    job = _op(env={"A": "1"}, termination_grace_period=timedelta(minutes=2)).build_manifest(KEY)
    kubernetes_validate.validate(job, "1.33", strict=True)
    pod = job["spec"]["template"]["spec"]
    directory = checkpoint.checkpoint_dir(KEY.dag_id, KEY.task_id, KEY.run_id)
    assert pod["terminationGracePeriodSeconds"] == 120
    assert pod["containers"][0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "SKIFF_CHECKPOINT_DIR", "value": directory},
        {"name": "SKIFF_TRY_NUMBER", "value": "2"},
        {"name": "SKIFF_RESUME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['skiff.io/resume']"}}},
        {"name": "SKIFF_PREEMPTIONS",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['skiff.io/preemptions']"}}}]
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert (annotations["skiff.io/resume"], annotations["skiff.io/preemptions"]) == ("1", "0")   # try 2 resumes
    first = _op().build_manifest(TaskInstanceKey(KEY.dag_id, KEY.task_id, KEY.run_id, 1))
    assert first["spec"]["template"]["metadata"]["annotations"]["skiff.io/resume"] == "0"
    command = pod["containers"][0]["command"]
    assert command[2] == SCRIPT and command[5:7] == [directory, "remove"]
    assert _op(keep_checkpoint=True).build_manifest(KEY)["spec"]["template"]["spec"]["containers"][0][
        "command"][5:7] == [directory, "keep"]


def test_the_grace_period_defaults_to_the_setting(monkeypatch):
    grace = lambda op: op.build_manifest(KEY)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]  # noqa: E731
    assert grace(_op()) == 60
    monkeypatch.setenv("AIRFLOW__SKIFF__TRAINING_GRACE_SECONDS", "15")
    assert grace(_op()) == 15
    assert grace(_op(termination_grace_period=2.5)) == 3      # whole seconds, never less than asked


@pytest.mark.parametrize("value", [-1, float("nan"), "30", True, timedelta(days=2)])
def test_a_bad_grace_period_is_refused_naming_the_field(value):
    with pytest.raises(ValueError, match="^termination_grace_period="):
        _op(termination_grace_period=value)


def test_the_env_skiff_sets_cannot_be_overridden():
    with pytest.raises(ValueError, match="^env='SKIFF_CHECKPOINT_DIR': is set by Skiff"):
        env_vars({"SKIFF_CHECKPOINT_DIR": "/root"})
    with pytest.raises(ValueError, match="^keep_checkpoint="):
        _op(keep_checkpoint="yes")


def test_the_command_refuses_a_directory_outside_the_checkpoint_root():
    for bad in ("/root", "/root/.skiff/checkpoints/../../x", "/tmp/.skiff/checkpoints/a"):
        with pytest.raises(ValueError, match="^checkpoint_dir="):
            build_command("/root", "python", None, [], bad)


# ---- the wrapper script, run by bash ----------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path) -> Path:
    return tmp_path


def _start(home: Path, program: str, mode: str = "remove", directory: Path | None = None) -> subprocess.Popen:
    directory = directory or home / ".skiff" / "checkpoints" / "d" / "t" / "r"
    argv = ["/bin/bash", "-ic", SCRIPT, "skiff", str(home), str(directory), mode, sys.executable, "-u", "-c", program]
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HISTFILE": "/dev/null"}
    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_success_removes_exactly_the_steps_directory(home):
    mine = home / ".skiff" / "checkpoints" / "d" / "t" / "r"
    sibling = home / ".skiff" / "checkpoints" / "d" / "t" / "r2"
    sibling.mkdir(parents=True)
    (sibling / "keep.txt").write_text("another run's")
    proc = _start(home, "import os; open(os.path.join(os.getcwd(), '.skiff/checkpoints/d/t/r/ckpt'), 'w').write('x');"
                        "print('trained')")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == b"trained\n" and b"[1]" not in err            # bash's job announcement is not in the log
    assert not mine.exists() and (sibling / "keep.txt").read_text() == "another run's"


@pytest.mark.parametrize("program,code", [("import sys; sys.exit(3)", 3), ("import os; os.kill(os.getpid(), 9)", 137)])
def test_a_failure_keeps_the_directory_and_its_exit_status(home, program, code):
    proc = _start(home, program)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert b"tcsetattr" not in err and b"Killed" not in err     # bash's job chatter stays out of the task log
    assert (home / ".skiff" / "checkpoints" / "d" / "t" / "r").is_dir()


def test_keep_mode_keeps_it_after_success(home):
    proc = _start(home, "print('ok')", mode="keep")
    proc.communicate(timeout=60)
    assert proc.returncode == 0 and (home / ".skiff" / "checkpoints" / "d" / "t" / "r").is_dir()


SAVER = """
import os, signal, sys, time
def on_term(*_):
    open(os.path.join(sys.argv[1], "saved"), "w").write("saved on SIGTERM")
    print("saving", flush=True)
    sys.exit(0)   # even a program that exits 0 after SIGTERM has not finished: its directory stays
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
time.sleep(60)
"""


def test_sigterm_reaches_the_program_which_saves_and_the_directory_stays(home):
    directory = home / ".skiff" / "checkpoints" / "d" / "t" / "r"
    argv = ["/bin/bash", "-ic", SCRIPT, "skiff", str(home), str(directory), "remove", sys.executable, "-u", "-c",
            SAVER, str(directory)]
    proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"], "HOME": str(home)}, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"       # the program runs (and bash's trap is set before it starts)
    proc.send_signal(signal.SIGTERM)                  # what the kubelet sends the container's PID 1
    out, err = proc.communicate(timeout=60)
    assert out == b"saving\n", err
    assert (directory / "saved").read_text() == "saved on SIGTERM"
    assert proc.returncode == 0


def test_a_directory_outside_a_checkpoint_root_is_never_removed(home):
    elsewhere = home / "data"
    proc = _start(home, "print('ok')", directory=elsewhere)
    proc.communicate(timeout=60)
    assert proc.returncode == 0 and elsewhere.is_dir()


def test_a_missing_program_and_a_missing_work_dir_still_say_so_on_stderr(home):
    missing = subprocess.run(["/bin/bash", "-ic", SCRIPT, "skiff", str(home), "", "keep", "no-such-program-x"],
                             env={"PATH": os.environ["PATH"], "HOME": str(home)}, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=60)
    assert missing.returncode == 127 and b"no-such-program-x: command not found" in missing.stderr
    nowhere = subprocess.run(["/bin/bash", "-ic", SCRIPT, "skiff", str(home / "nope"), "", "keep", "true"],
                             env={"PATH": os.environ["PATH"], "HOME": str(home)}, stdin=subprocess.DEVNULL,
                             capture_output=True, timeout=60)
    assert nowhere.returncode == 1 and b"nope: No such file or directory" in nowhere.stderr
