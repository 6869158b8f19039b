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


def _pod(owner: dict, name: str, namespace: str, phase: str = "Running") -> dict:
    """A pod as its controller makes it from ``owner``'s template (a Job or a StatefulSet)."""
    template = owner["spec"]["template"]
    return {"metadata": {**template["metadata"], "name": name, "namespace": namespace, "uid": name},
            "spec": template["spec"], "status": {"phase": phase}}


def test_pod_info_names_each_live_pod_of_skiff_from_the_templates_labels_and_annotations():
    """skiff_pod_info from pods made of Skiff's own rendered templates: a training step (its user is the owner
    of its home volume, its DAG, task, run and try are the raw ids), alice's instance, a finished step left out,
    a pod Skiff did not make left out."""
    from operators.devinstances import desired
    from operators.devinstances.spec import Image, build_request
    from operators.training.manifest import job_manifest
    from operators.training.naming import TaskInstanceKey
    from operators.training.spec import build_spec

    key = TaskInstanceKey("training_recommendation_daily", "train_model", "scheduled__2026-11-29T00:00:00+00:00", 2)
    step = build_spec(image="registry/recsys/train:1.4", namespace="recsys", work_dir="/root", exec_command="python",
                      entry_path="train.py", run_args=[], env={}, cpu=2, memory=4, gpu=1, pvc="bob-home",
                      volumes_=None, online=False, pool_key="pool", pool_value="offline")
    job = job_manifest(step, key)
    image = Image("tf2-cpu", "registry.local/nb:tf2.15", default=True)
    req = build_request(owner="Alice.Smith", name="nb", team="recsys", image="tf2-cpu", cpu=2, memory=4, gpu=0,
                        mounts_=[], extra_ports_=[], catalogue=(image,), default_image="tf2-cpu",
                        home_pvc="alice-home", access={"alice-home": "rw"}.get)
    sts = desired.statefulset(req, {}, replicas=1, started=None)
    stranger = {"metadata": {"name": "x", "namespace": "recsys", "labels": {"app": "x"}}, "status": {"phase": "Running"}}
    pods = [_pod(job, "step-0", "recsys"), _pod(job, "step-old", "recsys", "Failed"),
            _pod(sts, "alice--nb-0", "recsys", "Pending"), stranger]
    owners = {"bob-home": "bob", "alice-home": "Alice.Smith"}
    samples = cluster.pod_info_samples(pods, owners)
    got = [dict(s.labels) for s in samples if s.metric is c.POD_INFO]
    assert got == [
        {"namespace": "recsys", "pod": "alice--nb-0", "team": "recsys", "user": "Alice.Smith", "dag": "", "task": "",
         "run": "", "try": "", "kind": "instance"},
        {"namespace": "recsys", "pod": "step-0", "team": "recsys", "user": "bob", "dag": key.dag_id,
         "task": key.task_id, "run": key.run_id, "try": "2", "kind": "training"}]
    # without the platform's users an instance is still its owner's (its label: the owner's slug)
    assert [dict(s.labels)["user"] for s in cluster.pod_info_samples(pods, {})
            if s.metric is c.POD_INFO] == ["alice-smith", ""]
    assert {s.value for s in samples if s.metric is c.POD_INFO} == {1.0}
    # what each holds: the step 2 cores, 4 GiB, 1 GPU; the instance 2 cores, 4 GiB (its requests)
    held = {(dict(s.labels)["pod"], dict(s.labels)["resource"]): s.value for s in samples if s.metric is c.POD_REQUESTS}
    assert held == {("step-0", "cpu"): 2.0, ("step-0", "memory"): 4 * 2**30, ("step-0", "gpu"): 1.0,
                    ("alice--nb-0", "cpu"): 2.0, ("alice--nb-0", "memory"): 4 * 2**30, ("alice--nb-0", "gpu"): 0.0}


def test_a_sedna_worker_is_of_kind_sedna():
    fl = {"metadata": {"name": "w", "namespace": "nlp", "labels": {
        "app.kubernetes.io/managed-by": "skiff", "federatedlearningjob.sedna.io/name": "j"}}, "status": {}}
    ji = {"metadata": {"name": "e", "namespace": "nlp", "labels": {"jointinferenceservice.sedna.io/name": "s"}}}
    assert [dict(s.labels)["kind"] for s in cluster.pod_info_samples([fl, ji], {})
            if s.metric is c.POD_INFO] == ["sedna", "sedna"]
