"""Watch: event stream semantics of kube-apiserver, through both clients' Watch helpers."""
from __future__ import annotations

import time

import pytest

from tests.support.kubesim.fixtures import configmap, kube_for, pod


def names(events, etype=None):
    return [o.metadata.name for t, o in events if etype in (None, t)]


async def test_watch_sends_added_modified_deleted(kube):
    """A watch from the current state sends ADDED for existing objects, then ADDED/MODIFIED/DELETED as
    objects change, each carrying the object at its new resourceVersion."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("before"))
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default") as events:
        await events.wait_for(lambda e: names(e) == ["before"])
        await core.create_namespaced_config_map("default", configmap("new"))
        await core.patch_namespaced_config_map("new", "default", {"data": {"k": "2"}})
        await core.delete_namespaced_config_map("before", "default")
        await events.wait_for(lambda e: len(e) == 4)
    assert [(t, o.metadata.name) for t, o in events] == [
        ("ADDED", "before"), ("ADDED", "new"), ("MODIFIED", "new"), ("DELETED", "before")]
    assert events[2][1].data == {"k": "2"}
    rvs = [int(o.metadata.resource_version) for _t, o in events[1:]]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


async def test_watch_all_namespaces(kube):
    """A watch on /api/v1/configmaps sees every namespace; a namespaced watch only its own."""
    core = kube.api("CoreV1Api")
    await core.create_namespace({"metadata": {"name": "w2"}})
    async with kube.watching("CoreV1Api", "list_config_map_for_all_namespaces") as every, \
            kube.watching("CoreV1Api", "list_namespaced_config_map", "w2") as only:
        await core.create_namespaced_config_map("default", configmap("a"))
        await core.create_namespaced_config_map("w2", configmap("b"))
        await every.wait_for(lambda e: sorted(names(e)) == ["a", "b"])
        await only.wait_for(lambda e: names(e) == ["b"])
    assert names(only) == ["b"]


async def test_watch_resume_from_resource_version(kube):
    """resourceVersion=N sends exactly the changes after N (none before it, no synthetic ADDED)."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("old"))
    rv = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", configmap("a"))
    await core.delete_namespaced_config_map("old", "default")
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default",
                             resource_version=rv) as events:
        await events.wait_for(lambda e: len(e) >= 2)
        await core.create_namespaced_config_map("default", configmap("b"))
        await events.wait_for(lambda e: len(e) >= 3)
    assert [(t, o.metadata.name) for t, o in events] == [("ADDED", "a"), ("DELETED", "old"), ("ADDED", "b")]


async def test_watch_rv_zero_sends_current_state_first(kube):
    """resourceVersion=0 (or none): the current objects arrive first as ADDED, then changes."""
    core = kube.api("CoreV1Api")
    for n in ("x", "y"):
        await core.create_namespaced_config_map("default", configmap(n))
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default",
                             resource_version="0") as events:
        await events.wait_for(lambda e: len(e) == 2)
        await core.delete_namespaced_config_map("x", "default")
        await events.wait_for(lambda e: len(e) == 3)
    assert [(t, o.metadata.name) for t, o in events] == [("ADDED", "x"), ("ADDED", "y"), ("DELETED", "x")]


async def test_watch_timeout_seconds_closes_stream(kube):
    """timeoutSeconds: the server ends the stream after that many seconds (the client's loop ends)."""
    start = time.monotonic()
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default",
                             timeout_seconds=1) as events:
        await events.wait_for(lambda e: e.ctx.ended.is_set(), timeout=30)     # the server ended it
    assert time.monotonic() - start >= 0.9     # not before the timeout (a lower bound: load cannot break it)
    assert events.ctx.error is None


async def test_watch_label_selector_and_leaving_objects(kube):
    """A label-selected watch sees only matching objects; an object that stops matching is sent as
    DELETED and one that starts matching as ADDED (as the watch cache does)."""
    core = kube.api("CoreV1Api")
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default",
                             label_selector="team in (a,b),!skip") as events:
        await core.create_namespaced_config_map("default", configmap("m", labels={"team": "a"}))
        await core.create_namespaced_config_map("default", configmap("n", labels={"team": "c"}))
        await core.patch_namespaced_config_map("m", "default", {"metadata": {"labels": {"team": "z"}}})
        await core.patch_namespaced_config_map("n", "default", {"metadata": {"labels": {"team": "b"}}})
        await core.patch_namespaced_config_map("n", "default", {"metadata": {"labels": {"skip": "1"}}})
        await events.wait_for(lambda e: len(e) >= 4)
    assert [(t, o.metadata.name) for t, o in events] == [
        ("ADDED", "m"), ("DELETED", "m"), ("ADDED", "n"), ("DELETED", "n")]


