"""Followers of training Jobs sharing the process's informers (what the triggerer does): one Job watch and
one pod watch per namespace whatever the number of waiting tasks, against kubesim over HTTP, with the watches
cut, answered 410 Gone, and followers joining an informer that is already running."""

from __future__ import annotations

import asyncio

from kubernetes import client

from kubesim.testing import async_api_client, async_wait_until
from operators.k8s.informer import Informers
from operators.training.follow import FollowSettings, follow_job
from operators.training.naming import TaskInstanceKey
from tests.support.training.training_support import NAMESPACE, operator, sim

N = 4


def create_job(k8s, task_id: str, **kwargs) -> str:
    manifest = operator(task_id, **kwargs).build_manifest(TaskInstanceKey("shared", task_id, "r1", 1))
    return client.BatchV1Api(k8s).create_namespaced_job(NAMESPACE, manifest).metadata.name


def watches(kubesim) -> dict[str, int]:
    by = kubesim.stats()["by_resource"]
    return {k: by.get(k, 0) for k in ("watch jobs.batch", "watch pods", "list jobs.batch", "list pods")}


async def follow_all(k8s_async, informers, names, lines):
    return await asyncio.gather(*(
        follow_job(k8s_async, NAMESPACE, name, FollowSettings(), lines.setdefault(name, []).append,
                   informers=informers) for name in names))


async def test_n_followers_in_one_namespace_open_two_watches_not_2n(kubesim, k8s, k8s_async, team):
    names = [create_job(k8s, f"shared{i}", pod_annotations=sim(2, lines=3)) for i in range(N)]
    kubesim.reset_stats()
    informers = Informers(lambda: async_api_client(kubesim.url))
    lines: dict[str, list[str]] = {}
    results = await follow_all(k8s_async, informers, names, lines)
    assert [r["status"] for r in results] == ["success"] * N
    assert watches(kubesim) == {"watch jobs.batch": 1, "watch pods": 1, "list jobs.batch": 1, "list pods": 1}
    for name in names:  # each follower streamed its own pod's log, and only that
        assert [line.split("] ", 1)[1] for line in lines[name]] == ["line 1", "line 2", "line 3"]
        assert all(line.startswith(f"[{name}-") for line in lines[name])
    assert informers.watches == 0  # the last follower out stopped them
    await async_wait_until(lambda: kubesim.store.watch_count == 0)


async def test_shared_watches_survive_cuts_and_410_and_late_joiners(kubesim, k8s, k8s_async, team):
    informers = Informers(lambda: async_api_client(kubesim.url))
    first = create_job(k8s, "early", pod_annotations=sim(4))
    lines: dict[str, list[str]] = {}
    early = asyncio.create_task(follow_all(k8s_async, informers, [first], lines))
    await async_wait_until(lambda: informers.watches == 2 and kubesim.store.watch_count >= 2)
    # a Job created while the informer runs, followed at once: the cache may not have it yet
    late = [create_job(k8s, f"late{i}", pod_annotations=sim(3, lines=3)) for i in range(N - 1)]
    joined = asyncio.create_task(follow_all(k8s_async, informers, late, lines))
    await async_wait_until(lambda: any(lines.get(n) for n in late), timeout=20)
    kubesim.fail(verb="watch", path="jobs", status=410, count=1)  # the resumed Job watch is told Gone
    assert kubesim.cut_watches() >= 2
    results = [*(await early), *(await joined)]
    assert [r["status"] for r in results] == ["success"] * N
    assert watches(kubesim)["list jobs.batch"] >= 2  # the 410 re-listed
    assert informers.watches == 0


async def test_a_job_deleted_while_followed_through_the_shared_watch(kubesim, k8s, k8s_async, team):
    informers = Informers(lambda: async_api_client(kubesim.url))
    keep, gone = create_job(k8s, "keep", pod_annotations=sim(3)), create_job(k8s, "gone", pod_annotations=sim(60))
    task = asyncio.create_task(follow_all(k8s_async, informers, [keep, gone], {}))
    await async_wait_until(lambda: informers.watches == 2 and kubesim.store.watch_count >= 2)
    client.BatchV1Api(k8s).delete_namespaced_job(gone, NAMESPACE, propagation_policy="Background")
    kept, deleted = await asyncio.wait_for(task, timeout=30)
    assert kept["status"] == "success"
    assert (deleted["status"], deleted["kind"]) == ("failed", "deleted")


