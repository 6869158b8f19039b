"""The demo's output when nobody reads it any more (`make demo | tee log` and a Ctrl-C that killed tee): a line
written to the broken pipe must not raise, or the clean-up after it would never run."""

import os
import subprocess
import sys

from devstack.airflow_env import REPO

SCRIPT = """
import sys
from devstack.__main__ import say
say("first line, to a pipe nobody reads")
say("second line")
open(sys.argv[1], "w").write("went on")
"""


def test_say_survives_a_reader_that_is_gone(tmp_path):
    marker = tmp_path / "marker"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write is EPIPE
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(marker)], cwd=REPO, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert marker.read_text() == "went on"
    assert b"BrokenPipeError" not in done.stderr


TTY_SCRIPT = """
from devstack.__main__ import say
say("first line, to a pipe nobody reads")
say("stopped every process the demo started.")
"""


def test_with_the_reader_gone_the_last_lines_reach_the_terminal(tmp_path):
    """`make demo | tee log`, Ctrl-C: tee is dead, the "stopped" line still reaches the user's terminal."""
    import fcntl
    import pty
    import termios

    master, slave = pty.openpty()
    read_end, write_end = os.pipe()
    os.close(read_end)

    def controlling_tty():  # a session of its own whose controlling terminal is the pty (a terminal's job)
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    try:
        done = subprocess.run([sys.executable, "-c", TTY_SCRIPT], cwd=REPO, stdout=write_end, stderr=subprocess.PIPE,
                              preexec_fn=controlling_tty, timeout=120)
        os.set_blocking(master, False)
        seen = b""
        try:
            while chunk := os.read(master, 4096):
                seen += chunk
        except (BlockingIOError, OSError):
            pass
    finally:
        for fd in (write_end, slave, master):
            os.close(fd)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"[demo] first line, to a pipe nobody reads" in seen  # the line whose write found the pipe broken
    assert b"[demo] stopped every process the demo started." in seen


def test_ctrl_c_is_a_clean_end_exit_0_after_the_stack_stopped(monkeypatch, tmp_path, capsys):
    """`make demo` printed "Error 130" after a clean Ctrl-C: the demo's exit status is 0 once it stopped."""
    import devstack.__main__ as demo

    stopped = []

    class InterruptedStack:
        def __init__(self, *a, **kw):
            pass

        def start(self, timeout):
            raise KeyboardInterrupt

        def stop(self):
            stopped.append(True)

    import signal

    monkeypatch.setenv("SKIFF_DEMO_DIR", str(tmp_path))
    monkeypatch.setattr(demo, "Stack", InterruptedStack)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}  # the demo ignores both at the end
    try:
        assert demo.demo(exit_after=True) == 0
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert stopped == [True] and "stopped every process the demo started." in capsys.readouterr().out