async def test_watch_single_object_by_field_selector(kube):
    """fieldSelector=metadata.name=x watches one object."""
    core = kube.api("CoreV1Api")
    async with kube.watching("CoreV1Api", "list_namespaced_pod", "default",
                             field_selector="metadata.name=one") as events:
        await core.create_namespaced_pod("default", pod("other"))
        await core.create_namespaced_pod("default", pod("one"))
        await core.patch_namespaced_pod("one", "default", {"metadata": {"labels": {"a": "b"}}})
        await events.wait_for(lambda e: len(e) >= 2)
    assert set(names(events)) == {"one"}
    assert [t for t, _ in events][:2] == ["ADDED", "MODIFIED"]


async def test_cut_watch_connections_client_resumes(kube, apisim):
    """Cutting open watch connections ends the streams; both clients' Watch re-connect from the last
    resourceVersion they saw and get later events exactly once."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("first"))
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default") as events:
        await events.wait_for(lambda e: names(e) == ["first"])
        watches_before = apisim.stats()["by_verb"].get("watch", 0)
        assert apisim.cut_watches() >= 1
        await core.create_namespaced_config_map("default", configmap("second"))
        await events.wait_for(lambda e: names(e) == ["first", "second"])
        assert apisim.stats()["by_verb"]["watch"] > watches_before
    assert names(events) == ["first", "second"]


async def test_watch_too_old_resource_version_is_410(flavour, small_sim):
    """A watch from a resourceVersion older than the kept history gets one ERROR event with a 410
    Expired Status (the clients raise ApiException 410); a list at such a version with
    resourceVersionMatch=Exact gets HTTP 410."""
    small_sim.reset()
    async with kube_for(small_sim, flavour) as kube:
        core = kube.api("CoreV1Api")
        first = await core.create_namespaced_config_map("default", configmap("c0"))
        for i in range(1, 10):
            await core.create_namespaced_config_map("default", configmap(f"c{i}"))
        async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default", timeout_seconds=5,
                                 resource_version=first.metadata.resource_version) as events:
            await events.wait_for(lambda e: e.ctx.ended.is_set())
        assert events == [] and events.ctx.error is not None
        assert events.ctx.error.status == 410 and "Expired" in str(events.ctx.error.reason)
        status, body = await kube.error(core.list_namespaced_config_map(
            "default", resource_version=first.metadata.resource_version, resource_version_match="Exact"))
        assert status == 410 and body["reason"] == "Expired"


def test_watch_bookmarks(small_sim):
    """allowWatchBookmarks: the server periodically sends BOOKMARK events carrying only a kind and a
    resourceVersion (the clients use it to resume)."""
    import json
    import urllib.request
    small_sim.reset()
    url = f"{small_sim.url}/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true&timeoutSeconds=1"
    with urllib.request.urlopen(url, timeout=10) as resp:
        lines = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert lines and {ev["type"] for ev in lines} == {"BOOKMARK"}
    assert all(ev["object"]["metadata"]["resourceVersion"] for ev in lines)
    assert lines[0]["object"]["kind"] == "ConfigMap"


def test_bookmarks_carry_the_servers_progress_past_writes_the_watch_does_not_see(small_sim):
    """A BOOKMARK carries the resourceVersion the server has reached (the watch cache sends its own progress),
    not the last event this watcher got: a client resuming from it is not sent back to a version compacted
    away by writes outside its selection."""
    import json
    import urllib.request

    from kubernetes.client import CoreV1Api
    small_sim.reset()
    core = CoreV1Api(small_sim.api_client())
    start = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(3):
        core.create_namespaced_config_map("default", configmap(f"other-{i}", labels={"app": "other"}))
    now = int(core.list_namespaced_config_map("default").metadata.resource_version)
    url = (f"{small_sim.url}/api/v1/namespaces/default/configmaps?watch=1&allowWatchBookmarks=true"
           f"&labelSelector=app%3Dwatched&resourceVersion={start}&timeoutSeconds=1")
    with urllib.request.urlopen(url, timeout=10) as resp:
        lines = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert lines and {ev["type"] for ev in lines} == {"BOOKMARK"}
    assert int(start) < now <= min(int(ev["object"]["metadata"]["resourceVersion"]) for ev in lines)


@pytest.mark.parametrize("value", ["true", "True", "1"])
async def test_watch_param_spellings(apisim, value):
    """`watch=true` (kubernetes), `watch=True` (kubernetes_asyncio) and `watch=1` all start a watch."""
    import json
    import urllib.request
    url = f"{apisim.url}/api/v1/namespaces?watch={value}&timeoutSeconds=1"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("application/json")
        events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert {e["type"] for e in events} == {"ADDED"}
    assert "default" in {e["object"]["metadata"]["name"] for e in events}


async def test_list_continue_token_too_old_is_410(flavour, small_sim):
    """A continue token from before the kept history → 410 Expired (start a new list)."""
    small_sim.reset()
    async with kube_for(small_sim, flavour) as kube:
        core = kube.api("CoreV1Api")
        for i in range(3):
            await core.create_namespaced_config_map("default", configmap(f"c{i}"))
        page = await core.list_namespaced_config_map("default", limit=1)
        for i in range(3, 10):
            await core.create_namespaced_config_map("default", configmap(f"c{i}"))
        status, err = await kube.error(core.list_namespaced_config_map("default", limit=1,
                                                                       _continue=page.metadata._continue))
        assert status == 410 and err["reason"] == "Expired"


async def test_list_at_future_resource_version_is_504(kube):
    """A list at a resourceVersion the server has not reached → 504 `Too large resource version`."""
    core = kube.api("CoreV1Api")
    current = int((await core.list_namespaced_config_map("default")).metadata.resource_version)
    status, err = await kube.error(core.list_namespaced_config_map("default", resource_version=str(current + 1000)))
    assert status == 504 and err["message"].startswith(f"Too large resource version: {current + 1000}")
    assert err["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge"
    listed = await core.list_namespaced_config_map("default", resource_version=str(current))
    assert listed.items == []


def test_client_disconnect_closes_the_watch(apisim):
    """When a watching client goes away the server's watch ends (no leaked watchers)."""
    import socket

    from kubesim.testing import wait_until
    host, port = apisim.url.rsplit("/", 1)[-1].split(":")
    before = apisim.store.watch_count
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(b"GET /api/v1/namespaces?watch=true HTTP/1.1\r\nHost: kubesim\r\n\r\n")
    assert b"200 OK" in sock.recv(4096)
    wait_until(lambda: apisim.store.watch_count == before + 1)
    sock.close()
    wait_until(lambda: apisim.store.watch_count == before)


