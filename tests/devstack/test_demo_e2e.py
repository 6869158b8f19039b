"""`make demo` as a user runs it: the example pipeline succeeds, the alert arrives, Ctrl-C stops everything."""

import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from devstack.airflow_env import REPO

pytestmark = pytest.mark.e2e


def _accepts(url: str) -> bool:
    host, port = re.match(r"https?://([^:/]+):(\d+)", url).groups()
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def test_demo_runs_the_pipeline_and_ctrl_c_stops_every_process(tmp_path):
    env = {**os.environ, "SKIFF_DEMO_DIR": str(tmp_path / "demo")}
    env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW")}
    proc = subprocess.Popen([sys.executable, "-m", "devstack", "demo"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = []
    deadline = time.monotonic() + 240
    try:
        for line in proc.stdout:  # the demo prints as it goes; stop reading once it waits for Ctrl-C
            out.append(line)
            if "Ctrl-C stops every process" in line or time.monotonic() > deadline:
                break
        text = "".join(out)
        assert "Ctrl-C stops every process" in text, text
        assert re.search(r"training_recommendation_daily run \S+: SUCCESS", text), text
        assert re.search(r"train +success .* ran on node online-gpu-1", text), text  # GPU + online pool
        assert re.search(r"preprocess +success .* ran on node cpu-\d", text), text
        assert "[Skiff] training_failure_demo.train_too_big failed: OOMKilled" in text, text
        stack_part, _, instance_part = text.partition("creates a development instance")
        urls = re.findall(r"(http://\S+:\d+)", stack_part)  # the UI and kubesim, which must answer
        assert len(urls) >= 2 and all(_accepts(u) for u in urls), urls
        # alice's instance, with the addresses ingress-nginx would expose (kubesim runs no containers behind them)
        assert re.search(r"alice's instance recsys/notebook: Running", instance_part), instance_part
        assert re.search(r"ssh +ssh -p 2\d{4} root@", instance_part), instance_part

        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=90)[0]
        assert proc.returncode == 130, rest
        assert "stopped." in rest
        assert not any(_accepts(u) for u in urls), f"still listening after Ctrl-C: {urls}"
    finally:
        if proc.poll() is None:  # a failed assertion: let the demo stop what it started (SIGKILL would orphan it)
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                proc.kill()
