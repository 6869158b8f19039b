"""Cluster-state gauges from plain objects (``operators.exporter.cluster``) and the endpoint's cache."""

from __future__ import annotations

from operators.exporter import cluster
from operators.exporter.endpoint import ClusterCache, exposition, token_matches
from operators.metrics import catalogue as c


def _values(samples) -> dict:
    return {(s.metric.prom, s.labels): s.value for s in samples}


QUOTA = {"metadata": {"namespace": "recsys", "name": "skiff-quota"},
         "status": {"hard": {"requests.cpu": "16", "requests.memory": "64Gi", "requests.nvidia.com/gpu": "4"},
                    "used": {"requests.cpu": "2500m", "requests.memory": "1Gi", "requests.nvidia.com/gpu": "3"}}}


def test_quota_used_and_hard_in_base_units():
    v = _values(cluster.quota_samples([QUOTA]))
    team = (("team", "recsys"),)
    assert v[("skiff_team_gpu_requests", team)] == 3 and v[("skiff_team_gpu_quota", team)] == 4
    assert v[("skiff_team_cpu_requests_cores", team)] == 2.5 and v[("skiff_team_cpu_quota_cores", team)] == 16
    assert v[("skiff_team_memory_requests_bytes", team)] == 2**30


def test_a_quota_without_a_gpu_limit_has_no_gpu_quota_sample():
    q = {"metadata": {"namespace": "nlp"}, "status": {"hard": {"requests.cpu": "4"}, "used": {}}}
    v = _values(cluster.quota_samples([q]))
    assert v == {("skiff_team_cpu_quota_cores", (("team", "nlp"),)): 4.0,
                 ("skiff_team_cpu_requests_cores", (("team", "nlp"),)): 0.0}


def _job(ns, ready=0, cond=None, suspend=False):
    return {"metadata": {"namespace": ns}, "spec": {"suspend": suspend},
            "status": {"ready": ready, "conditions": [{"type": cond, "status": "True"}] if cond else []}}


def test_training_jobs_running_queued_and_finished_ones_left_out():
    jobs = [_job("recsys", ready=1), _job("recsys"), _job("recsys", suspend=True), _job("recsys", cond="Complete"),
            _job("recsys", cond="Failed"), _job("nlp", ready=1)]
    v = _values(cluster.training_samples(jobs, {"recsys", "nlp", "empty"}))
    assert v[("skiff_training_jobs", (("team", "recsys"), ("state", "running")))] == 1
    assert v[("skiff_training_jobs", (("team", "recsys"), ("state", "queued")))] == 2
    assert v[("skiff_training_jobs", (("team", "nlp"), ("state", "queued")))] == 0
    assert v[("skiff_training_jobs", (("team", "empty"), ("state", "running")))] == 0  # zeros, not missing


def test_instances_and_sedna_phases():
    sts = [{"metadata": {"namespace": "recsys"}, "spec": {"replicas": 1}, "status": {"readyReplicas": 1}},
           {"metadata": {"namespace": "recsys"}, "spec": {"replicas": 1}, "status": {}},
           {"metadata": {"namespace": "recsys"}, "spec": {"replicas": 0}, "status": {}}]
    v = _values(cluster.instance_samples(sts, set()))
    assert [v[("skiff_instances", (("team", "recsys"), ("state", s)))] for s in c.INSTANCE_STATES] == [1, 1, 1]
    fl = [{"metadata": {"namespace": "nlp"}, "status": {"phase": "Failed"}}]
    ji = [{"metadata": {"namespace": "nlp"}, "status": {"conditions": [{"type": "Running", "status": "True"},
                                                                       {"type": "Failed", "status": "False"}]}}]
    v = _values(cluster.sedna_samples({"FederatedLearningJob": fl, "JointInferenceService": ji}))
    assert v == {("skiff_sedna_crs", (("team", "nlp"), ("kind", "FederatedLearningJob"), ("phase", "Failed"))): 1,
                 ("skiff_sedna_crs", (("team", "nlp"), ("kind", "JointInferenceService"), ("phase", "Running"))): 1}


def test_the_cache_reads_once_per_max_age_and_keeps_the_last_good_state_on_errors():
    now = [0.0]
    reads = []

    def read():
        reads.append(now[0])
        if len(reads) == 3:
            raise RuntimeError("API server down")
        return cluster.quota_samples([QUOTA])

    cache = ClusterCache(read, max_age=15, clock=lambda: now[0])
    for t in (0, 1, 14.9):  # three scrapes, one read
        now[0] = t
        good = cache.get()
    assert reads == [0] and good
    now[0] = 15
    cache.get()
    now[0] = 30
    assert cache.get() == good and cache.errors == 1  # the failed read served the last good samples
    text = exposition(good, cache, cluster_requests=7).decode()
    assert 'skiff_team_gpu_requests{team="recsys"} 3.0' in text
    assert "skiff_exporter_refresh_errors_total 1.0" in text and "skiff_exporter_cluster_requests_total 7.0" in text
    assert "# TYPE skiff_team_gpu_quota gauge" in text


def test_the_token_is_a_bearer_token_and_must_match_exactly():
    assert token_matches("Bearer s3cret", "s3cret") and token_matches("bearer s3cret", "s3cret")
    assert not token_matches("Bearer s3cre", "s3cret") and not token_matches("Basic s3cret", "s3cret")
    assert not token_matches("Bearer ", "")  # no token configured: never matches
