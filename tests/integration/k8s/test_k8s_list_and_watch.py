"""``list_and_watch`` against kubesim over HTTP, through the real ``kubernetes_asyncio`` client, with
kubesim's fault injection standing in for what a real API server does under load or restart:
watches cut by the server, 410 Gone (answer or ERROR event), 5xx, 429 with Retry-After, lines over 64 KiB."""

from __future__ import annotations

import asyncio
import time

import pytest
from kubernetes import client

from kubesim.testing import async_api_client, async_wait_until
from operators.k8s import KubeError, RetryPolicy, list_and_watch
from operators.k8s.resource import Resource

CONFIGMAPS = Resource("v1", "configmaps")
FAST = RetryPolicy(base=0.02, cap=0.1, give_up_after=5.0)


class Mirror:
    """Consumes the generator in the background and keeps what it says the objects are now."""

    def __init__(self, gen) -> None:
        self.objects: dict[str, dict] = {}
        self.types: list[str] = []
        self.error: BaseException | None = None
        self.task = asyncio.create_task(self._run(gen))

    async def _run(self, gen) -> None:
        try:
            async for ev in gen:
                self.types.append(ev.type)
                if ev.type == "SYNC":
                    self.objects = {o["metadata"]["name"]: o for o in ev.items}
                elif ev.type == "DELETED":
                    self.objects.pop(ev.object["metadata"]["name"], None)
                else:
                    self.objects[ev.object["metadata"]["name"]] = ev.object
        except Exception as exc:  # noqa: BLE001 - surfaced to the test
            self.error = exc

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def cm(name: str, value: str = "v") -> dict:
    return {"metadata": {"name": name}, "data": {"k": value}}


@pytest.fixture
def core(k8s):
    return client.CoreV1Api(k8s)


def requests(sim, key: str) -> int:
    return sim.stats()["by_resource"].get(key, 0)


async def test_lists_then_streams_changes_and_resumes_a_cut_watch_without_listing(kubesim, k8s_async, core):
    core.create_namespaced_config_map("default", cm("a"))
    kubesim.reset_stats()
    m = Mirror(list_and_watch(k8s_async, CONFIGMAPS, "default", policy=FAST))
    try:
        await async_wait_until(lambda: "a" in m.objects and kubesim.store.watch_count >= 1)
        core.create_namespaced_config_map("default", cm("b"))
        await async_wait_until(lambda: "b" in m.objects)
        assert kubesim.cut_watches() >= 1  # the server ends the watch (restart, load balancer, timeout)
        core.patch_namespaced_config_map("a", "default", {"data": {"k": "edited"}})  # while no watch is open
        core.delete_namespaced_config_map("b", "default")
        await async_wait_until(lambda: m.objects.get("a", {}).get("data") == {"k": "edited"} and "b" not in m.objects)
        assert m.types.count("SYNC") == 1 and m.error is None  # resumed from its resourceVersion: no re-list
        assert requests(kubesim, "list configmaps") == 1 and requests(kubesim, "watch configmaps") == 2
    finally:
        await m.close()


async def test_410_gone_answer_lists_again(kubesim, k8s_async, core):
    m = Mirror(list_and_watch(k8s_async, CONFIGMAPS, "default", policy=FAST))
    try:
        await async_wait_until(lambda: m.types == ["SYNC"] and kubesim.store.watch_count >= 1)
        kubesim.fail(verb="watch", path="configmaps", status=410, count=1)
        kubesim.cut_watches()
        core.create_namespaced_config_map("default", cm("after-gone"))
        await async_wait_until(lambda: "after-gone" in m.objects)
        assert m.types.count("SYNC") == 2 and m.error is None
    finally:
        await m.close()


@pytest.fixture(scope="module")
def small_history():
    """API-only kubesim keeping only 5 watch events, as an API server whose etcd history was compacted."""
    from kubesim import KubeSim

    sim = KubeSim(history=5, with_cluster=False).start()
    yield sim
    sim.stop()


async def test_410_error_event_after_compaction_lists_again_and_misses_nothing(small_history):
    sim = small_history
    sim.reset()
    core = client.CoreV1Api(sim.api_client())
    async with async_api_client(sim.url) as api:
        m = Mirror(list_and_watch(api, CONFIGMAPS, "default", policy=FAST))
        try:
            await async_wait_until(lambda: m.types == ["SYNC"] and sim.store.watch_count >= 1)
            sim.add_latency(verb="watch", seconds=1.0, count=1)  # the re-watch arrives late...
            sim.cut_watches()
            for i in range(8):  # ...after more changes than the server keeps: it answers an ERROR 410 event
                core.create_namespaced_config_map("default", cm(f"c{i}"))
            await async_wait_until(lambda: len(m.objects) == 8, timeout=15)
            assert m.types.count("SYNC") == 2 and m.error is None
        finally:
            await m.close()