def test_a_kueue_story_not_told_is_said_with_its_reason_the_pipeline_stays_a_success_and_the_ui_stays_up(
        monkeypatch, tmp_path, capsys):
    """issue 36: the Kueue part's miss made the demo say "the example pipeline did not succeed" (it had) and stop
    everything; now the miss is said with its reason, after the next steps, and the stack stays up for the UI."""
    import signal

    import devstack.__main__ as demo
    import devstack.demo_setup

    stopped, paused = [], []

    class Stack:
        workdir = home = tmp_path
        airflow_url = kubesim_url = "http://localhost:1"
        kubeconfig, kubeconfigs, maildir, monitoring = tmp_path / "kubeconfig", {}, tmp_path, None

        def __init__(self, *a, **kw):
            pass

        def start(self, timeout):
            pass

        def trigger(self, dag_id, *a, **kw):
            return f"manual__{dag_id}"

        def unpause(self, dag_id):
            pass

        def api(self, method, path):
            return {"dag_runs": [{"dag_run_id": "scheduled__2026-12-03T03:00:00+00:00", "run_type": "scheduled"}]}

        def wait_run(self, dag_id, run_id, timeout):
            return "failed" if dag_id == demo.FAILING else "success"

        def mails(self):
            return [{"To": "alice@example.com", "Subject": "[Skiff] failed"}]

        def task_log(self, dag_id, run_id, task_id, try_number=1):
            return DP_LOG

        def stop(self):
            stopped.append(True)

    def pause():
        paused.append(True)
        raise KeyboardInterrupt

    monkeypatch.setenv("SKIFF_DEMO_DIR", str(tmp_path))
    monkeypatch.setattr(demo, "Stack", Stack)
    for name in ("show_run", "show_dev_instance", "say_users", "say_kubeconfigs"):
        monkeypatch.setattr(demo, name, lambda *a, **kw: None)
    monkeypatch.setattr(demo, "refresh_usage", lambda stack: [])
    monkeypatch.setattr(devstack.demo_setup, "setup_demo", lambda stack: None)
    monkeypatch.setattr(demo, "show_kueue", lambda stack, say, timeout: ["Kueue did not preempt the borrower: why"])
    monkeypatch.setattr(signal, "pause", pause)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert demo.demo(exit_after=False, kueue=True) == 0      # up until Ctrl-C
        out = capsys.readouterr().out
        assert demo.demo(exit_after=True, kueue=True) == 1       # --exit: the miss is the exit status
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert "NOT AS TOLD: Kueue did not preempt the borrower: why" in out, out
    assert out.count("NOT AS TOLD") == 1 and "speed-up on 2 workers" in out, out
    assert "did not succeed" not in out and f"{demo.PIPELINE} run scheduled__2026-12-03T03:00:00+00:00: SUCCESS" in out
    assert paused == [True] and "everything is up" in out and stopped == [True, True]
    assert f"task logs: {tmp_path / 'logs'}" in out, out   # issue 36: .demo/logs holds none; say where they are


DP_LOG = ("[rank 0 w-0-a] bash: cannot set terminal process group (-1): Inappropriate ioctl for device\n"
          "[rank 0 w-0-a] train_dp.py: rank 0 of 2 workers\n[rank 1 w-1-b] train_dp.py: rank 1 of 2 workers\n"
          "[rank 0 w-0-a] rank 0: all 2 workers connected\n[rank 1 w-1-b] rank 1: connected to rank 0 at m:29500\n"
          "[rank 1 w-1-b] rank 1: epoch 1/1 loss 0.2640\n[rank 0 w-0-a] rank 0: trained on 2 worker(s) in 2.0 s\n"
          "speed-up on 2 workers: 1.80x; AUC difference 0.0000 (at most 0.01)")


def test_the_data_parallel_run_shows_both_ranks_and_the_speed_up_and_says_what_is_missing(capsys):
    """show_data_parallel: each rank's first and last task-log line and compare's speed-up; a rank without a line,
    or a run that failed, is a problem the demo says (NOT AS TOLD)."""
    import devstack.__main__ as demo

    class Logs:
        home = "/tmp"

        def __init__(self, text):
            self.text = text

        def task_log(self, dag_id, run_id, task_id, try_number=1):
            return self.text

    assert demo.show_data_parallel(Logs(DP_LOG), "r1", "success") == []
    out = capsys.readouterr().out
    assert "[rank 1 w-1-b] rank 1: connected to rank 0 at m:29500" in out and "rank 0: all 2 workers connected" in out
    assert "rank 0: trained on 2 worker(s)" in out and "rank 1: epoch 1/1" in out and "bash:" not in out
    assert "compare: speed-up on 2 workers: 1.80x" in out
    only_rank_0 = "\n".join(line for line in DP_LOG.splitlines() if "[rank 1 " not in line)
    assert demo.show_data_parallel(Logs(only_rank_0), "r1", "success") == [
        "training_data_parallel.train_two_workers: no line of rank 1 in its task log"]


class PipelineStack:
    """What start_pipeline asks of a stack: unpause, the runs Airflow lists, trigger."""

    def __init__(self, scheduled: bool):
        self.scheduled, self.calls = scheduled, []

    def unpause(self, dag_id):
        self.calls.append(("unpause", dag_id))

    def api(self, method, path):
        runs = [{"dag_run_id": "scheduled__2026-12-03T03:00:00+00:00", "run_type": "scheduled"}]
        return {"dag_runs": runs if self.scheduled else []}

    def trigger(self, dag_id, *a, **kw):
        self.calls.append(("trigger", dag_id))
        return "manual__1"


