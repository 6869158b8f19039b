"""kubesim's Kueue waitForPodsReady (kubesim/kueue/podsready.py), through the real `kubernetes` client; each test
says what Kueue v0.19 does:

- the Configuration's defaults (apis/config/v1beta2/defaults.go): on unless the DisableWaitForPodsReady gate is set,
  timeout 30m, recoveryTimeout = timeout ("0s" turns it off), backoff 60 s base, 3600 s cap, no limit;
- a Job whose pods are all ready gets PodsReady True `Started` and is never timed out (reconciler.go
  generatePodsReadyCondition, job_controller.go PodsReady);
- a gang admitted by quota whose pods cannot all run (the nodes hold two of its three pods) keeps PodsReady False
  `WaitForStart`; after `timeout` it is evicted with reason PodsReadyTimeout, its Job suspended (the running pods
  stopped), its quota released, Requeued False; after the backoff (requeueState.requeueAt) Requeued True
  `BackoffFinished` and it is admitted again; past backoffLimitCount requeues it is deactivated
  (workload_controller.go reconcileNotReadyTimeout, triggerDeactivation; workload.go UpdateRequeueState).
"""
from __future__ import annotations

import pytest
import yaml

from kubesim.apimachinery.clock import parse_time
from kubesim.kueue import config
from kubesim.kueue.podsready import backoff_seconds
from kubesim.testing import sync_api_client, wait_until
from tests.support.kubesim.kueue_objects import QUEUE, Kueue

NS = "default"


@pytest.fixture
def kq(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    kq = Kueue(api)
    kq.flavor("default")
    kq.cluster_queue("cq", [("default", {"cpu": 100})])
    kq.local_queue(NS, "q", "cq")
    yield kq
    api.close()


def _configure(kq, wait_for_pods_ready: dict) -> None:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "waitForPodsReady": wait_for_pods_ready}
    kq.core.create_namespaced_config_map("kueue-system", {
        "metadata": {"name": "kueue-manager-config"},
        "data": {"controller_manager_config.yaml": yaml.safe_dump(doc)}})


def _gang(kq, name: str, workers: int, cpu: int, duration: str = "600"):
    """An Indexed Job of `workers` pods of `cpu` CPUs each (the untainted nodes: big-1 and big-2 with 32 CPUs,
    cpu-1 and cpu-2 with 8: two 20-CPU pods run, a third cannot be scheduled)."""
    requests = {"cpu": str(cpu)}
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                     "resources": {"requests": requests, "limits": requests}}]}
    return kq.batch.create_namespaced_job(NS, {"metadata": {"name": name, "labels": {QUEUE: "q"}}, "spec": {
        "completionMode": "Indexed", "completions": workers, "parallelism": workers, "backoffLimit": 0,
        "template": {"metadata": {"annotations": {"kubesim.io/duration": duration}}, "spec": pod}}})


def _cond(kq, name: str, type_: str) -> dict:
    return kq.condition(NS, name, type_) or {}


def test_defaults_and_durations_as_kueue_v0_19_defaults_them():
    """defaults.go: on by default in v0.19 (#11855) with 30m/30m, Eviction, 60 s/3600 s, no limit; the gate turns
    it off; recoveryTimeout "0s" is no recovery timeout; the backoff doubles from the base up to the cap."""
    ready = config.pods_ready_of
    d = ready({})
    assert (d.timeout, d.recovery_timeout, d.block_admission, d.timestamp) == (1800, 1800, False, "Eviction")
    assert (d.backoff_base_seconds, d.backoff_max_seconds, d.backoff_limit_count) == (60, 3600, None)
    assert ready({"featureGates": {"DisableWaitForPodsReady": True}}) is None
    c = ready({"waitForPodsReady": {"timeout": "1m30s", "recoveryTimeout": "0s", "requeuingStrategy": {
        "timestamp": "Creation", "backoffLimitCount": 3, "backoffBaseSeconds": 5, "backoffMaxSeconds": 12}}})
    assert (c.timeout, c.recovery_timeout, c.timestamp, c.backoff_limit_count) == (90, None, "Creation", 3)
    assert [backoff_seconds(n, c) for n in (1, 2, 3, 4)] == [5, 10, 12, 12]
    assert [backoff_seconds(n, d) for n in (1, 2, 7)] == [60, 120, 3600]
    assert (config.go_duration("500ms"), config.go_duration("2h"), config.go_duration("5 m")) == (0.5, 7200, None)


def test_a_job_whose_pods_are_ready_is_started_and_not_timed_out(kq):
    """PodsReady False WaitForStart until the pods run, then True Started "All pods reached readiness and the
    workload is running"; running on past the 5 s timeout, it is never evicted."""
    _configure(kq, {"timeout": "5s"})
    _gang(kq, "fits", 2, 1, duration="8")
    wait_until(lambda: _cond(kq, "fits", "PodsReady").get("status") == "True", 15, what="PodsReady True")
    ready = _cond(kq, "fits", "PodsReady")
    assert (ready["reason"], ready["message"]) == ("Started", "All pods reached readiness and the workload is running")
    wait_until(lambda: _cond(kq, "fits", "Finished").get("status") == "True", 15, what="finished")
    assert not _cond(kq, "fits", "Evicted")
    assert kq.batch.read_namespaced_job("fits", NS).status.succeeded == 2


