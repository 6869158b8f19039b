"""Probes and preStop hooks really run on process pods (kubesim/kubelet/procrt/probes.py cites the prober)."""
from __future__ import annotations

from kubesim.testing import wait_until
from tests.integration.kubesim.test_procrt_signals import CLAIM, on_home, read_home
from tests.support.kubesim.procrt_support import events_for, phase_is, pod


def ready(pcore, name):
    p = pcore.read_namespaced_pod(name, "default")
    return bool(p.status.container_statuses) and p.status.container_statuses[0].ready


def test_a_readiness_probe_holds_ready_until_the_server_answers_and_exec_probes_run_in_the_container(pcore):
    """httpGet readiness: not ready while nothing listens on 8080, ready once the process serves it; an
    exec readiness probe that fails keeps a running container unready with an Unhealthy Event."""
    serve = "sleep 1; exec python3 -m http.server 8080"
    probe = {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
    pcore.create_namespaced_pod("default", pod("late", ["bash", "-c", serve], restart="Always",
                                              container={"readinessProbe": probe}))
    phase_is(pcore, "late", "Running")
    assert not ready(pcore, "late")
    wait_until(lambda: ready(pcore, "late"), 15, what="ready once the server answers")
    # the kubelet's words (pkg/probe/http/http.go: the Go client's error), not Python's "[Errno 111] Connect call
    # failed ('127.0.0.1', 8080)" (issue 36)
    assert events_for(pcore, "late", "Unhealthy")[0].message == (
        'Readiness probe failed: Get "http://127.0.0.1:8080/": dial tcp 127.0.0.1:8080: connect: connection refused')
    # the API server's defaults (pkg/apis/core/v1/defaults.go SetDefaults_Probe): kubectl describe printed
    # "timeout=0s #success=0" without them
    stored = pcore.read_namespaced_pod("late", "default").spec.containers[0].readiness_probe
    assert (stored.timeout_seconds, stored.period_seconds, stored.success_threshold, stored.failure_threshold,
            stored.http_get.scheme) == (1, 1, 1, 3, "HTTP")
    pcore.create_namespaced_pod("default", pod("never", ["sleep", "60"], restart="Always", container={
        "readinessProbe": {"exec": {"command": ["test", "-e", "/tmp/ok"]}, "periodSeconds": 1}}))
    wait_until(lambda: events_for(pcore, "never", "Unhealthy"), 15)
    assert not ready(pcore, "never")
    assert events_for(pcore, "never", "Unhealthy")[0].message.startswith("Readiness probe failed")


def test_a_failing_liveness_probe_restarts_the_container(pcore):
    probe = {"tcpSocket": {"port": 9999}, "periodSeconds": 1, "failureThreshold": 2}
    pcore.create_namespaced_pod("default", pod("dead", ["sleep", "60"], restart="Always", terminationGracePeriodSeconds=1,
                                              container={"livenessProbe": probe}))
    def restarts():
        statuses = pcore.read_namespaced_pod("dead", "default").status.container_statuses or []
        return statuses and statuses[0].restart_count >= 1
    wait_until(restarts, 20, what="restarted after the liveness probe failed")
    assert any("failed liveness probe, will be restarted" in e.message for e in events_for(pcore, "dead", "Killing"))


def test_pre_stop_runs_before_sigterm_on_delete(pcore):
    pcore.create_namespaced_persistent_volume_claim("default", CLAIM)
    spec = on_home("hooked", "trap 'echo term >> /root/order; exit 0' TERM; sleep 60 & wait")
    spec["spec"]["containers"][0]["lifecycle"] = {"preStop": {"exec": {"command": ["bash", "-c",
                                                                                    "echo prestop >> /root/order"]}}}
    pcore.create_namespaced_pod("default", spec)
    phase_is(pcore, "hooked", "Running")
    pcore.delete_namespaced_pod("hooked", "default", grace_period_seconds=10)
    wait_until(lambda: not [p for p in pcore.list_namespaced_pod("default").items if p.metadata.name == "hooked"], 15)
    assert read_home(pcore, "reader", "/root/order") == "prestop\nterm\n"
