"""kubesim's Kueue, rule by rule, through the real `kubernetes` client: the Job integration
(jobframework/defaults.go, reconciler.go, jobs/job/job_controller.go), flavor assignment with taints
(flavorassigner.go) and the minimal preemption set (preemption/preemption.go)."""
from __future__ import annotations

import hashlib

import pytest

from kubesim.testing import sync_api_client, wait_until
from tests.support.kubesim.kueue_objects import QUEUE, Kueue

NS = "default"
ONLINE = "node.netease.com/node-pool"


@pytest.fixture
def kq(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    yield Kueue(api)
    api.close()


def test_a_queued_job_is_created_suspended_with_one_owned_workload(kq):
    """defaults.go ApplyDefaultForSuspend; workload_names.go; reconciler.go: one Workload per Job."""
    kq.flavor("default")
    kq.cluster_queue("cq", [("default", {"cpu": 1})])
    kq.local_queue(NS, "q", "cq")
    job = kq.job(NS, "train", "q", cpu=1, duration="0.3")
    assert job.spec.suspend is True                       # defaulted by the webhook, in the create answer
    wl = wait_until(lambda: kq.workload_of(NS, "train"))
    digest = hashlib.sha1(f"Job\nbatch\ntrain\n{job.metadata.uid}".encode()).hexdigest()[:5]
    assert wl["metadata"]["name"] == f"job-train-{digest}"
    assert wl["metadata"]["ownerReferences"][0]["uid"] == job.metadata.uid
    assert wl["spec"]["queueName"] == "q" and wl["spec"]["podSets"][0]["count"] == 1
    wait_until(lambda: kq.condition(NS, "train", "Finished"), what="workload finished")
    fin = kq.condition(NS, "train", "Finished")
    assert (fin["status"], fin["reason"]) == ("True", "Succeeded")
    assert len(kq.co.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "workloads")["items"]) == 1


def test_finishing_releases_quota_and_deleting_the_job_deletes_its_workload(kq):
    kq.flavor("default")
    kq.cluster_queue("cq", [("default", {"cpu": 1})])
    kq.local_queue(NS, "q", "cq")
    kq.job(NS, "first", "q", cpu=1, duration="0.5")
    kq.wait_running(NS, "first")
    kq.job(NS, "second", "q", cpu=1)
    kq.wait_pending(NS, "second")
    kq.wait_running(NS, "second")                         # admitted once `first` finished
    kq.batch.delete_namespaced_job("second", NS, propagation_policy="Background")
    wait_until(lambda: len(kq.co.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", NS, "workloads")["items"]) == 1, what="second's workload deleted")


def test_without_kueue_installed_a_labelled_job_runs_at_once(kubesim):
    api = sync_api_client(kubesim.url)
    job = Kueue(api).job(NS, "plain", "q", cpu=1)
    assert not job.spec.suspend
    assert (job.metadata.labels or {})[QUEUE] == "q"
    api.close()


def test_flavors_follow_taints_and_start_merges_node_labels(kq):
    """flavorassigner.go: the online flavor's taint keeps untolerating Jobs out; RunWithPodSetsInfo puts
    the flavor's nodeLabels in the Job's nodeSelector, so its pod lands on an online node."""
    taint = {"key": ONLINE, "value": "online", "effect": "NoSchedule"}
    kq.flavor("online", node_labels={ONLINE: "online"}, node_taints=[taint])
    kq.flavor("default")
    kq.cluster_queue("cq", [("online", {"cpu": 4}), ("default", {"cpu": 1})])
    kq.local_queue(NS, "q", "cq")
    toleration = [{"key": ONLINE, "operator": "Equal", "value": "online", "effect": "NoSchedule"}]
    kq.job(NS, "tolerant", "q", cpu=2, tolerations=toleration)
    kq.job(NS, "plain", "q", cpu=1)
    kq.wait_running(NS, "tolerant", "plain")
    assert kq.workload_of(NS, "tolerant")["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "online"}
    assert kq.workload_of(NS, "plain")["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "default"}
    job = kq.batch.read_namespaced_job("tolerant", NS)
    assert job.spec.template.spec.node_selector == {ONLINE: "online"}
    pod = wait_until(lambda: [p for p in kq.core.list_namespaced_pod(NS, label_selector="job-name=tolerant").items
                              if p.spec.node_name])
    assert pod[0].spec.node_name.startswith("online-")
    kq.job(NS, "plain2", "q", cpu=1)
    # the taint as flavorassigner.go checkFlavorForPodSets prints it (`%s` of a corev1.Taint), as in Kueue
    # v0.19.2 flavorassigner_test.go: "untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"
    assert kq.wait_pending(NS, "plain2") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more "
        f"needed, untolerated taint {{{ONLINE} online NoSchedule <nil>}} in flavor online")


def test_preemption_takes_a_minimal_set(kq):
    """preemption.go classicalPreemptions + fillBackWorkloads: candidates are removed lowest priority
    first until the preemptor fits, then added back in reverse while it still fits: l2 (lowest) is
    removed first but is not needed once l1 is gone, so only l1 is preempted."""
    kq.flavor("default")
    kq.priority_class("p100", 100)
    kq.priority_class("p200", 200)
    kq.priority_class("p1000", 1000)
    kq.cluster_queue("cq", [("default", {"cpu": 6})], preemption={"withinClusterQueue": "LowerPriority"})
    kq.local_queue(NS, "q", "cq")
    kq.job(NS, "l1", "q", cpu=4, priority="p200")
    kq.job(NS, "l2", "q", cpu=2, priority="p100")
    kq.wait_running(NS, "l1", "l2")
    kq.job(NS, "high", "q", cpu=4, priority="p1000")
    kq.wait_running(NS, "high")
    assert kq.condition(NS, "l1", "Evicted")["reason"] == "Preempted"
    assert kq.condition(NS, "l2", "Evicted") is None and kq.running(NS, "l2")