def test_a_gang_not_all_ready_in_time_is_evicted_requeued_with_backoff_and_deactivated_past_the_limit(kq):
    """3 pods x 20 CPUs: Kueue's quota (100 CPUs) admits the gang, the nodes run two of its pods. After the 2 s
    timeout: Evicted PodsReadyTimeout, Job suspended (its two running pods stopped), quota released, Requeued
    False, requeueState count 1 and requeueAt 1 s later; then Requeued True BackoffFinished and admitted again;
    count 2 after the second timeout (backoff 2 s); the third timeout exceeds backoffLimitCount 2: deactivated."""
    _configure(kq, {"timeout": "2s", "requeuingStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 1}})
    _gang(kq, "big", 3, 20)
    wait_until(lambda: kq.running(NS, "big"), 10, what="the gang admitted and started")
    admitted_at = parse_time(_cond(kq, "big", "Admitted")["lastTransitionTime"])
    waiting = _cond(kq, "big", "PodsReady")
    assert (waiting["status"], waiting["reason"], waiting["message"]) == (
        "False", "WaitForStart", "Not all pods are ready or succeeded")
    wait_until(lambda: kq.batch.read_namespaced_job("big", NS).status.active == 3, 10,
               what="three pods: two run, one cannot be scheduled")

    evicted = wait_until(lambda: _cond(kq, "big", "Evicted").get("status") == "True" and _cond(kq, "big", "Evicted"),
                         15, what="evicted by the PodsReady timeout")
    wl = kq.workload_of(NS, "big")
    assert evicted["reason"] == "PodsReadyTimeout"
    assert evicted["message"] == f"Exceeded the PodsReady timeout {NS}/{wl['metadata']['name']}"
    assert (parse_time(evicted["lastTransitionTime"]) - admitted_at).total_seconds() >= 2
    first = wl["status"]["requeueState"]
    assert first["count"] == 1
    assert (parse_time(first["requeueAt"]) - parse_time(evicted["lastTransitionTime"])).total_seconds() == 1
    requeued = wait_until(lambda: _cond(kq, "big", "Requeued") or None, 10, what="Requeued set")
    assert requeued["reason"] in ("PodsReadyTimeout", "BackoffFinished")
    events = [e.reason for e in kq.core.list_namespaced_event(NS).items if e.involved_object.name == wl["metadata"]["name"]]
    assert "EvictedDueToPodsReadyTimeout" in events

    wait_until(lambda: (kq.workload_of(NS, "big")["status"].get("requeueState") or {}).get("count") == 2, 20,
               what="the second timeout")
    assert (_cond(kq, "big", "Requeued")["status"], _cond(kq, "big", "Requeued")["reason"]) in (
        ("False", "PodsReadyTimeout"), ("True", "BackoffFinished"))
    wait_until(lambda: kq.workload_of(NS, "big")["spec"].get("active") is False, 30, what="deactivated")
    gone = wait_until(lambda: _cond(kq, "big", "Evicted").get("reason", "").startswith("Deactivated")
                      and _cond(kq, "big", "Evicted"), 10, what="evicted as deactivated")
    assert gone["reason"] == "DeactivatedDueToRequeuingLimitExceeded"
    assert gone["message"] == "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    wait_until(lambda: kq.suspended(NS, "big") and not kq.batch.read_namespaced_job("big", NS).status.active, 10,
               what="the Job stopped for good")
    final = kq.workload_of(NS, "big")
    assert "requeueState" not in final["status"] and not _cond(kq, "big", "DeactivationTarget")
    assert _cond(kq, "big", "QuotaReserved")["status"] == "False"


def test_the_backoff_lets_another_workload_take_the_quota(kq):
    """During the backoff the evicted gang is inadmissible: a 20-CPU Job queued behind it (the gang holds all of
    the queue's 60 CPUs) runs while the gang waits out its 30 s backoff."""
    _configure(kq, {"timeout": "1s", "requeuingStrategy": {"backoffBaseSeconds": 30}})
    kq.cluster_queue("small", [("default", {"cpu": 60})])
    kq.local_queue(NS, "sq", "small")
    requests = {"cpu": "20"}
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                     "resources": {"requests": requests, "limits": requests}}]}
    kq.batch.create_namespaced_job(NS, {"metadata": {"name": "gang", "labels": {QUEUE: "sq"}}, "spec": {
        "completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimit": 0,
        "template": {"metadata": {"annotations": {"kubesim.io/duration": "600"}}, "spec": pod}}})
    wait_until(lambda: kq.running(NS, "gang"), 10, what="the gang started")
    kq.batch.create_namespaced_job(NS, {"metadata": {"name": "next", "labels": {QUEUE: "sq"}}, "spec": {
        "template": {"metadata": {"annotations": {"kubesim.io/duration": "600"}}, "spec": pod}}})
    assert kq.wait_pending(NS, "next")                   # the gang holds all 60 CPUs
    wait_until(lambda: kq.running(NS, "next"), 15, what="the next Job admitted once the gang is evicted")
    assert _cond(kq, "gang", "Evicted")["reason"] == "PodsReadyTimeout"
    assert _cond(kq, "gang", "Requeued")["status"] == "False" and kq.suspended(NS, "gang")
