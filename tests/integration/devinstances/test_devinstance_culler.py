"""The idle culler on kubesim: the idle signal is Jupyter's last-activity metric read through the API server's
service proxy (scripted on the pod with kubesim.io/http); idle instances are stopped, active and unreadable
ones are kept."""

from __future__ import annotations

import time

from operators.devinstances import inventory, lifecycle
from operators.devinstances.culler import cull
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from tests.support.devinstances.devinstance_support import (
    NS,
    make_request,
    script_activity,
    sts_of,
    wait_ready,
)

SETTINGS = Settings(idle_seconds=8 * 3600)


def test_culler_stops_idle_and_spares_active_and_unknown(k8s, team):
    for owner in ("alice", "bob", "user00"):
        lifecycle.create(Kube(k8s), make_request(owner=owner), SETTINGS)
        wait_ready(k8s, owner, "nb")
    lifecycle.create(Kube(k8s), make_request(owner="user01"), SETTINGS)
    wait_ready(k8s, "user01", "nb")
    lifecycle.stop(Kube(k8s), "user01", NS, "nb")  # stopped: not looked at
    now = time.time()
    script_activity(k8s, "alice", "nb", now - 9 * 3600)   # idle for 9 h
    script_activity(k8s, "bob", "nb", now - 600)          # active 10 min ago
    # user00's Jupyter does not answer /metrics: left running
    summary = cull(Kube(k8s), SETTINGS)
    assert [line.split(":")[0] for line in summary["stopped"]] == [f"{NS}/alice--nb"]
    assert "idle for 9.0 h (limit 8 h)" in summary["stopped"][0]
    kept = {line.split(":")[0]: line for line in summary["kept"]}
    assert set(kept) == {f"{NS}/bob--nb", f"{NS}/user00--nb"}
    assert "connection refused" in kept[f"{NS}/user00--nb"] and "left running" in kept[f"{NS}/user00--nb"]
    assert summary["errors"] == []
    assert sts_of(k8s, "alice", "nb").spec.replicas == 0
    assert sts_of(k8s, "alice", "nb").metadata.annotations["skiff.io/last-stopped"]
    assert sts_of(k8s, "bob", "nb").spec.replicas == 1 and sts_of(k8s, "user00", "nb").spec.replicas == 1


def test_idle_time_is_part_of_the_users_view(k8s, team):
    lifecycle.create(Kube(k8s), make_request(), SETTINGS)
    wait_ready(k8s, "alice", "nb")
    script_activity(k8s, "alice", "nb", time.time() - 3600)
    (view,) = inventory.list_instances(Kube(k8s), "alice", SETTINGS)
    assert 3590 < view.idle_seconds < 3700
