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
from devstack.watchdog import Watchdog, component_of, missing
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
        wait_until(lambda: "triggerer" in dog.restarted, 30, what="the triggerer restarted")
        new = dog.restarted["triggerer"]
        assert new.poll() is None and psutil.Process(new.pid).cmdline()[-1] == "triggerer"
        said = (logs / "watchdog.log").read_text()
        assert "the triggerer exited" in said and f"pid {new.pid}" in said
        assert "the triggerer exited" in capsys.readouterr().err
        # the restarted one is watched too: killed again, started again
        new.kill()
        wait_until(lambda: dog.restarted["triggerer"] is not new, 30, what="the triggerer restarted again")
        assert len(dog.restarts) == 2
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
