"""``queueing: kueue`` misconfigured (issue 28 part 5, the training side), through the operator's execute() as the
DAG runs it, against kubesim over HTTP:

* a cluster that does not serve Kueue's API (kubesim without ``--kueue``): the step fails at once with
  platform_sync's words and fix, and creates no Job;
* a team namespace without its LocalQueue: fails at once, no Job (Kueue would keep the Workload pending with
  "LocalQueue skiff doesn't exist", kueue pkg/controller/core/workload_controller.go);
* a LocalQueue whose ClusterQueue is gone: Kueue says "ClusterQueue nlp doesn't exist" on the Workload; the step
  fails at once saying so and its suspended Job is deleted;
* the file switched back to ``queueing: quota`` while an earlier try's Job waits suspended for Kueue: the retry
  deletes that Job (nothing would ever start it) and runs its own;
* Kueue uninstalled while an earlier try's Job waits suspended: the retry fails at once and deletes that Job.
"""
from __future__ import annotations

import pytest
from kubernetes import client

from kubesim.testing import wait_until
from operators import TrainingJobFailed
from operators.k8s import Kube
from operators.platform import parse_platform
from operators.platform.admission import ADMIT, AdmissionError, Decision
from operators.platform.kueue import queue_labels
from operators.platform.sync import sync_cluster
from tests.support.training.kueue_support import PLATFORM, G, V, logged
from tests.support.training.training_support import JsonFileTaskStateStore, make_context, operator, sim

STEP_JOBS = "skiff.io/job-name"
HOW_TO_FIX = ("Install Kueue v0.19 (helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2 -n "
              "kueue-system --create-namespace), have a cluster admin apply its cluster-wide objects (python -m "
              "operators.rbac teams --platform FILE | kubectl apply -f -), or set queueing: quota in the platform file")
QUOTA_PLATFORM = """\
version: 1
queueing: quota
users: {default_pvc_size: 1Gi}
limit_range: {default_cpu: "1", default_memory: 1Gi}
teams:
  - name: recsys
    allow_online: true
    quota: {cpu: "8", memory: 32Gi, gpu: 4, storage: 20Gi}
    members:
      - {user: alice, email: alice@example.com, role: admin}
images:
  - {name: tf2-cpu, image: "registry.example.com/nb:tf2", default: true}
"""


def jobs(api, namespace: str) -> list:
    return client.BatchV1Api(api).list_namespaced_job(namespace, label_selector=STEP_JOBS).items


def use_platform(tmp_path, monkeypatch, text: str) -> None:
    path = tmp_path / "platform.yaml"
    path.write_text(text)
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(path))


def test_without_kueues_api_the_step_fails_at_once_with_the_fix_and_creates_no_job(k8s, team, tmp_path, monkeypatch):
    use_platform(tmp_path, monkeypatch, PLATFORM)
    # platform_sync says the same words (declared once: operators.platform.kueue.not_served)
    report = sync_cluster(Kube(k8s), parse_platform(PLATFORM, str(tmp_path / "platform.yaml")))
    assert report.errors[0].endswith(HOW_TO_FIX)
    with pytest.raises(AdmissionError) as info:
        operator("nocrd", pod_annotations=sim(0.5)).execute(make_context("nocrd"))
    assert str(info.value) == ("queueing: kueue, but this cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2 "
                               "LocalQueue: 404 Not Found): the step was not started (no Job was created). " + HOW_TO_FIX)
    assert jobs(k8s, team) == []


def test_a_namespace_without_its_local_queue_fails_at_once_and_creates_no_job(kueue_teams):
    api = kueue_teams
    client.CustomObjectsApi(api).delete_namespaced_custom_object(G, V, "nlp", "localqueues", "skiff")
    op = operator("nolq", owner="carol", namespace="nlp", gpu=1, pod_annotations=sim(0.5))
    with pytest.raises(AdmissionError) as info:
        op.execute(make_context("nolq"))
    assert str(info.value) == (
        "queueing: kueue, but namespace nlp has no LocalQueue skiff (Kueue would keep the Job suspended until one "
        "exists): the step was not started (no Job was created). Run the platform_sync DAG, which creates each "
        "team's LocalQueues, or set queueing: quota in the platform file")
    assert jobs(api, "nlp") == []


def test_a_job_whose_cluster_queue_is_gone_fails_at_once_with_kueues_words_and_is_deleted(kueue_teams):
    api = kueue_teams
    client.CustomObjectsApi(api).delete_cluster_custom_object(G, V, "clusterqueues", "nlp")
    wait_until(lambda: "nlp" not in {q["metadata"]["name"] for q in client.CustomObjectsApi(api).list_cluster_custom_object(
        G, V, "clusterqueues")["items"]}, timeout=30, what="ClusterQueue nlp gone")
    op = operator("nocq", owner="carol", namespace="nlp", gpu=1, pod_annotations=sim(0.5), pod_discovery_timeout=5,
                  queue_wait=120)
    lines = logged(op)
    with pytest.raises(TrainingJobFailed) as info:   # without the check: queue_wait, after 120 s
        op.execute(make_context("nocq"))
    assert "Kueue says \"ClusterQueue nlp doesn't exist\" and keeps it suspended until that queue exists" \
        in info.value.reason
    assert "a cluster admin applies the team's ClusterQueue (python -m operators.rbac teams" in info.value.reason
    assert lines.has("Deleted Job nlp/")
    wait_until(lambda: jobs(api, "nlp") == [], timeout=30, what="the suspended Job deleted")


