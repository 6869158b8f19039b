"""`queueing: kueue` in the platform file: the Kueue objects it renders (pure), its errors, and platform_sync
applying them to kubesim with Kueue installed, where a team's Job then queues, borrows and is admitted."""
from __future__ import annotations

import pytest
from kubernetes import client

from kubesim.testing import sync_api_client, wait_until
from operators.k8s import Kube
from operators.platform import PlatformError
from operators.platform.desired import cluster_objects, desired_objects, quota_hard
from operators.platform.kueue import queue_shares
from operators.platform.sync import sync_cluster
from operators.rbac import apply_manifests, platform_team_manifests
from tests.support.platform.platform_support import PLATFORM, platform

KUEUE = PLATFORM.replace("version: 1\n", "version: 1\nqueueing: kueue\n").replace(
    "    quota: {cpu: \"3\", memory: 8Gi, storage: 10Gi}\n",
    "    quota: {cpu: \"3\", memory: 8Gi, storage: 10Gi}\n"
    "    kueue:\n"
    "      flavors:\n"
    "        default: {cpu: \"3\", memory: 8Gi, lending_limit: {cpu: \"1\"}}\n"
    "        gpu: {cpu: \"2\", memory: 8Gi, gpu: 1, borrowing_limit: {gpu: 1}}\n"
    "      dev: {default: {cpu: \"1\", memory: 2Gi}}\n")
G, V = "kueue.x-k8s.io", "v1beta2"


