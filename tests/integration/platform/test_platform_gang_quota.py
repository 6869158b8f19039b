"""All or nothing under hard quotas (issue 35): a training step of N workers is checked as the sum of its N pods
against the team's quota before anything is created. One that can never fit is refused; one that does not fit
what is free now fails at once with quota_wait 0, or waits - creating nothing - until all N fit. A ResourceQuota
alone would admit the pods one by one and leave half a gang holding CPUs."""
from __future__ import annotations

import threading

import pytest
from kubernetes import client

from kubesim.testing import wait_until
from operators.platform.admission import AdmissionError
from tests.integration.platform.test_platform_sync import _context, _training, busy_recsys, enforced  # noqa: F401 - fixture


def _nothing(k8s):
    return (not client.BatchV1Api(k8s).list_namespaced_job("recsys").items
            and not client.CoreV1Api(k8s).list_namespaced_service("recsys").items)


@pytest.mark.usefixtures("enforced")
def test_a_gang_beyond_the_quota_is_refused_and_one_short_of_free_room_creates_nothing(k8s):
    """9 workers x 1 CPU against recsys's 8: refused with the sum. With 7 of 8 CPUs in use, 2 x 1 CPU does not
    fit now: quota_wait 0 fails at once saying why, and nothing is created (no Job, no pod, no Service)."""
    with pytest.raises(AdmissionError, match=r"team recsys asks 9 CPU \(9 workers x 1 CPU\), quota 8"):
        _training("big", workers=9, cpu=1).execute(_context("big"))
    busy_recsys(k8s)
    with pytest.raises(AdmissionError, match=r"waits for 2 CPU \(2 workers x 1 CPU\) \(7 of 8 in use\); a step of 2 "
                                             r"workers is started whole or not at all.*nothing was created"):
        _training("short", workers=2, cpu=1).execute(_context("short"))
    assert _nothing(k8s)
    assert [p.metadata.name for p in client.CoreV1Api(k8s).list_namespaced_pod("recsys").items] == ["busy"]


@pytest.mark.usefixtures("enforced")
def test_a_gang_that_waits_for_room_creates_all_its_pods_once_they_fit(k8s, capfd):
    """quota_wait=None: the gang waits before creating anything while the busy pod holds the quota; once it is
    gone, the Job is created and both workers run."""
    core = busy_recsys(k8s)
    out: dict = {}
    runner = threading.Thread(target=lambda: out.setdefault("result", _training(
        "gang", workers=2, cpu=1, quota_wait=None).execute(_context("gang"))))
    runner.start()
    try:
        said: list[str] = []
        wait_until(lambda: said.append(capfd.readouterr().out) or "nothing is created until all 2 fit" in "".join(said),
                   30, what="the gang saying it waits")
        assert _nothing(k8s)          # it waits creating nothing (the quota is re-read every 2 s)
        core.delete_namespaced_pod("busy", "recsys", grace_period_seconds=0)
    finally:
        runner.join(60)
    (job,) = client.BatchV1Api(k8s).list_namespaced_job("recsys").items
    assert job.status.succeeded == 2 and job.status.completed_indexes == "0,1"
