"""A short soak (devstack/soak.py, ≈2 minutes of faults, one run of 25 training tasks, 5 FederatedLearningJobs and 2
JointInferenceServices edited and losing children, development instances created, stopped and deleted): the same harness as
``make soak`` on the production profile — kubesim failing 20 % of requests and cutting watches, the worker or a
triggerer SIGKILLed and restarted every 40 s — and every invariant of the audit holds afterwards."""
from __future__ import annotations

import pytest

from devstack.soak import SoakConfig, run_soak
from devstack.soak_audit import audit, table
from devstack.testing import _running

pytestmark = [pytest.mark.e2e, pytest.mark.prod, pytest.mark.soak]


@pytest.mark.timeout(900)  # ~4-5 min on the 2-core machine, up to 6 min of settling allowed: not the suite's 300 s
def test_short_soak_keeps_every_invariant(tmp_path):
    for profile in list(_running):   # the soak starts its own stack: never two full Airflows on 2 cores
        _running.pop(profile).stop()
    result = run_soak(SoakConfig(minutes=2, seed=7, faults=0.2, runs=1, kill_every=40, settle_minutes=6,
                                 fl_jobs=5, ji_services=2,
                                 workdir=tmp_path / "soak"))
    rows = audit(result.observed)
    assert len(result.observed.tasks) == 25
    assert result.kills and sum(result.injected.values()) > 0      # faults and kills really happened
    assert len(result.dev_actions) >= 5 and result.observed.tcp_services is not None
    assert len(result.observed.sedna) == 7 and {"edit", "delete"} <= set(result.sedna_actions)
    assert [r.check for r in rows if not r.ok] == [], table(rows)
