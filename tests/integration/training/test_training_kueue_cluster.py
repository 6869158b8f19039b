"""Queued training steps on kubesim with Kueue, through the operator's execute() and the real clients: a step
that waits for quota says Kueue's words in its log and runs when quota frees; one that outlasts queue_wait is
deleted and fails with Kueue's message."""
from __future__ import annotations

import asyncio
import threading

import pytest
from kubernetes import client

from kubesim.testing import wait_until
from operators import TrainingJobFailed
from tests.support.training.kueue_support import condition, logged, workload_of
from tests.support.training.training_support import make_context, operator, sim


def blocker(api, namespace: str, pods: int, seconds: float, name: str = "blocker", priority: str = "skiff-scheduled",
            wait: bool = True) -> None:
    """A team's Job outside Skiff holding ``pods`` x 4 GPUs (a GPU node each) through Kueue, borrowing what it must."""
    client.BatchV1Api(api).create_namespaced_job(namespace, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "skiff",
                                              "kueue.x-k8s.io/priority-class": priority}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {"metadata": {"annotations": sim(seconds)}, "spec": {
            "restartPolicy": "Never", "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true",
                                                       "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "busybox", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"},
                "limits": {"nvidia.com/gpu": "4"}}}]}}}})
    if wait:
        wait_until(lambda: not client.BatchV1Api(api).read_namespaced_job(name, namespace).spec.suspend, timeout=30,
                   what=f"{name} admitted")


def nlp_step(task_id: str, **kw):
    kw.setdefault("pod_annotations", sim(0.5))
    return operator(task_id, owner="carol", namespace="nlp", gpu=1, pod_discovery_timeout=5, **kw)


def test_a_queued_step_logs_kueues_words_outlasts_pod_discovery_and_runs_when_quota_frees(kueue_teams):
    api = kueue_teams
    blocker(api, "nlp", 2, seconds=20)                  # all 8 GPUs of the cohort (4 of them borrowed)
    op = nlp_step("queued")
    lines = logged(op)
    result = {}
    thread = threading.Thread(target=lambda: result.update(out=op.execute(make_context("queued"))), daemon=True)
    thread.start()
    job = wait_until(lambda: client.BatchV1Api(api).list_namespaced_job(
        "nlp", label_selector="skiff.io/job-name").items, timeout=30, what="the step's Job")[0]
    assert job.spec.suspend is True and job.metadata.labels["kueue.x-k8s.io/queue-name"] == "skiff"
    assert job.metadata.labels["kueue.x-k8s.io/priority-class"] == "skiff-scheduled"
    # said again whenever Kueue's words or the queue's count change: wait for the line with both settled
    said = wait_until(lambda: next((line for line in lines.lines if "is queued in Kueue: couldn't assign flavors" in line
                                    and "(LocalQueue skiff: 1 workload pending)" in line), None),
                      timeout=30, what="Kueue's words with the queue's count")
    # Kueue's own pending message (kubesim.kueue.flavors, as flavorassigner.go words it), not a paraphrase; read
    # from the line, since the Workload's condition moves on once the blocker ends
    assert "insufficient unused quota for nvidia.com/gpu in flavor gpu, 1 more needed" in said
    reserved = condition(workload_of(api, "nlp", job.metadata.name), "QuotaReserved")
    assert reserved["status"] == "True" or reserved["message"] in said
    thread.join(120)
    assert not thread.is_alive() and result["out"]["name"] == job.metadata.name   # waited > pod_discovery_timeout
    assert lines.has(f"Job nlp/{job.metadata.name} succeeded")


def test_queue_wait_deletes_the_job_and_fails_with_kueues_message(kueue_teams):
    api = kueue_teams
    blocker(api, "nlp", 2, seconds=600)
    op = nlp_step("impatient", queue_wait=2)
    with pytest.raises(TrainingJobFailed) as info:
        op.execute(make_context("impatient"))
    assert "within 2s (queue_wait): couldn't assign flavors to pod set main" in info.value.reason
    assert "nvidia.com/gpu" in info.value.reason
    wait_until(lambda: not client.BatchV1Api(api).list_namespaced_job("nlp", label_selector="skiff.io/job-name").items,
               timeout=30, what="the queued Job deleted")


