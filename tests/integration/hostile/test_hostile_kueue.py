"""Issue 30, class 2: with ``queueing: kueue`` the API server still holds a team to a hard cap.

Kueue manages only what carries its queue label; a pod or Job without it, created with Skiff's ServiceAccount
(any DAG's code runs as it), was held by nothing once the team's ResourceQuota kept only storage. Now the
ResourceQuota caps pod requests at the team's ceiling (``operators.platform.kueue.ceiling``: its queues' nominal
quota plus what they may borrow, at most the cohort's): on kubesim with Kueue installed, a bare pod over it is
refused by the API server's quota admission (403, nothing created: before/after listing), and a Kueue-queued Job
that borrows up to the ceiling is still admitted and started.

Issue 38: and nothing goes around the queues. Skiff's Kueue Configuration (``operators.platform.kueue.
manager_config``, applied by the cluster admin's step) has Kueue manage what a team namespace runs without a
queue name: a bare pod within the ceiling is created but gated, never scheduled; a Job without the label is
suspended and its Workload, naming no LocalQueue, is never admitted.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubesim.testing import sync_api_client, wait_until
from operators.k8s import Kube
from operators.platform import parse_platform
from operators.platform.desired import quota_hard
from operators.platform.sync import sync_cluster
from operators.rbac import apply_manifests, platform_team_manifests

PLATFORM = """\
version: 1
queueing: kueue
limit_range: {default_cpu: "1", default_memory: 1Gi}
teams:
  - name: recsys
    quota: {cpu: "8", memory: 32Gi, storage: 20Gi}
    members: [{user: alice}]
    kueue:
      flavors: {default: {cpu: "8", memory: 32Gi}}
  - name: nlp
    quota: {cpu: "8", memory: 32Gi, storage: 10Gi}
    members: [{user: carol}]
    kueue:
      flavors: {default: {cpu: "8", memory: 32Gi, borrowing_limit: {cpu: "4", memory: 8Gi}}}
      dev: {default: {cpu: "1", memory: 2Gi, borrowing_limit: {cpu: "1", memory: 2Gi}}}