def by_name(docs, kind):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def test_kueue_objects_from_the_platform_file():
    p = platform(KUEUE)
    docs = cluster_objects(p)
    flavors = by_name(docs, "ResourceFlavor")
    assert flavors["online"]["spec"] == {
        "nodeLabels": {"node.netease.com/node-pool": "online"},
        "nodeTaints": [{"key": "node.netease.com/node-pool", "value": "online", "effect": "NoSchedule"}]}
    assert flavors["gpu"]["spec"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert flavors["default"]["spec"] == {"nodeLabels": {}, "nodeTaints": []}
    prios = {n: d["value"] for n, d in by_name(docs, "WorkloadPriorityClass").items()}
    assert prios["skiff-online"] > prios["skiff-scheduled"] > prios["skiff-dev"]
    cqs = by_name(docs, "ClusterQueue")
    assert set(cqs) == {"recsys", "recsys-dev", "nlp", "nlp-dev"}
    assert {cq["spec"]["cohortName"] for cq in cqs.values()} == {"skiff"}
    assert cqs["recsys"]["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    assert cqs["recsys-dev"]["spec"]["preemption"]["withinClusterQueue"] == "Never"
    group = cqs["recsys"]["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    # the default split: recsys may use the online pool, has GPUs; its quota is in each pool it may use
    assert [f["name"] for f in group["flavors"]] == ["online", "gpu", "default"]
    gpu = {r["name"]: r for r in group["flavors"][1]["resources"]}
    assert gpu["nvidia.com/gpu"] == {"name": "nvidia.com/gpu", "nominalQuota": "2"}
    nlp = cqs["nlp"]["spec"]["resourceGroups"][0]["flavors"]
    assert [f["name"] for f in nlp] == ["gpu", "default"]
    assert {r["name"]: r for r in nlp[0]["resources"]}["nvidia.com/gpu"] == {
        "name": "nvidia.com/gpu", "nominalQuota": "1", "borrowingLimit": "1"}
    assert {r["name"]: r for r in nlp[1]["resources"]}["cpu"] == {"name": "cpu", "nominalQuota": "3", "lendingLimit": "1"}
    dev = cqs["nlp-dev"]["spec"]["resourceGroups"][0]["flavors"]
    assert [(f["name"], f["resources"][0]["nominalQuota"]) for f in dev] == [("gpu", "0"), ("default", "1")]
    assert cqs["nlp"]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "nlp"}}
    team = next(t for t in desired_objects(p) if t.team == "recsys")
    assert {(d["metadata"]["name"], d["spec"]["clusterQueue"]) for d in team.rest if d["kind"] == "LocalQueue"} == {
        ("skiff", "recsys"), ("skiff-dev", "recsys-dev")}
    # Kueue counts pod requests only: the ResourceQuota keeps storage, object counts and a hard cap on pod
    # requests at the team's ceiling (issue 30): recsys may borrow without limit, so the cohort's whole quota
    assert quota_hard(p, p.team("recsys")) == {"requests.cpu": "30", "requests.memory": "114Gi",
                                               "requests.nvidia.com/gpu": "3", "requests.storage": "20Gi",
                                               "pods": "20", "count/jobs.batch": "4"}


def test_quota_mode_is_todays_behaviour():
    p = platform()
    assert p.queueing == "quota" and cluster_objects(p) == []
    assert quota_hard(p, p.team("nlp"))["requests.cpu"] == "3"
    assert not [d for t in desired_objects(p) for d in t.rest if d["kind"] == "LocalQueue"]


@pytest.mark.parametrize("text, field, message", [
    (PLATFORM.replace("    quota: {cpu: \"3\", memory: 8Gi, storage: 10Gi}\n",
                      "    quota: {cpu: \"3\", memory: 8Gi, storage: 10Gi}\n    kueue: {dev: {default: {cpu: 1}}}\n"),
     "teams[1].kueue", "only with queueing: kueue"),
    (KUEUE.replace("        default: {cpu: \"3\"", "        online: {cpu: \"1\"}\n        default: {cpu: \"3\""),
     "teams[1].kueue.flavors.online", "allow_online"),
    (KUEUE.replace("queueing: kueue", "queueing: slurm"), "queueing", "kueue"),
])
def test_bad_kueue_settings_name_the_field(text, field, message):
    with pytest.raises(PlatformError) as info:
        platform(text)
    assert field in str(info.value) and message in str(info.value)


def test_sync_applies_kueue_objects_and_a_team_job_borrows_idle_quota(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    p = platform(KUEUE)
    # Kueue's cluster-scoped objects are a cluster admin's step: without them the sync says so
    missing = sync_cluster(Kube(api), p)
    assert any(e.startswith("ClusterQueue/nlp: missing") and "python -m operators.rbac teams --platform FILE" in e
               for e in missing.errors), missing.errors
    apply_manifests(Kube(api), platform_team_manifests(p))
    report = sync_cluster(Kube(api), p)
    assert report.errors == []
    co = client.CustomObjectsApi(api)
    assert {c["metadata"]["name"] for c in co.list_cluster_custom_object(G, V, "clusterqueues")["items"]} == {
        "recsys", "recsys-dev", "nlp", "nlp-dev"}
    again = sync_cluster(Kube(api), p)
    assert again.applied == [] and again.errors == []
    # nlp has 3 CPUs in the default flavor; a 5-CPU Job borrows 2 of recsys' idle 8 and is admitted
    batch = client.BatchV1Api(api)
    batch.create_namespaced_job("nlp", {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "big", "labels": {"kueue.x-k8s.io/queue-name": "skiff",
                                               "kueue.x-k8s.io/priority-class": "skiff-scheduled"}},
        "spec": {"template": {"metadata": {"annotations": {"kubesim.io/duration": "600"}}, "spec": {
            "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                      "resources": {"requests": {"cpu": "5", "memory": "1Gi"}}}]}}}})
    wait_until(lambda: not batch.read_namespaced_job("big", "nlp").spec.suspend, what="big admitted")
    usage = wait_until(lambda: (co.get_cluster_custom_object(G, V, "clusterqueues", "nlp").get("status") or {})
                       .get("flavorsReservation"))
    default = next(f for f in usage if f["name"] == "default")
    assert {r["name"]: (r["total"], r["borrowed"]) for r in default["resources"]}["cpu"] == ("5", "2")
    wl = co.list_namespaced_custom_object(G, V, "nlp", "workloads")["items"][0]
    assert wl["spec"]["priorityClassRef"]["name"] == "skiff-scheduled" and wl["spec"]["priority"] == 2000
    # what the page shows per team: nlp borrows 2 CPUs in the default pool, lent by recsys (the only idle
    # nominal quota there besides nlp-dev's 1 CPU, so the 2 are spread 8:1)
    shares = queue_shares(co.list_cluster_custom_object(G, V, "clusterqueues")["items"])
    assert shares["nlp"]["cpu"] == {"nominal": 5.0, "used": 5.0, "borrowed": 2.0, "lent": 0.0}
    assert shares["recsys"]["cpu"]["lent"] == pytest.approx(2 * 8 / 9)
    assert shares["recsys"]["cpu"]["nominal"] == 24.0 and shares["recsys"]["cpu"]["used"] == 0.0
    api.close()


def test_wait_for_pods_ready_goes_into_kueues_configuration_as_kueue_reads_it():
    """kueue.wait_for_pods_ready in the platform file becomes the Configuration's waitForPodsReady (the manager
    ConfigMap the cluster admin applies), which kubesim's Kueue reads with v0.19's defaults for what is left out;
    without it Skiff leaves Kueue's defaults; a bad duration or count is refused naming the field."""
    import yaml

    from kubesim.kueue.config import pods_ready_of
    from operators.rbac import platform_team_manifests

    def configuration(p) -> dict:
        (cm,) = [d for d in platform_team_manifests(p) if d["kind"] == "ConfigMap"
                 and d["metadata"]["name"] == "kueue-manager-config"]
        return yaml.safe_load(cm["data"]["controller_manager_config.yaml"])

    text = KUEUE.replace("queueing: kueue\n", "queueing: kueue\nkueue:\n  wait_for_pods_ready: {timeout: 10m, "
                                              "backoff_limit_count: 3, backoff_base_seconds: 30}\n")
    cfg = configuration(platform(text))
    assert cfg["waitForPodsReady"] == {"timeout": "10m", "requeuingStrategy": {"backoffLimitCount": 3,
                                                                               "backoffBaseSeconds": 30}}
    kueue_reads = pods_ready_of(cfg)
    assert (kueue_reads.timeout, kueue_reads.recovery_timeout, kueue_reads.backoff_limit_count) == (600, 600, 3)
    assert (kueue_reads.backoff_base_seconds, kueue_reads.backoff_max_seconds) == (30, 3600)
    default = configuration(platform(KUEUE))
    assert "waitForPodsReady" not in default and pods_ready_of(default).timeout == 1800
    for bad, field in (("{timeout: ten minutes}", "timeout"), ("{backoff_limit_count: -1}", "backoff_limit_count"),
                       ("{retries: 3}", "retries")):
        with pytest.raises(PlatformError) as info:
            platform(KUEUE.replace("queueing: kueue\n", f"queueing: kueue\nkueue:\n  wait_for_pods_ready: {bad}\n"))
        assert "wait_for_pods_ready" in str(info.value) and field in str(info.value), str(info.value)
