"""devstack.watchdog: a component of ``airflow standalone`` that exits is noticed and restarted, loudly.

``airflow standalone`` (StandaloneCommand.run) starts each component with ``subprocess.Popen(["airflow", cmd])``
and never waits for it: one that exits stays a zombie child. Here a stand-in ``standalone`` does exactly that
with a stand-in ``airflow`` executable (a real process per component, killed with SIGKILL as the OOM killer
would), and the real watchdog watches it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from devstack.stack import _spawn
from devstack.watchdog import ProcessWatchdog, Watchdog, component_of, missing
from kubesim.testing import wait_until

STANDALONE = """
import subprocess, sys, time
for c in ("scheduler", "dag-processor", "triggerer"):
    subprocess.Popen([sys.argv[1], c])  # never waited for, as standalone's SubCommand does
time.sleep(3600)
"""


def test_component_of_reads_both_command_line_shapes():
    assert component_of(["/v/bin/python3", "/v/bin/airflow", "triggerer"]) == "triggerer"
    assert component_of(["airflow api_server -- host:127.0.0.1 port:8080", "", ""]) == "api-server"
    assert component_of(["airflow worker -- LocalExecutor: <idle>"]) is None
    assert component_of(["/v/bin/airflow", "serve-logs"]) is None


def test_missing_is_what_ran_once_and_runs_no_more():
    assert missing({"scheduler", "triggerer"}, {"scheduler"}) == ["triggerer"]
    assert missing({"scheduler"}, {"scheduler", "triggerer"}) == []
    assert missing(set(), set()) == []  # not started yet is not gone


@pytest.fixture
def fake_standalone(tmp_path):
    airflow = tmp_path / "airflow"
    airflow.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(3600)\n")
    airflow.chmod(0o755)
    proc = subprocess.Popen([sys.executable, "-c", STANDALONE, str(airflow)], start_new_session=True)
    try:
        wait_until(lambda: len(psutil.Process(proc.pid).children()) == 3, 30, what="three components")
        yield proc, airflow
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_killed_triggerer_is_restarted_and_the_restart_is_said(fake_standalone, tmp_path, capsys):
    proc, airflow = fake_standalone
    logs = tmp_path / "logs"
    logs.mkdir()
    dog = Watchdog(proc, {"PATH": os.environ["PATH"]}, logs, spawn=_spawn, airflow=str(airflow), interval=0.1)
    assert dog.check() == [] and dog.seen == {"scheduler", "dag-processor", "triggerer"}
    assert dog.restarts == []  # all running: nothing to do
    dog.start()
    try:
        triggerer = next(c for c in psutil.Process(proc.pid).children() if c.cmdline()[-1] == "triggerer")
        triggerer.kill()
        # said once the restart is written (restarted is set before the line: reading the log then races it)
        wait_until(lambda: len(dog.restarts) == 1, 30, what="the triggerer restarted and said so")
        new = dog.restarted["triggerer"]
        assert new.poll() is None and psutil.Process(new.pid).cmdline()[-1] == "triggerer"
        said = (logs / "watchdog.log").read_text()
        assert "the triggerer exited" in said and f"pid {new.pid}" in said
        assert "the triggerer exited" in capsys.readouterr().err
        # the restarted one is watched too: killed again, started again
        new.kill()
        wait_until(lambda: len(dog.restarts) == 2, 30, what="the triggerer restarted again and said so")
        assert dog.restarted["triggerer"] is not new
    finally:
        for p in dog.stop():
            p.kill()
            p.wait()


def test_a_component_that_dies_before_the_first_look_is_restarted_too(fake_standalone, tmp_path):
    """The stack starts the watchdog once its health check saw every component: one dying at once counts."""
    proc, airflow = fake_standalone
    (tmp_path / "logs").mkdir()
    dog = Watchdog(proc, {"PATH": os.environ["PATH"]}, tmp_path / "logs", spawn=_spawn, airflow=str(airflow),
                   interval=0.1)
    next(c for c in psutil.Process(proc.pid).children() if c.cmdline()[-1] == "scheduler").kill()
    dog.start(["scheduler", "dag-processor", "triggerer"])
    try:
        wait_until(lambda: "scheduler" in dog.restarted, 30, what="the scheduler restarted")
    finally:
        for p in dog.stop():
            p.kill()
            p.wait()


def test_the_production_profiles_components_are_restarted_loudly_unless_stopped_on_purpose(tmp_path, capsys):
    """devstack/prod.py runs each component as a process of its own: the ProcessWatchdog restarts one that exits
    unasked (as Kubernetes would restart the chart's pod) and says so; one killed on purpose stays dead."""
    logs = tmp_path / "logs"
    logs.mkdir()
    argv = [sys.executable, "-c", "import time; time.sleep(3600)"]
    procs = {"kubesim": _spawn(argv, logs / "kubesim.log", {})}  # not a component: never restarted
    started = []

    def restart(name):
        procs[name] = _spawn(argv, logs / f"{name}.log", {})
        started.append(name)
        return procs[name]

    for name in ("scheduler-1", "triggerer-1", "triggerer-2"):
        restart(name)
    started.clear()
    dog = ProcessWatchdog(procs, restart, logs, names=lambda: [n for n in procs if n != "kubesim"], interval=0.1)
    dog.start()
    try:
        victim = procs["triggerer-1"]
        victim.kill()  # SIGKILL, as the OOM killer would
        # said once the restart is written (restart() runs before the line: reading the log then races it)
        wait_until(lambda: len(dog.restarts) == 1, 30, what="triggerer-1 restarted and said so")
        assert started == ["triggerer-1"]
        assert procs["triggerer-1"] is not victim and procs["triggerer-1"].poll() is None
        said = (logs / "watchdog.log").read_text()
        assert f"the triggerer-1 exited (code -9): restarted it as pid {procs['triggerer-1'].pid}" in said
        assert "the triggerer-1 exited" in capsys.readouterr().err
        # stopped on purpose (a test's kill, a benchmark's restart): left alone
        dog.expect_exit("triggerer-2")
        procs["triggerer-2"].kill()
        procs["kubesim"].kill()
        procs["triggerer-2"].wait()
        dog.check()
        assert started == ["triggerer-1"] and len(dog.restarts) == 1
    finally:
        dog.stop()
        for p in procs.values():
            p.kill()
            p.wait()
