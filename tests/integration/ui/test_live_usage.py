"""operators/ui/live_usage.py: a running pod's use now beside what it holds, or why it is not known (pure)."""

from __future__ import annotations

from operators.ui.live_usage import NO_API, NO_READING, pod_usage

POD = {"spec": {"containers": [
    {"name": "train", "resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
                                    "limits": {"memory": "8Gi", "nvidia.com/gpu": "1"}}},
    {"name": "sidecar", "resources": {"requests": {"cpu": "100m"}, "limits": {"memory": "256Mi"}}}]}}
ITEM = {"timestamp": "2026-12-05T01:00:00Z", "window": "15s", "containers": [
    {"name": "train", "usage": {"cpu": "1500m", "memory": "2Gi"}},
    {"name": "sidecar", "usage": {"cpu": "250000n", "memory": "10Mi"}}]}


def test_the_pods_containers_summed_used_and_held():
    assert pod_usage(POD, ITEM, None) == {
        "cpu": 1.50025, "memory": 2 * 2**30 + 10 * 2**20, "at": "2026-12-05T01:00:00Z", "window": "15s",
        "missing": None, "cpu_request": 2.1, "memory_limit": float(8 * 2**30 + 256 * 2**20), "gpu": 1}


def test_no_number_without_a_reading_and_the_reason_said():
    for item, problem, why in ((None, None, NO_READING), (ITEM, NO_API, NO_API), (None, NO_API, NO_API)):
        got = pod_usage(POD, item, problem)
        assert (got["cpu"], got["memory"], got["missing"]) == (None, None, why)
        assert got["cpu_request"] == 2.1  # what it holds is the pod's own, known either way


def test_a_container_without_a_memory_limit_leaves_the_pod_without_one():
    pod = {"spec": {"containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}, {"name": "b"}]}}
    got = pod_usage(pod, {"containers": []}, None)
    assert (got["memory_limit"], got["cpu_request"], got["gpu"]) == (None, None, 0)


def test_the_pages_metrics_read_is_shared_for_a_few_seconds(monkeypatch):
    """One PodMetrics list serves every poll within POD_METRICS_TTL_S (the metrics API changes every 15 s)."""
    from operators.ui import sources

    reads = []
    monkeypatch.setattr(sources, "pod_metrics", lambda k: reads.append(k) or ({("ns", "p"): {"n": len(reads)}}, None))
    monkeypatch.setattr(sources, "conn_id", lambda: "conn-under-test")
    sources._metrics_cache.clear()
    first = sources.pod_metrics_cached("k", now=100.0)
    assert sources.pod_metrics_cached("k", now=100.0 + sources.POD_METRICS_TTL_S - 0.1) == first
    assert len(reads) == 1
    later = sources.pod_metrics_cached("k", now=100.0 + sources.POD_METRICS_TTL_S)
    assert len(reads) == 2 and later[0][("ns", "p")] == {"n": 2}
    sources._metrics_cache.clear()
