"""All or nothing under Kueue (issue 35): a step of N workers is one Workload whose pod set has count N, so Kueue
admits all N pods or none. A gang of 3 x 4 GPUs cannot fit the cohort's 8 GPUs: no pod is ever created and the
step fails with Kueue's words after queue_wait; a gang of 2 x 4 GPUs fits (4 borrowed) and runs whole."""
from __future__ import annotations

import threading

import pytest
from kubernetes import client

from kubesim.testing import wait_until
from operators import TrainingJobFailed
from tests.support.training.kueue_support import condition, workload_of
from tests.support.training.training_support import make_context, operator, sim


def _step(task_id: str, workers: int, **kw):
    return operator(task_id, owner="carol", namespace="nlp", gpu=4, workers=workers, pod_annotations=sim(0.5),
                    pod_discovery_timeout=5, **kw)


def _created(api, job: str) -> list[str]:
    return [e.message for e in client.CoreV1Api(api).list_namespaced_event("nlp").items
            if e.involved_object.name == job and e.reason == "SuccessfulCreate"]


def test_a_gang_is_admitted_whole_or_not_at_all(kueue_teams):
    api = kueue_teams
    seen: dict = {}

    def pending_whole():
        jobs = client.BatchV1Api(api).list_namespaced_job("nlp", label_selector="skiff.io/job-name").items
        wl = workload_of(api, "nlp", jobs[0].metadata.name) if jobs else None
        if wl and condition(wl, "QuotaReserved").get("reason") == "Pending":
            seen.update(job=jobs[0].metadata.name, count=wl["spec"]["podSets"][0]["count"],
                        message=condition(wl, "QuotaReserved")["message"])
        return "job" in seen
    out: dict = {}
    runner = threading.Thread(target=lambda: out.update(err=pytest.raises(TrainingJobFailed, _step(
        "big", 3, queue_wait=3).execute, make_context("big"))), daemon=True)
    runner.start()
    wait_until(pending_whole, 30, what="the gang's Workload pending")
    runner.join(60)
    assert seen["count"] == 3 and "nvidia.com/gpu" in seen["message"], seen
    assert "within 3s (queue_wait)" in out["err"].value.reason
    assert _created(api, seen["job"]) == []                     # not one of its pods was ever created
    result = _step("fits", 2).execute(make_context("fits"))
    job = client.BatchV1Api(api).read_namespaced_job(result["name"], "nlp")
    assert job.status.completed_indexes == "0,1" and len(_created(api, result["name"])) == 2