async def test_triggers_in_one_process_share_the_watches(kubesim, k8s, team):
    """What the triggerer runs: N ``TrainingJobTrigger.run()`` in one event loop, through ``kubernetes_default``."""
    from operators.training.trigger import TrainingJobTrigger

    names = [create_job(k8s, f"trig{i}", pod_annotations=sim(4, lines=4)) for i in range(N)]
    kubesim.reset_stats()

    async def first_event(name):
        async for event in TrainingJobTrigger(namespace=NAMESPACE, name=name).run():
            return event.payload

    runs = asyncio.gather(*(first_event(n) for n in names))
    running = client.CoreV1Api(k8s)

    def all_streaming() -> bool:  # every pod runs and every trigger has its log stream open
        pods = running.list_namespaced_pod(NAMESPACE).items
        logs = kubesim.stats()["by_resource"].get("get pods/log", 0)
        return len(pods) == N and all(p.status.phase == "Running" for p in pods) and logs == N

    # the Job watch opens after its list, which may finish after the pods' streams started (seen in a full run)
    await async_wait_until(lambda: all_streaming() and kubesim.store.watch_count >= 2, timeout=20)
    assert kubesim.store.watch_count == 2  # open now: one Job watch and one pod watch for the namespace
    results = await asyncio.wait_for(runs, timeout=30)
    assert [r["status"] for r in results] == ["success"] * N
    assert watches(kubesim)["watch jobs.batch"] == 1 and watches(kubesim)["watch pods"] == 1


async def test_a_triggerer_restart_leaves_the_job_and_the_new_process_follows_it(kubesim, k8s, k8s_async, team):
    name = create_job(k8s, "restart", pod_annotations=sim(4, lines=4))
    lines: dict[str, list[str]] = {}
    old_process = Informers(lambda: async_api_client(kubesim.url))
    task = asyncio.create_task(follow_all(k8s_async, old_process, [name], lines))
    await async_wait_until(lambda: lines.get(name))  # following: its pod is running and streaming
    task.cancel()  # the triggerer stops (restart, rebalancing): its triggers are cancelled
    await asyncio.gather(task, return_exceptions=True)
    assert old_process.watches == 0
    job = client.BatchV1Api(k8s).read_namespaced_job(name, NAMESPACE)
    assert job.metadata.deletion_timestamp is None and not job.status.succeeded  # still running, untouched
    new_process = Informers(lambda: async_api_client(kubesim.url))
    (result,) = await follow_all(k8s_async, new_process, [name], {})
    assert result["status"] == "success" and result["uid"] == job.metadata.uid


async def test_each_followers_log_lines_are_written_in_its_own_log_context(kubesim, k8s, k8s_async, team):
    """The triggerer sends a log line to a trigger's file by the structlog contextvars its ``run_trigger`` bound
    (``trigger_id``); a pod whose start arrives through the shared informer's watch has its log stream started
    from the informer's task, which runs in the context of whichever trigger started the informer. Seen in the
    e2e: a manual run's pod lines landed in the log of the scheduled run's task that had started the informer."""
    from structlog.contextvars import bind_contextvars, get_contextvars

    manifests = [operator(f"ctx{i}", pod_annotations=sim(3 if i == 0 else 1, lines=3)).build_manifest(
        TaskInstanceKey("shared", f"ctx{i}", "r1", 1)) for i in range(N)]
    names = [m["metadata"]["name"] for m in manifests]
    jobs = client.BatchV1Api(k8s)
    informers = Informers(lambda: async_api_client(kubesim.url))
    seen: dict[str, list] = {}

    async def follow_as_trigger(trigger_id: int, name: str):
        bind_contextvars(trigger_id=trigger_id)  # what run_trigger does, in the trigger's own task
        return await follow_job(k8s_async, NAMESPACE, name, FollowSettings(),
                                lambda line: seen.setdefault(name, []).append(get_contextvars().get("trigger_id")),
                                informers=informers)

    jobs.create_namespaced_job(NAMESPACE, manifests[0])
    first = asyncio.create_task(follow_as_trigger(0, names[0]))  # starts the namespace's informers
    await async_wait_until(lambda: informers.watches == 2 and all(i.synced for i in informers.informers.values()))
    others = [asyncio.create_task(follow_as_trigger(i, names[i])) for i in range(1, N)]
    await async_wait_until(lambda: all(len(i.subscriptions) == N for i in informers.informers.values()))
    for manifest in manifests[1:]:  # created after every follower subscribed: their pods come through the watch
        await asyncio.to_thread(jobs.create_namespaced_job, NAMESPACE, manifest)
    results = await asyncio.gather(first, *others)
    assert [r["status"] for r in results] == ["success"] * N
    assert {name: set(ids) for name, ids in seen.items()} == {name: {i} for i, name in enumerate(names)}