def _left_suspended_by_try_1(task: str, store, k8s, team: str) -> dict:
    """What try 1 of ``task`` created under ``queueing: kueue``: its Job, suspended in LocalQueue skiff, its id in
    the task state store."""
    from operators.training.jobs import TrainingJobs
    from operators.training.operator import task_instance_key

    first = operator(task, pod_annotations=sim(0.5))
    queued = Decision(ADMIT, queue_labels=queue_labels(False, "skiff-scheduled"))
    old = TrainingJobs(None).create(first.build_manifest(task_instance_key(make_context(task, 1, store)), queued))
    store.set(first.external_id_key, old)
    assert client.BatchV1Api(k8s).read_namespaced_job(old["name"], team).spec.suspend is True
    return old


def test_a_retry_after_switching_back_to_quota_deletes_the_job_left_for_kueue_and_runs_its_own(
        k8s, team, tmp_path, monkeypatch, capsys):
    """The earlier try ran under ``queueing: kueue``: its Job is suspended in LocalQueue skiff (on this cluster
    without Kueue no one will ever start it). The file now says ``queueing: quota``; try 2, with try 1's Job in
    its task state store, must not reattach to it."""
    use_platform(tmp_path, monkeypatch, QUOTA_PLATFORM)
    store = JsonFileTaskStateStore(tmp_path / "state.json")
    old = _left_suspended_by_try_1("switched", store, k8s, team)

    retry = operator("switched", pod_annotations=sim(0.5))
    result = retry.execute(make_context("switched", 2, store))   # its own logger: the mixin logs with key=values
    assert result["name"] != old["name"] and result["name"].endswith("-t2")
    assert f"Deleted Job {team}/{old['name']}: an earlier try left it suspended in Kueue's queue" in capsys.readouterr().out
    wait_until(lambda: [j.metadata.name for j in jobs(k8s, team)] == [result["name"]], timeout=30,
               what="only try 2's Job left")
    assert not client.BatchV1Api(k8s).read_namespaced_job(result["name"], team).spec.suspend


async def test_a_queued_follower_that_finds_kueues_api_gone_fails_saying_so(k8s, team, kubesim):
    """Kueue uninstalled while a step waited in its queue: the follower (own watches, as in a worker, and the
    shared informers, as in the triggerer) ends with platform_sync's words instead of a bare 404; the operator
    then deletes the Job (kind "queue")."""
    import asyncio

    from kubesim.testing import async_api_client
    from operators.k8s.informer import Informers
    from operators.training.follow import FollowSettings, follow_job
    from operators.training.naming import TaskInstanceKey

    queued = Decision(ADMIT, queue_labels=queue_labels(False, "skiff-scheduled"))
    settings = FollowSettings(pod_discovery_timeout=20, queued=True)
    informers = Informers(lambda: async_api_client(kubesim.url))
    for i, shared in enumerate((None, informers)):
        manifest = operator(f"gone{i}").build_manifest(TaskInstanceKey("d", f"gone{i}", "r1", 1), queued)
        await asyncio.to_thread(client.BatchV1Api(k8s).create_namespaced_job, team, manifest)
        async with async_api_client(kubesim.url) as api:
            out = await asyncio.wait_for(follow_job(api, team, manifest["metadata"]["name"], settings, lambda _: None,
                                                    informers=shared), 60)
        assert (out["status"], out["kind"]) == ("failed", "queue")
        assert out["reason"] == (
            "queueing: kueue, but this cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2 Workload: 404 Not "
            "Found): the step's suspended Job is deleted (no queue would ever start it). " + HOW_TO_FIX)


def test_a_retry_after_kueue_is_gone_deletes_the_job_left_for_it_and_fails_at_once(
        k8s, team, tmp_path, monkeypatch, capsys):
    """The file still says ``queueing: kueue`` but the cluster no longer serves Kueue's API (uninstalled): try 1's
    Job waits suspended in a queue that no longer exists. Try 2 fails at once, as a first try would, and deletes
    that Job: a later retry after the fix must not find it, and nothing is left suspended for ever."""
    use_platform(tmp_path, monkeypatch, PLATFORM)
    store = JsonFileTaskStateStore(tmp_path / "state.json")
    old = _left_suspended_by_try_1("gone", store, k8s, team)

    with pytest.raises(AdmissionError) as info:
        operator("gone", pod_annotations=sim(0.5)).execute(make_context("gone", 2, store))
    assert str(info.value).startswith("queueing: kueue, but this cluster does not serve Kueue's API")
    assert (f"Deleted Job {team}/{old['name']}: an earlier try left it suspended in Kueue's queue, but no queue can "
            "admit it") in capsys.readouterr().out
    wait_until(lambda: jobs(k8s, team) == [], timeout=30, what="try 1's suspended Job deleted, none created")
