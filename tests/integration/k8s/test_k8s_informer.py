"""Shared informers on kubesim over HTTP: what subscribers see, reference counting, a watch that gives up."""

from __future__ import annotations

import pytest
from kubernetes import client

from kubesim.testing import async_api_client, async_wait_until
from operators.k8s import KubeError
from operators.k8s.informer import Informers
from operators.k8s.resource import Resource

CONFIGMAPS = Resource("v1", "configmaps")


def cm(name: str, team: str) -> dict:
    return {"metadata": {"name": name, "labels": {"team": team}}, "data": {"k": "v"}}


def names_in(event) -> set[str]:
    return {o["metadata"]["name"] for o in (event.items if event.type == "SYNC" else [event.object])}


def named(prefix: str):
    return lambda obj: obj["metadata"]["name"].startswith(prefix)


async def test_subscribers_share_one_watch_and_see_only_their_objects(kubesim, k8s):
    core = client.CoreV1Api(k8s)
    core.create_namespaced_config_map("default", cm("a-1", "x"))
    kubesim.reset_stats()
    informers = Informers(lambda: async_api_client(kubesim.url))
    seen_a, seen_b = [], []
    async with informers.subscribe(CONFIGMAPS, "default", "team", named("a-"), seen_a.append) as sub_a:
        await async_wait_until(lambda: [e.type for e in seen_a] == ["SYNC"])  # the first list
        assert [o["metadata"]["name"] for o in seen_a[0].items] == ["a-1"]
        async with informers.subscribe(CONFIGMAPS, "default", "team", named("b-"), seen_b.append):
            core.create_namespaced_config_map("default", cm("b-1", "x"))
            core.create_namespaced_config_map("default", cm("a-2", "x"))
            await async_wait_until(lambda: len(seen_a) == 2 and len(seen_b) == 1)
            assert (seen_b[0].type, seen_b[0].object["metadata"]["name"]) == ("ADDED", "b-1")
            assert informers.watches == 1
        # a late subscriber gets what the cache holds, as ADDED: absence there proves nothing
        late = []
        async with informers.subscribe(CONFIGMAPS, "default", "team", named("a-"), late.append):
            assert sorted((e.type, e.object["metadata"]["name"]) for e in late) == [("ADDED", "a-1"), ("ADDED", "a-2")]
        sub_a.check()
    assert informers.watches == 0
    await async_wait_until(lambda: kubesim.store.watch_count == 0)
    assert kubesim.stats()["by_resource"].get("watch configmaps") == 1


async def test_a_relist_after_410_is_a_sync_of_the_subscribers_objects(kubesim, k8s):
    core = client.CoreV1Api(k8s)
    informers = Informers(lambda: async_api_client(kubesim.url))
    seen = []
    async with informers.subscribe(CONFIGMAPS, "default", None, named("a-"), seen.append):
        await async_wait_until(lambda: seen and kubesim.store.watch_count >= 1)
        kubesim.fail(verb="watch", path="configmaps", status=410, count=1)
        kubesim.cut_watches()
        core.create_namespaced_config_map("default", cm("a-3", "y"))
        # the re-list is a SYNC; a-3 is in it, or arrives as ADDED if it was made after the re-list
        await async_wait_until(lambda: [e.type for e in seen].count("SYNC") == 2
                               and any("a-3" in names_in(e) for e in seen))
    assert all(e.type in ("SYNC", "ADDED") for e in seen)


async def test_a_watch_that_gives_up_fails_its_subscribers_and_the_next_one_starts_afresh(kubesim):
    informers = Informers(lambda: async_api_client(kubesim.url))
    kubesim.fail(verb="list", path="configmaps", status=403, count=1)
    async with informers.subscribe(CONFIGMAPS, "default", None, named(""), [].append) as sub:
        await async_wait_until(lambda: sub.informer.error is not None)
        with pytest.raises(KubeError) as info:
            sub.check()
        assert info.value.status == 403
        seen = []
        async with informers.subscribe(CONFIGMAPS, "default", None, named(""), seen.append) as fresh:
            await async_wait_until(lambda: seen)
            assert fresh.informer is not sub.informer and seen[0].type == "SYNC"
            fresh.check()
    assert informers.watches == 0
