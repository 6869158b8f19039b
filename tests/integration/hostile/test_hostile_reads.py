"""Issue 30, class 1: what a user's process serves on port 8888 is read within bounds (bytes and total time).

A real local HTTP server plays the user's Jupyter: it floods (64 KiB chunks for ever) or drips (one byte every
0.2 s for ever); the instance's pod on kubesim forwards its port 8888 there (``kubesim.io/http``
``{"forward": ...}``: kubesim's service proxy streams the answer as kube-apiserver's does). Before the fix the
access layer read the whole body (``resp.data``), so the flood grew the reader without end and the drip kept the
read open for ever, the culler never reaching the instances after it.
"""

from __future__ import annotations

import time
import tracemalloc

import pytest
from kubernetes import client

from operators.devinstances import lifecycle
from operators.devinstances.culler import cull
from operators.devinstances.settings import Settings
from operators.k8s import Kube, rest
from operators.k8s.resource import SERVICES
from tests.support.devinstances.devinstance_support import (
    NS,
    make_request,
    script_activity,
    sts_of,
    wait_ready,
)
from tests.support.hostile import hostile_servers
from tests.support.hostile.hostile_servers import Backend

SETTINGS = Settings(idle_seconds=8 * 3600)
BOUND = rest.ReadBound(max_bytes=256 * 1024, seconds=3.0)  # USER_CONTENT's bytes, a shorter time for the test
MB = 1024 * 1024