"""


def pod(name: str, cpu: str, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


def listing(core) -> dict:
    return {(p.metadata.namespace, p.metadata.name): p.metadata.uid for p in core.list_pod_for_all_namespaces().items}


@pytest.fixture
def synced(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    platform = parse_platform(PLATFORM, "platform.yaml")
    apply_manifests(Kube(api), platform_team_manifests(platform))
    assert sync_cluster(Kube(api), platform).errors == []
    core = client.CoreV1Api(api)
    wait_until(lambda: (core.read_namespaced_resource_quota("skiff-quota", "nlp").status.hard or {})
               .get("requests.cpu"), what="nlp's quota status published")
    yield platform, api
    api.close()


def test_the_ceiling_is_nominal_plus_what_the_team_may_borrow(synced):
    platform, _api = synced
    # nlp: 8 nominal + 4 it may borrow, its instances' 1 + 1; recsys (no borrowing limit on its queues, its
    # instances' queue included): the cohort's whole 17
    assert quota_hard(platform, platform.team("nlp"))["requests.cpu"] == "14"
    assert quota_hard(platform, platform.team("nlp"))["requests.memory"] == "44Gi"
    assert quota_hard(platform, platform.team("recsys"))["requests.cpu"] == "17"


def test_a_bare_pod_over_the_teams_ceiling_is_refused_by_the_api_server(synced):
    _platform, api = synced
    core = client.CoreV1Api(api)
    before = listing(core)
    with pytest.raises(ApiException) as info:  # 30 CPUs, no queue label: not Kueue's, the quota's
        core.create_namespaced_pod("nlp", pod("miner", "30"))
    assert info.value.status == 403 and "exceeded quota: skiff-quota" in info.value.body, info.value.body
    assert "requests.cpu=30" in info.value.body and "limited: requests.cpu=14" in info.value.body
    assert listing(core) == before  # nothing was created
    small = core.create_namespaced_pod("nlp", pod("small", "2"))  # within the ceiling: created, but Kueue's
    assert ("nlp", "small") in listing(core)
    assert [g.name for g in small.spec.scheduling_gates] == ["kueue.x-k8s.io/admission"]


def test_a_job_without_a_queue_name_is_not_admitted(synced):
    """A 30-CPU Job without Kueue's label in nlp (8 CPUs of its own): suspended at creation by Kueue's
    webhook, its Workload pending in Kueue's words, no pod ever; the same Job with the label is Kueue's as
    before (pending for quota, not for a queue)."""
    _platform, api = synced
    batch, core, co = client.BatchV1Api(api), client.CoreV1Api(api), client.CustomObjectsApi(api)

    def job(name: str, labels: dict) -> dict:
        template = pod("x", "30")
        template["metadata"] = {}
        return {"metadata": {"name": name, "labels": labels}, "spec": {"template": template}}

    assert batch.create_namespaced_job("nlp", job("sneaky", {})).spec.suspend is True

    def pending(name: str) -> str:
        uid = batch.read_namespaced_job(name, "nlp").metadata.uid
        wls = co.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "nlp", "workloads",
                                               label_selector=f"kueue.x-k8s.io/job-uid={uid}")["items"]
        conds = ((wls[0].get("status") or {}).get("conditions") or []) if wls else []
        return next((c["message"] for c in conds if c["type"] == "QuotaReserved" and c["status"] == "False"), "")

    wait_until(lambda: pending("sneaky") == "LocalQueue  doesn't exist", what="sneaky's Workload pending")
    batch.create_namespaced_job("nlp", job("queued", {"kueue.x-k8s.io/queue-name": "skiff"}))
    wait_until(lambda: "insufficient unused quota" in pending("queued") or "couldn't assign flavors" in
               pending("queued"), what="queued waits for quota")
    assert batch.read_namespaced_job("sneaky", "nlp").spec.suspend is True
    assert not core.list_namespaced_pod("nlp", label_selector="job-name in (sneaky,queued)").items


def test_a_queued_job_borrowing_up_to_the_ceiling_still_runs(synced):
    """The cap never stops what Kueue admits: nlp's 12-CPU Job (8 own + 4 borrowed) is admitted and its pod
    created under the quota."""
    _platform, api = synced
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    template = pod("x", "12")
    template["metadata"] = {"annotations": {"kubesim.io/duration": "600"}}
    batch.create_namespaced_job("nlp", {"metadata": {"name": "big", "labels": {
        "kueue.x-k8s.io/queue-name": "skiff", "kueue.x-k8s.io/priority-class": "skiff-scheduled"}},
        "spec": {"template": template}})
    wait_until(lambda: not batch.read_namespaced_job("big", "nlp").spec.suspend, what="big admitted")
    wait_until(lambda: core.list_namespaced_pod("nlp", label_selector="job-name=big").items, what="big's pod")


def test_a_file_with_teams_ml_and_ml_dev_is_refused_before_anything_is_applied(kubesim_kueue, tmp_path,
                                                                               monkeypatch):
    """Issue 30, class 3, through ``platform_sync``'s own task: team ``ml``'s instances' ClusterQueue ``ml-dev``
    is team ``ml-dev``'s training queue. The file is refused naming file, line and both teams; the cluster is
    untouched (kubesim saw no request at all, every object as before)."""
    from operators.platform import PlatformError
    from operators.platform.dags import run_platform_sync

    text = PLATFORM.replace("name: recsys", "name: ml").replace("name: nlp", "name: ml-dev")
    path = tmp_path / "platform.yaml"
    path.write_text(text)
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(path))
    kubeconfig = kubesim_kueue.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT",
                       f'{{"conn_type": "kubernetes", "extra": {{"kube_config_path": "{kubeconfig}"}}}}')
    api = sync_api_client(kubesim_kueue.url)
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    before = (listing(core), [n.metadata.name for n in core.list_namespace().items],
              co.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"])
    kubesim_kueue.reset_stats()
    with pytest.raises(PlatformError) as info:
        run_platform_sync()
    message = str(info.value)
    assert f"{path}:" in message and "teams[1].name" in message, message
    assert "ClusterQueue 'ml-dev'" in message and "teams[0] ('ml')" in message, message
    assert kubesim_kueue.stats()["total"] == 0
    assert (listing(core), [n.metadata.name for n in core.list_namespace().items],
            co.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"]) == before
    api.close()
