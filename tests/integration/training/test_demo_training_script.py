"""The demo's training scripts (devstack/demo_home/recsys), run as plain processes: preprocess -> train ->
evaluate through files; a SIGTERM mid-epoch saves, the resumed run ends with the very model an uninterrupted run
ends with; TensorBoard reads the event files; the failure demo's arguments really allocate past 1 GiB."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[3] / "devstack" / "demo_home" / "recsys"


def run(script: str, *args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-u", str(SCRIPTS / script), *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, **kw)


@pytest.fixture(scope="module")
def features(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("features")
    done = run("preprocess.py", "--date", "2026-12-03", "--out", str(out), "--samples", "6000")
    assert done.returncode == 0, done.stderr
    assert (out / "train.npz").exists() and (out / "val.npz").exists()
    return out


def train_args(features: Path, model: Path, *extra: str) -> list[str]:
    return ["--features", str(features), "--epochs", "3", "--model-out", str(model), "--batch-size", "64",
            "--log-every", "10", *extra]


def test_train_then_evaluate_through_files_with_progress_lines(features, tmp_path):
    model = tmp_path / "model"
    done = run("train.py", *train_args(features, model), env={"SKIFF_CHECKPOINT_DIR": str(tmp_path / "ckpt")})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    progress = [line for line in lines if line.startswith("epoch ")]
    assert progress[0] == next(line for line in lines if "batch 10/" in line)       # in order, as it trains
    assert [line for line in progress if "done" in line][-1].startswith("epoch 3/3 done")
    metrics = json.loads((model / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3] and metrics["val_auc"] > 0.9
    assert (tmp_path / "ckpt" / "checkpoint.npz").exists()                          # saved each epoch
    evaluated = run("evaluate.py", "--model", str(model), "--min-auc", "0.7")
    assert evaluated.returncode == 0 and "PASS" in evaluated.stdout, evaluated.stdout + evaluated.stderr
    assert json.loads((model / "evaluation.json").read_text())["passed"] is True
    refused = run("evaluate.py", "--model", str(model), "--min-auc", "0.9999")
    assert refused.returncode == 1 and "FAIL" in refused.stdout


def test_tensorboard_reads_the_event_files(features, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    assert run("train.py", *train_args(features, tmp_path / "m", "--tensorboard", str(logdir))).returncode == 0
    events = EventAccumulator(str(logdir))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {"loss", "val_auc"}
    assert [e.step for e in events.Scalars("val_auc")] == [1, 2, 3]
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert [round(e.value, 5) for e in events.Scalars("loss")] == [round(e["loss"], 5) for e in metrics["epochs"]]


def test_sigterm_mid_epoch_saves_and_the_resumed_run_ends_with_the_same_model(features, tmp_path):
    plain = run("train.py", *train_args(features, tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr
    want = json.loads((tmp_path / "plain" / "metrics.json").read_text())["model_sha256"]

    ckpt, model = tmp_path / "ckpt", tmp_path / "resumed"
    env = {**os.environ, "SKIFF_CHECKPOINT_DIR": str(ckpt)}
    proc = subprocess.Popen([sys.executable, "-u", str(SCRIPTS / "train.py"),
                             *train_args(features, model, "--throttle", "0.02")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:                      # wait until it is inside epoch 2, then stop it as Kubernetes does
        if line.startswith("epoch 2/3 batch 20/"):
            proc.send_signal(signal.SIGTERM)
            break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    saved = next(line for line in out.splitlines() if line.startswith("SIGTERM: saved a checkpoint at epoch 2 batch"))
    assert not (model / "model.npz").exists()     # stopped before the end: no model yet
    stopped_at = int(saved.split(" batch ")[1].split()[0])
    assert 20 <= stopped_at < 94                  # mid-epoch (94 batches of 64 rows)

    resumed = run("train.py", *train_args(features, model),
                  env={"SKIFF_CHECKPOINT_DIR": str(ckpt), "SKIFF_RESUME": "1", "SKIFF_PREEMPTIONS": "1"})
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from the checkpoint at epoch 2 batch {stopped_at}" in resumed.stdout
    assert "epoch 1/3 batch" not in resumed.stdout           # epoch 1 is not trained again
    metrics = json.loads((model / "metrics.json").read_text())
    assert metrics["model_sha256"] == want and metrics["resumed"] == 1 and metrics["preemptions"] == 1
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3]


def test_the_failure_demo_arguments_allocate_past_a_gibibyte(tmp_path):
    """training_failure_demo's step: under a 1 GiB limit the allocation cannot succeed (here an address-space
    limit makes it a MemoryError; on a node the memory cgroup makes it the kernel's OOM kill)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))   # room for Python and numpy, not for 4 GiB more

    done = run("train.py", "--hidden", "65536", "--batch-size", "4096", "--epochs", "1", "--samples", "8192",
               "--model-out", str(tmp_path / "too-big"), preexec_fn=limit)
    assert done.returncode != 0
    assert "batch 4096: about 6.00 GiB of activations" in done.stdout
    assert "MemoryError" in done.stderr or "Unable to allocate" in done.stderr


def test_two_steps_writing_the_same_output_at_once_both_succeed(tmp_path, monkeypatch):
    """A scheduled and a manual run of one day both write /root/features/<day>/train.npz: each in a pod of its own,
    where both processes can have the same pid. The demo's atomic write must not share a temporary name between
    them (with ``<path>.tmp-<pid>`` the second renamed the first's file away: FileNotFoundError, a failed try)."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import demo_lib

    path = str(tmp_path / "features" / "train.npz")

    def outer(f):
        f.write(b"first")
        demo_lib.atomic_write(path, lambda g: g.write(b"second"))  # the other pod's write, while this one writes

    demo_lib.atomic_write(path, outer)
    assert Path(path).read_bytes() == b"first"            # the later rename wins, whole
    assert os.listdir(tmp_path / "features") == ["train.npz"]  # no temporary file left behind
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
