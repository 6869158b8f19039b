"""Development instances in Kueue's queue on kubesim (queueing: kueue): the StatefulSet carries the team's
skiff-dev LocalQueue and priority; stopping it (replicas 0) gives its quota back; an instance running on
borrowed quota is reclaimed before a scheduled step that runs within its team's quota."""
from __future__ import annotations

from kubernetes import client

from kubesim.testing import wait_until
from operators.devinstances import lifecycle, naming
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from operators.platform import load_platform
from tests.support.devinstances.devinstance_support import make_request
from tests.support.training.kueue_support import G, V, condition

QUEUE, PRIO = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"


def instance(api, cpu: int):
    req = make_request(owner="carol", team="nlp", cpu=cpu, memory=2, home_pvc="carol-home",
                       access={"carol-home": "rw"}.get)
    lifecycle.create(Kube(api), req, Settings(), load_platform())
    return client.AppsV1Api(api).read_namespaced_stateful_set(naming.statefulset_name("carol", "nb"), "nlp")


def workload_of_set(api, name: str) -> dict | None:
    items = client.CustomObjectsApi(api).list_namespaced_custom_object(G, V, "nlp", "workloads")["items"]
    return next((w for w in items if any(r["name"] == name and r["kind"] == "StatefulSet"
                                         for r in w["metadata"].get("ownerReferences") or [])), None)


def cpu_used(api, cq: str) -> str:
    usage = (client.CustomObjectsApi(api).get_cluster_custom_object(G, V, "clusterqueues", cq).get("status") or {}
             ).get("flavorsUsage") or []
    default = next((f for f in usage if f["name"] == "default"), {"resources": []})
    return next((r["total"] for r in default["resources"] if r["name"] == "cpu"), "0")


def running_pods(api, selector: str) -> list:
    return [p for p in client.CoreV1Api(api).list_namespaced_pod("nlp", label_selector=selector).items
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp]


def test_an_instance_queues_in_its_dev_queue_and_stopping_it_releases_the_quota(kueue_teams):
    api = kueue_teams
    sts = instance(api, cpu=1)
    assert sts.metadata.labels[QUEUE] == "skiff-dev" and sts.metadata.labels[PRIO] == "skiff-dev"
    assert QUEUE not in sts.spec.selector.match_labels               # the selector is as without Kueue
    wait_until(lambda: cpu_used(api, "nlp-dev") == "1", timeout=30, what="the instance's CPU reserved in nlp-dev")
    wait_until(lambda: running_pods(api, f"{naming.LABEL_INSTANCE}=nb"), timeout=30, what="the instance runs")
    lifecycle.stop(Kube(api), "carol", "nlp", "nb")
    wait_until(lambda: cpu_used(api, "nlp-dev") == "0", timeout=30, what="quota released on stop")
    wl = workload_of_set(api, sts.metadata.name)
    assert condition(wl, "QuotaReserved")["status"] == "False"


def test_an_instance_on_borrowed_quota_is_reclaimed_before_a_scheduled_step_within_quota(kueue_teams):
    api = kueue_teams
    batch = client.BatchV1Api(api)

    def cpu_job(ns: str, name: str, cpu: int) -> None:
        batch.create_namespaced_job(ns, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE: "skiff", PRIO: "skiff-scheduled"}},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": {"kubesim.io/duration": "600"}},
                     "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                              "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}}}]}}}})
        wait_until(lambda: not batch.read_namespaced_job(name, ns).spec.suspend, timeout=30, what=f"{name} admitted")

    cpu_job("nlp", "scheduled", 8)                       # nlp's own 8 CPUs: within its quota
    sts = instance(api, cpu=4)                           # nlp-dev's 1 CPU + 3 borrowed from idle recsys
    wait_until(lambda: cpu_used(api, "nlp-dev") == "4", timeout=30, what="the instance admitted on borrowed CPUs")
    cpu_job("recsys", "reclaim", 8)                      # recsys wants all of its 8: 3 are lent out
    wl = wait_until(lambda: (w := workload_of_set(api, sts.metadata.name)) and condition(w, "Preempted").get(
        "status") == "True" and w, timeout=30, what="the instance preempted")
    assert "reclamation within the cohort" in condition(wl, "Preempted")["message"]
    assert not batch.read_namespaced_job("scheduled", "nlp").spec.suspend     # the step within quota runs on
    assert not batch.read_namespaced_job("reclaim", "recsys").spec.suspend
    wait_until(lambda: not running_pods(api, f"{naming.LABEL_INSTANCE}=nb"), timeout=30, what="instance pod gone")
