"""The Kueue demo reads what happened from the Job's history (``devstack/demo_kueue.py``): Kueue's ``Stopped``
event of a preemption and its ``Started`` events (kueue ``pkg/controller/jobframework/reconciler.go``) stay on the
Job after a suspension that lasted a fraction of a second, when a poll of ``spec.suspend`` sees nothing (issue 36:
``make demo KUEUE=1`` waited 10 minutes for a 0.3 s suspension, then said the story had not happened)."""
from __future__ import annotations

from kubernetes import client

from devstack.demo_kueue import admissions, job_events, preemption, readmitted_after
from kubesim.testing import sync_api_client, wait_until
from tests.support.kubesim.kueue_objects import Kueue

NS = "default"


def test_a_short_preemption_is_read_from_the_jobs_events_after_it_is_over(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    try:
        kq, core = Kueue(api), client.CoreV1Api(api)
        kq.flavor("default")
        kq.priority_class("low", 100)
        kq.priority_class("high", 1000)
        kq.cluster_queue("cq", [("default", {"cpu": 4})], preemption={"withinClusterQueue": "LowerPriority"})
        kq.local_queue(NS, "q", "cq")
        kq.job(NS, "borrower", "q", cpu=4, priority="low")
        kq.wait_running(NS, "borrower")
        events = job_events(core, NS, "borrower")
        assert preemption(events) is None and readmitted_after(events) is None and admissions(events) == 1
        kq.job(NS, "online", "q", cpu=4, priority="high", duration="0.3")   # preempts, then ends at once
        wait_until(lambda: kq.condition(NS, "online", "Finished"), 20, what="the online job finished")
        wait_until(lambda: kq.running(NS, "borrower"), 20, what="the borrower running again")
        assert not kq.suspended(NS, "borrower")   # the state sampled now shows no preemption at all ...
        events = job_events(core, NS, "borrower")
        stopped = preemption(events)                  # ... its history does
        assert stopped is not None and stopped.message.startswith("Preempted to accommodate a workload"), stopped
        assert admissions(events) == 2
        waited = readmitted_after(events)
        assert waited is not None and 0 <= waited < 20, waited
    finally:
        api.close()