@pytest.fixture
def team(k8s) -> str:
    core = client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": NS}})
    for claim in ("alice-home", "bob-home", "user00-home", "user01-home", "datasets"):
        core.create_namespaced_persistent_volume_claim(NS, {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    return NS


def serve_from(k8s, owner: str, backend: Backend, name: str = "nb") -> None:
    hostile_servers.serve_from(k8s, NS, owner, name, backend)


def start(k8s, *owners: str) -> None:
    for owner in owners:
        lifecycle.create(Kube(k8s), make_request(owner=owner), SETTINGS)
    for owner in owners:
        wait_ready(k8s, owner, "nb")


@pytest.mark.parametrize("mode", ["flood", "drip"])
def test_the_access_layer_cuts_a_flooding_or_dripping_answer(k8s, team, mode):
    """``Kube.get_text`` (the one read of user content) stops at the bound's bytes or time with a KubeError
    saying which, holding at most the bound in memory; the backend really flooded (or was still dripping)."""
    backend = Backend(mode)
    try:
        start(k8s, "alice")
        serve_from(k8s, "alice", backend)
        tracemalloc.start()
        try:
            with pytest.raises(rest.KubeError) as info:
                Kube(k8s).get_text(SERVICES, NS, "alice--nb:8888", "proxy/metrics", bound=BOUND)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        backend.close()
    if mode == "flood":
        assert "over 262144 bytes" in str(info.value), info.value
        assert backend.sent > BOUND.max_bytes
    else:
        assert "did not end within 3 s" in str(info.value), info.value
        assert backend.sent >= 2  # it was dripping when the read gave up
    assert peak < 50 * MB, peak


def test_one_flooding_and_one_dripping_instance_never_delay_the_culler(k8s, team):
    """alice's Jupyter floods, bob's drips; user00 and user01 have been idle 9 h. One culler pass stops user00 and
    user01, keeps alice and bob saying why their signal could not be read, holds at most a few MB, and had
    stopped both idle instances while bob's read was still within its bound (the pass does not wait for one slow
    instance before looking at the others: the old pass, one instance after the other in listing order, could
    reach them only once bob's read had been cut at the bound)."""
    def idle_ones_stopped() -> bool:
        return all(sts_of(k8s, o, "nb").spec.replicas == 0 for o in ("user00", "user01"))

    flood, drip = Backend("flood"), Backend("drip", probe=idle_ones_stopped)
    original = rest.USER_CONTENT
    try:
        start(k8s, "alice", "bob", "user00", "user01")
        serve_from(k8s, "alice", flood)
        serve_from(k8s, "bob", drip)
        now = time.time()
        for owner in ("user00", "user01"):
            script_activity(k8s, owner, "nb", now - 9 * 3600)
        rest.USER_CONTENT = BOUND
        tracemalloc.start()
        try:
            summary = cull(Kube(k8s), SETTINGS)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        from kubesim.testing import wait_until

        wait_until(lambda: drip.cut_at is not None, 10, what="the drip's connection closed by the reader")
    finally:
        rest.USER_CONTENT = original
        flood.close()
        drip.close()
    assert sorted(line.split(":")[0] for line in summary["stopped"]) == [f"{NS}/user00--nb", f"{NS}/user01--nb"]
    kept = {line.split(":")[0]: line for line in summary["kept"]}
    assert "over 262144 bytes" in kept[f"{NS}/alice--nb"] and "left running" in kept[f"{NS}/alice--nb"]
    assert "did not end within 3 s" in kept[f"{NS}/bob--nb"], kept
    assert summary["errors"] == []
    assert drip.probed_true_at is not None, "the idle instances were stopped only after bob's drip was cut"
    assert drip.probed_true_at - drip.started < BOUND.seconds, "the idle instances waited for bob's read"
    assert flood.sent > BOUND.max_bytes
    assert peak < 50 * MB, peak


@pytest.fixture
def page(k8s, kube_conn, monkeypatch):
    """The page's API in process (its FastAPI app; Airflow's login given: tests/*/ui/ proves it) as alice, on the
    example platform file whose team recsys alice and bob are in."""
    from operators.auth import Caller, current_user
    from operators.platform import ENV_PLATFORM_FILE, example_path
    from operators.ui import idle_times
    from operators.ui.app import create_app

    monkeypatch.setenv(ENV_PLATFORM_FILE, str(example_path()))
    monkeypatch.setattr(rest, "USER_CONTENT", BOUND)
    idle_times.clear()
    app = create_app()
    app.dependency_overrides[current_user] = lambda: Caller("alice", "token", False, None)
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
    idle_times.clear()


def test_every_page_request_answers_while_an_instance_floods_and_another_drips(k8s, page, monkeypatch):
    """alice's two instances: ``nb`` floods, ``nb2`` drips. Every ``GET /api/instances`` answers 200 (the idle
    reads are off the request path and bounded), the process holds far less than 50 MB more at its peak, and
    once the reads end the rows say why no idle time is known (the bound's words, cut to 200 characters)."""
    from kubernetes import client as k8s_client

    from kubesim.testing import wait_until

    core = k8s_client.CoreV1Api(k8s)
    core.create_namespace({"metadata": {"name": "recsys"}})
    for claim in ("alice-home", "recsys-datasets"):
        core.create_namespaced_persistent_volume_claim("recsys", {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    flood, drip = Backend("flood"), Backend("drip")
    try:
        for name in ("nb", "nb2"):
            lifecycle.create(Kube(k8s), make_request(owner="alice", name=name, home_pvc="alice-home"), SETTINGS)
        for name in ("nb", "nb2"):
            wait_ready(k8s, "alice", name)
        for name, backend in (("nb", flood), ("nb2", drip)):
            serve_from(k8s, "alice", backend, name)
        tracemalloc.start()
        answers = []
        try:
            def rows():
                r = page.get("/api/instances")
                answers.append(r.status_code)
                return {row["name"]: row["idle_detail"] or "" for row in r.json()["instances"]}

            done = wait_until(lambda: (lambda d: d if "over 262144 bytes" in d.get("nb", "")
                                       and "did not end within 3 s" in d.get("nb2", "") else None)(rows()),
                              timeout=30, what="both idle reads cut at their bound")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    finally:
        flood.close()
        drip.close()
    assert set(answers) == {200} and len(answers) >= 2, answers
    assert all(len(v) <= 200 for v in done.values()), done
    assert flood.sent > BOUND.max_bytes
    assert peak < 50 * MB, peak
