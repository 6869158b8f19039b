"""The sync ``Kube`` against kubesim over HTTP, through the real ``kubernetes`` client, with kubesim's fault
injection: transient answers (500, 503, 429 + Retry-After) and connection resets are sent again under the one
policy of ``operators.k8s.retry``; client errors raise at once; a failing run gives up after the policy's
window; and a create whose answer was lost after the API server committed it is found, never duplicated."""

from __future__ import annotations

import time

import pytest

from operators.k8s import KubeError, RetryPolicy
from operators.k8s.resource import Resource
from operators.k8s.rest import Kube

CONFIGMAPS = Resource("v1", "configmaps")
NS = "default"
FAST = RetryPolicy(base=0.02, cap=0.1, give_up_after=5.0)


def cm(name: str, value: str = "v") -> dict:
    return {"metadata": {"name": name, "labels": {"owner": "test"}}, "data": {"k": value}}


def requests(sim, key: str) -> int:
    return sim.stats()["by_resource"].get(key, 0)


def names(kube: Kube) -> list[str]:
    return sorted(o["metadata"]["name"] for o in kube.list(CONFIGMAPS, NS))


def test_transient_answers_are_sent_again_until_one_passes(kubesim, k8s):
    kubesim.fail(verb="create", path="configmaps", status=503, count=2)
    kubesim.fail(verb="create", path="configmaps", status=500, count=1)
    kube = Kube(k8s, policy=FAST)
    created = kube.create(CONFIGMAPS, NS, cm("a"))
    assert created["metadata"]["name"] == "a" and names(kube) == ["a"]
    assert requests(kubesim, "create configmaps") == 4
    assert kube.retried == {"POST 503": 2, "POST 500": 1}


def test_connection_resets_are_sent_again(kubesim, k8s):
    """kubesim's rate-based ``reset`` closes the connection before serving: no answer at all."""
    kube = Kube(k8s, policy=FAST)
    kube.create(CONFIGMAPS, NS, cm("a"))
    resets = {}
    kubesim.set_faults(0.5, seed=3, kinds=["reset"], verb="create", path="configmaps")
    for i in range(10):
        kube.create(CONFIGMAPS, NS, cm(f"b{i}"))
    resets["POST"] = kubesim.stats()["chaos"]["injected"].get("reset", 0)
    kubesim.set_faults(0.5, seed=4, kinds=["reset"], verb="patch", path="configmaps")
    for i in range(10):
        kube.merge_patch(CONFIGMAPS, NS, "a", {"data": {"k": str(i)}})
    resets["PATCH"] = kubesim.stats()["chaos"]["injected"].get("reset", 0)
    kubesim.clear_faults()
    assert names(kube) == ["a", *(f"b{i}" for i in range(10))]
    assert kube.get(CONFIGMAPS, NS, "a")["data"] == {"k": "9"}
    assert resets["POST"] > 0 and resets["PATCH"] > 0
    assert kube.retried == {"POST no answer": resets["POST"], "PATCH no answer": resets["PATCH"]}


def test_429_waits_at_least_retry_after(kubesim, k8s):
    """kubesim answers 429 with ``Retry-After: 1``; FAST's own back-off would be <= 0.1 s."""
    kubesim.fail(verb="create", path="configmaps", status=429, count=1)
    start = time.monotonic()
    Kube(k8s, policy=FAST).create(CONFIGMAPS, NS, cm("a"))
    assert time.monotonic() - start >= 1.0
    assert requests(kubesim, "create configmaps") == 2


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_client_errors_raise_at_once(kubesim, k8s, status):
    kubesim.fail(verb="patch", path="configmaps", status=status, count=1)
    kube = Kube(k8s, policy=FAST)
    with pytest.raises(KubeError) as info:
        kube.merge_patch(CONFIGMAPS, NS, "a", {"data": {"k": "x"}})
    assert info.value.status == status and requests(kubesim, "patch configmaps") == 1
    assert not kube.retried


def test_gives_up_once_failing_for_the_window_and_starts_afresh_after_a_success(kubesim, k8s):
    kube = Kube(k8s, policy=RetryPolicy(base=0.05, cap=0.1, give_up_after=0.5))
    kubesim.fail(verb="get", path="configmaps", status=503, count=None)
    start = time.monotonic()
    with pytest.raises(KubeError) as info:
        kube.get(CONFIGMAPS, NS, "a")
    assert info.value.status == 503 and time.monotonic() - start >= 0.5
    tried = requests(kubesim, "get configmaps")
    assert tried >= 3
    # the run of failures goes on: the next request of this Kube gives up at its first failure, so a pass of
    # many requests over a cluster that is gone waits the window once, not once per request
    with pytest.raises(KubeError):
        kube.get(CONFIGMAPS, NS, "b")
    assert requests(kubesim, "get configmaps") == tried + 1
    kubesim.clear_faults()
    assert kube.get(CONFIGMAPS, NS, "a") is None  # an answer (404): the run of failures is over
    kubesim.fail(verb="get", path="configmaps", status=500, count=2)
    assert kube.get(CONFIGMAPS, NS, "a") is None and kube.retried["GET 500"] == 2