@pytest.fixture(scope="module")
def bookmarking():
    """API-only kubesim keeping 5 watch events and sending a BOOKMARK every 0.2 s on a quiet watch."""
    from kubesim import KubeSim

    sim = KubeSim(history=5, bookmark_interval=0.2, with_cluster=False).start()
    yield sim
    sim.stop()


async def test_bookmarks_keep_a_quiet_watch_resumable_after_compaction(bookmarking):
    """Writes the watch does not see (other labels) compact away the version it started from; the bookmarks
    carry the server's progress, so after a cut it resumes from there: no 410, no re-list."""
    sim = bookmarking
    sim.reset()
    core = client.CoreV1Api(sim.api_client())
    async with async_api_client(sim.url) as api:
        m = Mirror(list_and_watch(api, CONFIGMAPS, "default", label_selector="app=watched", policy=FAST))
        try:
            await async_wait_until(lambda: m.types == ["SYNC"] and sim.store.watch_count >= 1)
            for i in range(8):  # more writes than the server keeps, none of them in the watch's selection
                core.create_namespaced_config_map("default", {"metadata": {"name": f"other-{i}",
                                                                           "labels": {"app": "other"}}})
            target = int(sim.store.resource_version)
            await async_wait_until(lambda: all(w.last_rv >= target for w in sim.store._watches),
                                   what="a bookmark past the writes")
            sim.cut_watches()  # after that bookmark in the stream: the client has read it before the end
            core.create_namespaced_config_map("default", {"metadata": {"name": "w", "labels": {"app": "watched"}}})
            await async_wait_until(lambda: "w" in m.objects)
            assert m.types == ["SYNC", "ADDED"] and m.error is None  # resumed from the bookmark
            assert requests(sim, "list configmaps") == 1
        finally:
            await m.close()


async def test_transient_errors_are_retried_and_a_client_error_raises(kubesim, k8s_async):
    kubesim.fail(verb="list", path="configmaps", status=503, count=3)
    m = Mirror(list_and_watch(k8s_async, CONFIGMAPS, "default", policy=FAST))
    try:
        await async_wait_until(lambda: m.types == ["SYNC"])
        assert requests(kubesim, "list configmaps") == 4
    finally:
        await m.close()
    kubesim.fail(verb="list", path="configmaps", status=403, count=1)
    with pytest.raises(KubeError) as info:
        async for _ in list_and_watch(k8s_async, CONFIGMAPS, "default", policy=FAST):
            pass
    assert info.value.status == 403 and str(info.value).startswith("403 Forbidden: ")


async def test_gives_up_once_failing_for_the_policy_window(kubesim, k8s_async):
    kubesim.fail(verb="list", path="configmaps", status=500, count=None)
    policy = RetryPolicy(base=0.05, cap=0.1, give_up_after=0.5)
    with pytest.raises(KubeError) as info:
        async for _ in list_and_watch(k8s_async, CONFIGMAPS, "default", policy=policy):
            pass
    assert info.value.status == 500 and requests(kubesim, "list configmaps") >= 3


async def test_429_waits_at_least_retry_after(kubesim, k8s_async):
    """kubesim answers 429 with ``Retry-After: 1`` as kube-apiserver's throttling filters do."""
    kubesim.fail(verb="list", path="configmaps", status=429, count=1)
    start = time.monotonic()
    m = Mirror(list_and_watch(k8s_async, CONFIGMAPS, "default", policy=FAST))  # own back-off <= 0.1 s
    try:
        await async_wait_until(lambda: m.types == ["SYNC"])
        assert time.monotonic() - start >= 1.0  # a lower bound: the wait the server asked for
    finally:
        await m.close()


async def test_events_longer_than_aiohttp_line_limit(kubesim, k8s_async, core):
    big = "x" * 300_000  # a watch line of ~300 KB; aiohttp's readline stops at 64 KiB
    m = Mirror(list_and_watch(k8s_async, CONFIGMAPS, "default", policy=FAST))
    try:
        await async_wait_until(lambda: m.types == ["SYNC"] and kubesim.store.watch_count >= 1)
        core.create_namespaced_config_map("default", cm("big", big))
        await async_wait_until(lambda: "big" in m.objects)
        assert m.objects["big"]["data"]["k"] == big and m.error is None
    finally:
        await m.close()