async def test_queued_followers_share_one_workload_watch_and_say_kueues_words_in_their_own_context(
        kueue_teams, kubesim_kueue):
    """In the triggerer: the namespace's Workloads and LocalQueues come through the shared informers (one watch
    each whatever the number of queued tasks), and what a follower says runs in its own context (the
    triggerer routes a line to a task's log by it), not in the informer's."""
    from structlog.contextvars import bind_contextvars, get_contextvars

    from kubesim.testing import async_api_client, async_wait_until
    from operators.k8s.informer import Informers
    from operators.platform.admission import ADMIT, Decision
    from operators.platform.kueue import queue_labels
    from operators.training.follow import FollowSettings, follow_job
    from operators.training.naming import TaskInstanceKey

    api = kueue_teams
    await asyncio.to_thread(blocker, api, "nlp", 2, 8)
    queued = Decision(ADMIT, queue_labels=queue_labels(False, "skiff-scheduled"))
    manifests = [nlp_step(f"q{i}").build_manifest(TaskInstanceKey("shared", f"q{i}", "r1", 1), queued)
                 for i in range(3)]
    for m in manifests:
        await asyncio.to_thread(client.BatchV1Api(api).create_namespaced_job, "nlp", m)
    informers = Informers(lambda: async_api_client(kubesim_kueue.url))
    said: dict[str, list] = {}
    settings = FollowSettings(pod_discovery_timeout=5, queued=True)

    async def follow_as_trigger(k8s_async, trigger_id: int, name: str):
        bind_contextvars(trigger_id=trigger_id)
        return await follow_job(k8s_async, "nlp", name, settings, lambda line: said.setdefault(name, []).append(
            (get_contextvars().get("trigger_id"), line)), informers=informers)

    async with async_api_client(kubesim_kueue.url) as k8s_async:
        tasks = [asyncio.create_task(follow_as_trigger(k8s_async, i, m["metadata"]["name"]))
                 for i, m in enumerate(manifests)]
        await async_wait_until(lambda: len(said) == 3, timeout=30, what="every follower said why it waits")
        kinds = sorted(i.res.plural for i in informers.informers.values())
        assert kinds == ["jobs", "localqueues", "pods", "workloads"]
        results = await asyncio.wait_for(asyncio.gather(*tasks), 120)
    assert [r["status"] for r in results] == ["success"] * 3
    for i, m in enumerate(manifests):
        lines = said[m["metadata"]["name"]]
        assert {tid for tid, _ in lines} == {i}
        assert any("is queued in Kueue: couldn't assign flavors" in line for _, line in lines)


def test_the_deferred_step_hands_the_trigger_its_queue_settings(kueue_teams):
    """Deferrable (the default): the trigger the task defers to follows the Workload too (``queued``), with the
    step's ``queue_wait`` - what the triggerer rebuilds from the serialized trigger."""
    from airflow.sdk.exceptions import TaskDeferred

    from operators.training.trigger import TrainingJobTrigger
    from operators.training.waiting import FollowSettings

    op = nlp_step("deferred", deferrable=True, queue_wait=600)
    with pytest.raises(TaskDeferred) as info:
        op.execute(make_context("deferred"))
    path, kwargs = info.value.trigger.serialize()
    assert path == "operators.training.trigger.TrainingJobTrigger"
    settings = FollowSettings(**TrainingJobTrigger(**kwargs).settings)
    assert settings.queued is True and settings.queue_wait == 600
    job = client.BatchV1Api(kueue_teams).read_namespaced_job(kwargs["name"], "nlp")
    assert job.metadata.labels["kueue.x-k8s.io/queue-name"] == "skiff"
