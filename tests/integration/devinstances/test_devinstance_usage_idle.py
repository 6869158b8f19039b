"""The culler's idleness by usage (issue 37) on kubesim's kubelet stats through the metrics API: scripted
instance pods use what their kubesim.io/cpu-usage annotation says, read by the kubelet every second here.
JupyterLab says every instance is active (so only usage can stop one): the one under 0.01 core is stopped once
its quiet time passes the limit, the busy one is kept and its StatefulSet records when it was last seen busy,
one holding a GPU and one with the rule off are kept; and the pure decision's edges."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client

from kubesim import KubeSim
from kubesim.controllers.framework import Timing
from kubesim.testing import sync_api_client, wait_until
from operators.devinstances import lifecycle, naming, usage_idle
from operators.devinstances.culler import cull
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from tests.support.devinstances.devinstance_support import NS, make_request, script_activity, sts_of

HOUR = 3600


@pytest.fixture
def k8s_fast_stats():
    sim = KubeSim(timing=Timing(metric_resolution=1.0)).start()
    api = sync_api_client(sim.url)
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": NS}})
    for claim in ("alice-home", "bob-home", "user00-home"):
        core.create_namespaced_persistent_volume_claim(NS, {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    yield api
    api.close()
    sim.stop()


def _reading(k8s, owner: str) -> float | None:
    try:
        item = client.CustomObjectsApi(k8s).get_namespaced_custom_object(
            "metrics.k8s.io", "v1beta1", NS, "pods", naming.pod_name(owner, "nb"))
    except client.ApiException:
        return None
    return usage_idle.pod_cpu(item)


def test_the_culler_stops_an_instance_idle_by_usage_and_keeps_busy_gpu_and_unread_ones(k8s_fast_stats):
    k8s, kube = k8s_fast_stats, Kube(k8s_fast_stats)
    settings = Settings(idle_seconds=8 * HOUR, usage_idle_seconds=2 * HOUR, usage_idle_cpu=0.01)
    core = client.CoreV1Api(k8s)
    for owner, cpu, gpu in (("alice", "5m", 0), ("bob", "500m", 0), ("user00", "0", 1)):
        lifecycle.create(kube, make_request(owner=owner, gpu=gpu, image="tf2-gpu" if gpu else "tf2-cpu"), settings)
        wait_until(lambda o=owner: (sts_of(k8s, o, "nb").status.ready_replicas or 0) >= 1, 30, what=f"{owner} ready")
        core.patch_namespaced_pod(naming.pod_name(owner, "nb"), NS, {"metadata": {"annotations": {
            "kubesim.io/cpu-usage": cpu}}})
        script_activity(k8s, owner, "nb", time.time())  # JupyterLab: active just now
    for owner, want in (("alice", 0.005), ("bob", 0.5), ("user00", 0.0)):
        wait_until(lambda o=owner, w=want: _reading(k8s, o) == pytest.approx(w, abs=1e-6), 30,
                   what=f"{owner}'s reading {want}")

    # within the limit: nobody stopped; bob's busy reading is written on his StatefulSet
    first = cull(kube, settings)
    assert first["stopped"] == [] and first["errors"] == [], first
    busy_at = sts_of(k8s, "bob", "nb").metadata.annotations[usage_idle.ANN_BUSY_AT]
    assert usage_idle.ANN_BUSY_AT not in (sts_of(k8s, "alice", "nb").metadata.annotations or {})

    # three hours later (the pass's clock): alice's quiet time is past 2 h, bob is still busy, user00 holds a GPU
    later = datetime.now(UTC) + timedelta(hours=3)
    for owner in ("alice", "bob", "user00"):
        script_activity(k8s, owner, "nb", later.timestamp())
    summary = cull(kube, settings, now=later)
    assert [line.split(":")[0] for line in summary["stopped"]] == [f"{NS}/alice--nb"], summary
    assert "idle by usage: under 0.01 cores at every pass for 3.0 h (limit 2 h)" in summary["stopped"][0]
    kept = {line.split(":")[0]: line for line in summary["kept"]}
    assert "busy: 0.500 cores now" in kept[f"{NS}/bob--nb"]
    assert "holds a GPU" in kept[f"{NS}/user00--nb"]
    assert sts_of(k8s, "alice", "nb").spec.replicas == 0 and sts_of(k8s, "bob", "nb").spec.replicas == 1
    assert sts_of(k8s, "bob", "nb").metadata.annotations[usage_idle.ANN_BUSY_AT] > busy_at

    # the rule off (the default): JupyterLab's signal alone, nothing stopped
    assert cull(kube, Settings(idle_seconds=8 * HOUR), now=later)["stopped"] == []


def test_the_usage_decision_never_stops_what_it_cannot_read():
    now = datetime(2026, 12, 5, 12, tzinfo=UTC)
    quiet = now - timedelta(hours=5)
    assert usage_idle.decide(0.0, False, quiet, now, 2 * HOUR, 0.01).idle
    assert not usage_idle.decide(None, False, quiet, now, 2 * HOUR, 0.01).idle      # no reading
    assert not usage_idle.decide(0.0, True, quiet, now, 2 * HOUR, 0.01).idle        # a GPU
    assert not usage_idle.decide(0.01, False, quiet, now, 2 * HOUR, 0.01).idle      # at the threshold: busy
    assert not usage_idle.decide(0.0, False, now - timedelta(hours=1), now, 2 * HOUR, 0.01).idle
    pod = {"status": {"startTime": "2026-12-05T06:00:00Z"}}
    assert usage_idle.quiet_since(pod, "2026-12-05T09:00:00+00:00") == datetime(2026, 12, 5, 9, tzinfo=UTC)
    assert usage_idle.quiet_since(pod, None) == datetime(2026, 12, 5, 6, tzinfo=UTC)
    assert usage_idle.holds_device({"spec": {"containers": [{"resources": {"limits": {"example.com/tpu": "1"}}}]}})
    assert not usage_idle.holds_device({"spec": {"containers": [{"resources": {"limits": {"cpu": "1",
                                                                                         "hugepages-2Mi": "1Gi"}}}]}})


@pytest.mark.parametrize("option, value, text", [
    ("devinstance_usage_idle_hours", "-1", "a number of hours >= 0"),
    ("devinstance_usage_idle_cpu", "0", "a positive number of CPU cores"),
    ("devinstance_usage_idle_cpu", "lots", "a positive number of CPU cores")])
def test_bad_usage_settings_fail_naming_the_option(option, value, text):
    from operators import settings as s

    def get(name: str) -> str:
        return value if name == option else s.default(name)

    with pytest.raises(ValueError, match=rf"^\[skiff\] {option}={value!r}: must be {text}"):
        Settings.from_config(get)