def test_the_daily_pipeline_runs_once_the_scheduled_run_unpausing_started(capsys):
    """issue 36: triggering the daily pipeline unpaused it, which started its scheduled run too: two runs of one
    day writing the same directories. The demo follows the scheduled run; it triggers only when none appears, and
    says why."""
    import devstack.__main__ as demo

    stack = PipelineStack(scheduled=True)
    assert demo.start_pipeline(stack, wait_s=5) == "scheduled__2026-12-03T03:00:00+00:00"
    assert stack.calls == [("unpause", demo.PIPELINE)]
    assert "the demo follows it" in capsys.readouterr().out
    stack = PipelineStack(scheduled=False)
    assert demo.start_pipeline(stack, wait_s=0.2) == "manual__1"
    assert stack.calls == [("unpause", demo.PIPELINE), ("trigger", demo.PIPELINE)]
    assert "no scheduled run within" in capsys.readouterr().out


TEE_SCRIPT = """
import os, sys, time
from devstack.__main__ import find_tee_files, say
find_tee_files()
say("first line, while tee reads")
while not os.path.exists(sys.argv[1]):   # the test kills tee, then creates this file
    time.sleep(0.05)
say("stopped every process the demo started.")
"""


def test_with_tee_killed_the_last_lines_still_reach_its_file(tmp_path):
    """issue 36: `make demo | tee log`, Ctrl-C: tee dies at once, and the final "stopped every process" line reached
    the terminal but not the file. The demo found tee's file while it lived and adds the lines said after."""
    import signal

    from kubesim.testing import wait_until

    log, go = tmp_path / "demo.log", tmp_path / "go"
    # a terminal's tee takes Ctrl-C's default action; one started from a script run in the background (as CI
    # runs the suite) inherits SIGINT ignored: restore the default, as a terminal would have it
    tee = subprocess.Popen(["tee", str(log)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    demo = subprocess.Popen([sys.executable, "-c", TEE_SCRIPT, str(go)], cwd=REPO, stdout=tee.stdin,
                            stderr=subprocess.PIPE)
    tee.stdin.close()
    try:
        wait_until(lambda: log.exists() and "first line" in log.read_text(), 60, what="tee writing the first line")
        tee.send_signal(signal.SIGINT)     # the terminal's Ctrl-C reaches tee too
        tee.wait(timeout=30)
        go.touch()
        assert demo.wait(timeout=60) == 0, demo.stderr.read().decode()[-2000:]
    finally:
        for p in (tee, demo):
            if p.poll() is None:
                p.kill()
    assert log.read_text().splitlines() == ["[demo] first line, while tee reads",
                                            "[demo] stopped every process the demo started."]


def test_the_usage_lines_say_each_users_gpu_hours_and_the_efficiency_or_why_it_is_not_known():
    """usage_lines: what the page's usage card shows after the demo's extra usage_report run, from its report."""
    import devstack.__main__ as demo

    report = {"by_user": [{"user": "alice", "team": "recsys", "gpu_hours": 0.0167, "cpu_hours": 0.02, "jobs": 7},
                          {"user": "bob", "team": "recsys", "gpu_hours": 0.0, "cpu_hours": 0.01, "jobs": 1}],
              "gpu": {"source": "prometheus", "problem": None, "step_seconds": 300, "by_user": [
                  {"user": "alice", "kind": "training", "efficiency_percent": 90.0},
                  {"user": "alice", "kind": "instance", "efficiency_percent": 0.0},
                  {"user": "", "kind": "sedna", "efficiency_percent": None}]}}
    assert demo.usage_lines(report) == [
        "  GPU-hours per user: alice (recsys) 0.02 h",    # bob held no GPU: no bar on the page either
        "  GPU efficiency (used against held; Prometheus sampled every 5 min, a pod younger than a sample has no row "
        "yet): alice training 90 %; alice instance 0 %; - sedna not measured"]
    unknown = {"by_user": [], "gpu": {"source": None, "problem": "no Prometheus configured ([skiff] prometheus_url)"}}
    assert demo.usage_lines(unknown) == [
        "  GPU-hours per user: none yet (no finished Job held a GPU)",
        "  GPU efficiency: not known: no Prometheus configured ([skiff] prometheus_url)"]
    empty = {"by_user": [], "gpu": {"source": "prometheus", "problem": None, "step_seconds": 300, "by_user": []}}
    assert demo.usage_lines(empty)[1].endswith(": no sample yet")
