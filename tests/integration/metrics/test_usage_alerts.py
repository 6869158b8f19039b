"""deploy/monitoring/usage-alerts.yaml (issue 37): the alerts on what pods really use, judged by Debian's
promtool: they check, their unit tests pass (the idle GPU, the step near its memory limit and the idle instance
fire; the busy ones stay silent), and the unit tests fail when a threshold is wrong."""
from __future__ import annotations

import shutil

import pytest

from tests.support.metrics.prometheus_support import MONITORING
from tests.support.metrics.prometheus_support import run_tool as _run


def test_promtool_checks_and_unit_tests_the_usage_alerts(promtool):
    done = _run(promtool, "check", "rules", "usage-alerts.yaml")
    assert done.returncode == 0 and "SUCCESS: 3 rules found" in done.stdout, done.stdout + done.stderr
    done = _run(promtool, "test", "rules", "usage-alerts.test.yaml")
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("wrong", [("< 5\n", "< 1\n"), ("> 0.9\n", "> 0.99\n"), ("< 0.01\n", "< 0.0001\n")],
                         ids=["idle-gpu-threshold", "memory-share", "idle-instance-cpu"])
def test_the_unit_tests_fail_when_a_threshold_is_wrong(promtool, tmp_path, wrong):
    shutil.copy(MONITORING / "usage-alerts.test.yaml", tmp_path)
    rules = (MONITORING / "usage-alerts.yaml").read_text()
    assert wrong[0] in rules
    (tmp_path / "usage-alerts.yaml").write_text(rules.replace(wrong[0], wrong[1], 1))
    assert _run(promtool, "test", "rules", "usage-alerts.test.yaml", cwd=tmp_path).returncode != 0