def test_a_create_whose_answer_was_lost_is_found_not_duplicated(kubesim, k8s):
    """The API server commits the create, then the connection drops before the answer. Sent again, the create
    meets 409 AlreadyExists: ``create`` returns None and the caller reads it by name (as the training operator
    does: ``create(...) or get(...)``), and there is exactly one object."""
    kube = Kube(k8s, policy=FAST)
    kubesim.lose_answers(verb="create", path="configmaps", count=1)
    assert kube.create(CONFIGMAPS, NS, cm("a", "mine")) is None
    assert requests(kubesim, "create configmaps") == 2 and kube.retried == {"POST no answer": 1}
    assert names(kube) == ["a"] and kube.get(CONFIGMAPS, NS, "a")["data"] == {"k": "mine"}


def test_an_unnamed_create_is_sent_again_only_after_429(kubesim, k8s):
    """A POST with generateName sent twice would make two objects: the lost answer shows why it is not sent
    again after a failure that may come after the work was done, only after 429 (answered before any)."""
    kube = Kube(k8s, policy=FAST)
    unnamed = {"metadata": {"generateName": "g-"}, "data": {"k": "v"}}
    kubesim.lose_answers(verb="create", path="configmaps", count=1)
    with pytest.raises(KubeError) as info:
        kube.create(CONFIGMAPS, NS, unnamed)
    assert info.value.status is None and len(names(kube)) == 1  # it was created: sending it again would dup
    kubesim.fail(verb="create", path="configmaps", status=503, count=1)
    with pytest.raises(KubeError) as info:
        kube.create(CONFIGMAPS, NS, unnamed)
    assert info.value.status == 503 and len(names(kube)) == 1
    kubesim.fail(verb="create", path="configmaps", status=429, count=1)
    assert kube.create(CONFIGMAPS, NS, unnamed)["metadata"]["name"].startswith("g-")
    assert len(names(kube)) == 2 and requests(kubesim, "create configmaps") == 4


def test_a_lost_answer_to_a_delete_or_a_patch_is_harmless(kubesim, k8s):
    kube = Kube(k8s, policy=FAST)
    kube.create(CONFIGMAPS, NS, cm("a"))
    kube.create(CONFIGMAPS, NS, cm("b"))
    kubesim.lose_answers(verb="patch", path="configmaps/a", count=1)
    assert kube.merge_patch(CONFIGMAPS, NS, "a", {"data": {"k": "patched"}})["data"] == {"k": "patched"}
    uid = kube.get(CONFIGMAPS, NS, "b")["metadata"]["uid"]
    kubesim.lose_answers(verb="delete", path="configmaps/b", count=1)
    kube.delete(CONFIGMAPS, NS, "b", uid=uid)  # sent again: 404, "already gone"
    assert names(kube) == ["a"]


def test_get_text_returns_the_proxied_body_and_sends_a_503_once(kubesim, k8s):
    """``get_text`` (the idle signal's read through the service proxy): the backend's text as is; a 503 there is
    the program behind the proxy not answering, so it is raised at once, not sent again under the policy."""
    import json

    from kubernetes.client import AppsV1Api, CoreV1Api

    from kubesim.testing import wait_until
    from operators.k8s.resource import SERVICES

    labels = {"app": "web"}
    core = CoreV1Api(k8s)
    core.create_namespaced_service(NS, {"metadata": {"name": "web"}, "spec": {
        "clusterIP": "None", "selector": labels, "ports": [{"name": "http", "port": 8888}]}})
    AppsV1Api(k8s).create_namespaced_stateful_set(NS, {"metadata": {"name": "web"}, "spec": {
        "serviceName": "web", "replicas": 1, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    wait_until(lambda: ((core.read_namespaced_endpoints("web", NS).subsets or [None])[0] or {}) and
               core.read_namespaced_endpoints("web", NS).subsets[0].addresses, 10, what="ready endpoints")
    core.patch_namespaced_pod("web-0", NS, {"metadata": {"annotations": {
        "kubesim.io/http": json.dumps({"8888/metrics": "up 1\n"})}}})
    kube = Kube(k8s, policy=FAST)
    assert kube.get_text(SERVICES, NS, "web:8888", "proxy/metrics") == "up 1\n"
    sent = f"GET /api/v1/namespaces/{NS}/services/web:8888/proxy/other"
    with pytest.raises(KubeError) as info:
        kube.get_text(SERVICES, NS, "web:8888", "proxy/other")
    assert info.value.status == 503 and "connection refused" in str(info.value)
    assert kubesim.stats()["by_path"][sent] == 1 and not kube.retried


def test_a_fork_shares_the_client_and_policy_and_counts_its_own_requests(k8s):
    """What one reconcile pass reports as its requests are its own, however long the caller's Kube has lived;
    its writers get a connection each (urllib3 keeps cpu_count*5 per host by default)."""
    kube = Kube(k8s, policy=FAST)
    names(kube)
    forked = kube.fork(connections=64)
    forked.create(CONFIGMAPS, NS, cm("forked"))
    assert (forked.api, forked.policy, forked.timeout) == (kube.api, kube.policy, kube.timeout)
    assert dict(forked.requests) == {"create configmaps": 1} and dict(kube.requests) == {"list configmaps": 1}
    assert k8s.rest_client.pool_manager.connection_pool_kw["maxsize"] == 64
    assert "forked" in names(kube)
