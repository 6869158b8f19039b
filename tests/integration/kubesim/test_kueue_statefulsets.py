"""kubesim's Kueue StatefulSet integration through the real `kubernetes` client (kueue v0.19
pkg/controller/jobs/statefulset/, jobs/pod/): pods gated by `kueue.x-k8s.io/admission` until the set's
Workload is admitted; scaled to 0 the quota is released; on borrowed quota the set is reclaimed."""
from __future__ import annotations

import kubernetes
import pytest

from kubesim.testing import sync_api_client, wait_until
from tests.support.kubesim.kueue_objects import Kueue, statefulset, sts_pod, sts_workload

NS = "default"
GATE = "kueue.x-k8s.io/admission"


@pytest.fixture
def kq(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    k = Kueue(api)
    k.flavor("default")
    yield k
    api.close()


def gates(pod):
    return [g.name for g in pod.spec.scheduling_gates or []]


def quota_reason(kq, name):
    wl = sts_workload(kq, NS, name)
    c = next((c for c in ((wl or {}).get("status") or {}).get("conditions") or [] if c["type"] == "QuotaReserved"), None)
    return (c["status"], c["reason"], c["message"]) if c else None


def test_pods_stay_gated_until_admitted_and_scaling_to_zero_releases_quota(kq):
    kq.cluster_queue("cq", [("default", {"cpu": 2})])
    kq.local_queue(NS, "q", "cq")
    statefulset(kq, NS, "one", "q", cpu=2)
    wait_until(lambda: (p := sts_pod(kq, NS, "one")) and p.spec.node_name and not gates(p), what="one scheduled")
    statefulset(kq, NS, "two", "q", cpu=2)
    pod = wait_until(lambda: sts_pod(kq, NS, "two"))
    assert gates(pod) == [GATE] and not pod.spec.node_name
    assert pod.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    wait_until(lambda: (quota_reason(kq, "two") or ("",))[0] == "False", what="two pending")
    assert "insufficient unused quota for cpu in flavor default, 2 more needed" in quota_reason(kq, "two")[2]
    apps = kubernetes.client.AppsV1Api(kq.co.api_client)
    apps.patch_namespaced_stateful_set("one", NS, {"spec": {"replicas": 0}})
    wait_until(lambda: quota_reason(kq, "one") == ("False", "OnHold", "StatefulSet scaled to zero; workload on hold"))
    wait_until(lambda: (p := sts_pod(kq, NS, "two")) and p.spec.node_name and not gates(p), what="two scheduled")
    apps.patch_namespaced_stateful_set("one", NS, {"spec": {"replicas": 1}})
    wait_until(lambda: (quota_reason(kq, "one") or ("", ""))[1] == "Pending", what="one queued again")
    pod = wait_until(lambda: sts_pod(kq, NS, "one"))
    assert gates(pod) == [GATE]


def test_a_set_on_borrowed_quota_is_reclaimed_and_waits_gated(kq):
    kq.priority_class("dev", 100)
    kq.priority_class("online", 3000)
    policy = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    kq.cluster_queue("a", [("default", {"cpu": 2})], cohort="c", preemption=policy)
    kq.cluster_queue("b", [("default", {"cpu": 2})], cohort="c", preemption=policy)
    kq.local_queue(NS, "qa", "a")
    kq.local_queue(NS, "qb", "b")
    statefulset(kq, NS, "notebook", "qb", cpu=4, priority="dev")      # 2 of its 4 CPUs borrowed from a
    wait_until(lambda: (p := sts_pod(kq, NS, "notebook")) and p.spec.node_name, what="notebook scheduled")
    kq.job(NS, "train", "qa", cpu=2, priority="online")
    kq.wait_running(NS, "train")
    wl = sts_workload(kq, NS, "notebook")
    evicted = next(c for c in wl["status"]["conditions"] if c["type"] == "Evicted")
    assert evicted["reason"] == "Preempted" and "reclamation within the cohort" in evicted["message"]
    pod = wait_until(lambda: (p := sts_pod(kq, NS, "notebook")) and gates(p) and p)
    assert not pod.spec.node_name