async def _on_other_thread(fn) -> None:
    """Run `fn` on another thread and wait for it WITHOUT yielding to this loop: what it offered to this loop's
    watches is still in flight (call_soon_threadsafe) when this returns."""
    import threading
    t = threading.Thread(target=fn)
    t.start()
    t.join()


async def test_events_keep_commit_order_when_writers_are_on_other_threads():
    """A watch delivers events in resourceVersion order, and a BOOKMARK never goes ahead of an event still on its
    way to the watch (kube-apiserver's cacher puts a bookmark into the watcher's input channel behind the events
    dispatched before it: apiserver/pkg/storage/cacher/cacher.go `dispatchEvent`, cache_watcher.go
    `nonblockingAdd`). Deterministic: a write on another thread (an in-process test, a benchmark) hands its event
    to the watch's loop; a write on the loop right after it must not overtake it, nor must a close or a bookmark.
    Before the fix the loop's write was queued first (rv 2 before rv 1) and a close dropped the first event."""
    from kubesim.apiserver.registry.store import Store
    store = Store()
    rt = store.registry.lookup("", "v1", "configmaps")

    def create(name):
        return store.create(rt, "default", configmap(name))

    w = store.watch(rt, "default", store.resource_version)
    await _on_other_thread(lambda: create("from-thread"))
    create("on-loop")
    w.close()   # e.g. the server cutting watches: after every event committed before it
    got = []
    while (item := await w.next_raw(5)) is not None:
        got.append((item[1]["metadata"]["name"], item[3]))
    assert [n for n, _ in got] == ["from-thread", "on-loop"]
    assert got[0][1] < got[1][1]

    w = store.watch(rt, "default", store.resource_version)
    await _on_other_thread(lambda: create("again"))
    assert await w.progress() is None
    assert (await w.next_raw(5))[1]["metadata"]["name"] == "again"
    assert await w.progress() == int(store.resource_version)  # everything sent: the bookmark carries the store's
    w.close()
