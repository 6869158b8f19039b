"""End to end on the demo's process nodes (devstack/demo_nodes.yaml: kubesim/kubelet/procrt runs every pod as real
processes): under a real ``airflow standalone``, a step whose command exits 3 fails with exit code 3 and its own
output in the task log. The only e2e module that executes the argv Skiff builds (one stack, ~1 run)."""

from __future__ import annotations

import pytest

# the first module on process_stack starts it as its setup (up to SKIFF_TEST_STACK_START_S, 240 s: 270 s in all at
# load 20), then the run's own 240 s
pytestmark = [pytest.mark.e2e, pytest.mark.own_stack, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def stack(process_stack):
    return process_stack  # devstack.testing: shared with tests/e2e/ui/test_jupyterlab_in_browser.py


def test_a_step_exiting_3_fails_with_exit_code_3_and_its_own_output(stack):
    run_id = stack.trigger("procrt_e2e_exit3")
    assert stack.wait_run("procrt_e2e_exit3", run_id, timeout=240) == "failed"
    log = stack.task_log("procrt_e2e_exit3", run_id, "exit3")
    assert "exit code 3" in log, log[-3000:]
    assert "first real line" in log and "second from " in log, log[-3000:]
