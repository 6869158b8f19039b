"""kubesim's test API (not part of Kubernetes): injected failures, latency, request counters."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from tests.support.kubesim.fixtures import configmap


def post(url: str, body: dict | None = None):
    req = urllib.request.Request(url, method="POST", data=json.dumps(body or {}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


async def test_fail_next_requests(kube, apisim):
    """fail(verb, path regex, status, count): the next N matching requests get that status with a
    Status body; others and later ones succeed."""
    core = kube.api("CoreV1Api")
    apisim.fail("create", r"/configmaps$", status=503, count=2)
    for _ in range(2):
        status, err = await kube.error(core.create_namespaced_config_map("default", configmap("c")))
        assert status == 503 and err["reason"] == "ServiceUnavailable" and err["kind"] == "Status"
    await core.list_namespaced_config_map("default")
    assert (await core.create_namespaced_config_map("default", configmap("c"))).metadata.name == "c"


async def test_fail_over_http_and_clear(kube, apisim):
    """POST /kubesim/faults does the same over HTTP (for a separate process); DELETE clears rules."""
    core = kube.api("CoreV1Api")
    post(f"{apisim.url}/kubesim/faults", {"verb": "get", "path": "/configmaps/x", "status": 409, "count": None,
                                          "message": "boom"})
    await core.create_namespaced_config_map("default", configmap("x"))
    for _ in range(3):
        status, err = await kube.error(core.read_namespaced_config_map("x", "default"))
        assert (status, err["message"]) == (409, "boom")
    urllib.request.urlopen(urllib.request.Request(f"{apisim.url}/kubesim/faults", method="DELETE"), timeout=10)
    assert (await core.read_namespaced_config_map("x", "default")).metadata.name == "x"


async def test_lost_answer_is_committed_but_never_arrives(kube, apisim):
    """POST /kubesim/lost (lose_answers in-process): the request is served, then the connection closes before
    the answer, as when a proxy dies mid-reply; the next one is answered."""
    import aiohttp
    import urllib3

    core = kube.api("CoreV1Api")
    post(f"{apisim.url}/kubesim/lost", {"verb": "create", "path": "/configmaps$", "count": 1})
    with pytest.raises((aiohttp.ClientError, urllib3.exceptions.HTTPError)):  # the async client, the sync one
        await core.create_namespaced_config_map("default", configmap("x"))
    assert (await core.read_namespaced_config_map("x", "default")).metadata.name == "x"  # it was committed
    status, err = await kube.error(core.create_namespaced_config_map("default", configmap("x")))
    assert status == 409 and err["reason"] == "AlreadyExists"


async def test_latency(kube, apisim):
    """add_latency delays matching requests only: a request that does not match leaves the rule in place,
    the matching one takes at least the latency and uses the rule up (count=1), so the next is not delayed."""
    core = kube.api("CoreV1Api")
    await core.create_namespaced_config_map("default", configmap("x"))
    apisim.add_latency("list", r"/configmaps$", seconds=0.6, count=1)
    await core.read_namespaced_config_map("x", "default")            # a get: does not match
    assert [r.count for r in apisim.controls.latencies] == [1]
    start = time.monotonic()
    await core.list_namespaced_config_map("default")
    assert time.monotonic() - start >= 0.6                              # a lower bound: load cannot break it
    assert apisim.controls.latencies == []


async def test_stats_count_requests_and_reset(kube, apisim):
    """GET /kubesim/stats counts requests by verb, path and resource; POST /kubesim/stats/reset zeroes."""
    core = kube.api("CoreV1Api")
    post(f"{apisim.url}/kubesim/stats/reset")
    await core.create_namespaced_config_map("default", configmap("s"))
    for _ in range(3):
        await core.read_namespaced_config_map("s", "default")
    with urllib.request.urlopen(f"{apisim.url}/kubesim/stats", timeout=10) as resp:
        stats = json.loads(resp.read())
    assert stats["total"] == 4
    assert stats["by_verb"] == {"create": 1, "get": 3}
    assert stats["by_path"]["GET /api/v1/namespaces/default/configmaps/s"] == 3
    assert stats["by_resource"]["get configmaps"] == 3
    apisim.reset_stats()
    assert apisim.stats()["total"] == 0


async def test_cut_watches_over_http(kube, apisim):
    """POST /kubesim/watches/cut closes every open watch and says how many."""
    async with kube.watching("CoreV1Api", "list_namespaced_config_map", "default", timeout_seconds=30) as events:
        await kube.api("CoreV1Api").create_namespaced_config_map("default", configmap("w"))
        await events.wait_for(lambda e: len(e) == 1)
        assert post(f"{apisim.url}/kubesim/watches/cut")["closed"] >= 1
        await events.wait_for(lambda e: e.ctx.ended.is_set())   # with timeout_seconds the clients do not resume
    assert events.ctx.error is None


def test_429_says_when_to_retry(apisim):
    """kube-apiserver's max-in-flight and priority-and-fairness filters answer 429 TooManyRequests with a
    ``Retry-After`` header (seconds) and the same in the Status' ``details.retryAfterSeconds``."""
    import urllib.error

    import pytest

    apisim.fail(verb="list", path="/configmaps$", status=429, count=1)
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{apisim.url}/api/v1/namespaces/default/configmaps", timeout=10)
    assert info.value.code == 429 and info.value.headers["Retry-After"] == "1"
    body = json.loads(info.value.read())
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 1


async def test_extra_route_runs_behind_the_middleware(apisim):
    """`ApiServer.routes` (kubesim's extension point, e.g. for a service proxy): a registered path is served
    before the resource paths, counted in the stats, and subject to injected faults like any request."""
    import re

    from aiohttp import web

    async def hello(request, match):
        return web.Response(text=f"hello {match.group(1)}")

    route = (re.compile(r"^/hello/(\w+)$"), hello)
    apisim.api.routes.append(route)
    try:
        with urllib.request.urlopen(f"{apisim.url}/hello/skiff", timeout=10) as resp:
            assert resp.read() == b"hello skiff"
        assert apisim.stats()["by_path"]["GET /hello/skiff"] == 1
        apisim.fail("get", r"^/hello/", status=503)
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"{apisim.url}/hello/skiff", timeout=10)
        assert info.value.code == 503
    finally:
        apisim.api.routes.remove(route)
