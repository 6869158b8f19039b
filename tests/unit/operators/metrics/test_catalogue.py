"""The pure rules behind the event metrics (each feature's ``metrics`` module) and the catalogue's naming rules."""

from __future__ import annotations

import re

import pytest

from operators.devinstances import metrics as instance_metrics
from operators.metrics import catalogue as c
from operators.platform import metrics as platform_metrics
from operators.sedna import metrics as sedna_metrics
from operators.training import failure
from operators.training import metrics as training_metrics


def _pod(**container) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "jupyter-job",
                                                               "resources": {"limits": {"memory": "1Gi"}}}]},
            "status": {"containerStatuses": [{"name": "jupyter-job", **container}]}}


@pytest.mark.parametrize("pod, label", [
    (_pod(state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}}), "OOMKilled"),
    (_pod(state={"terminated": {"exitCode": 3, "reason": "Error"}}), "ExitCode"),
    ({"metadata": {"name": "p"}, "status": {"reason": "Evicted", "message": "low on memory"}}, "Evicted"),
    ({"metadata": {"name": "p"}, "status": {"reason": "Preempted", "message": "by a higher priority"}}, "Preempted"),
])
def test_a_failed_jobs_reason_as_the_operator_words_it_gets_its_label(pod, label):
    """The label comes from the same one-line reason the task error and the alert carry (failure.py)."""
    reason = failure.failure_reason({"status": {}}, [pod], [])
    assert training_metrics.failure_class(reason, "job") == label


@pytest.mark.parametrize("kind, reason, label", [
    ("quota", "exceeded quota: skiff-quota, requested: requests.nvidia.com/gpu=1", "QuotaWaitTimeout"),
    ("unschedulable", "Unschedulable: pod p: 0/3 nodes are available (pending for 1800s)", "Unschedulable"),
    ("fatal", "ImagePullBackOff: container c in pod p (image x)", "ImagePull"),
    ("fatal", "CreateContainerConfigError: container c in pod p", "ContainerConfig"),
    ("discovery", "no pod was created for Job ns/j within 300s", "NoPod"),
    ("job", "DeadlineExceeded: the Job ran longer than its deadline of 60s", "DeadlineExceeded"),
    ("job", "Workload evicted: Preempted to accommodate a workload (UID: 1)", "Preempted"),
    ("job", "the Job failed without a recorded reason", "Other"),
])
def test_failure_labels_form_a_closed_set(kind, reason, label):
    assert training_metrics.failure_class(reason, kind) == label
    assert label in c.FAILURE_REASONS


def test_every_fatal_waiting_reason_has_its_label_and_every_wording_is_training_failures():
    """The prefixes come from operators.training.failure's own names: a fatal waiting reason added there without a
    label fails here, and each pod-level wording it makes is classified (not "Other")."""
    assert set(training_metrics.WAITING_LABEL) == set(failure.FATAL_WAITING)
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}
    for reason in failure.FATAL_WAITING:
        waiting = {**pod, "status": {"containerStatuses": [{"name": "c", "state": {"waiting": {"reason": reason}}}]}}
        assert training_metrics.failure_class(failure.waiting_problem(waiting), "fatal") in ("ImagePull",
                                                                                               "ContainerConfig")
    for reason in failure.POD_REASONS:
        assert training_metrics.failure_class(failure.terminated_reason({**pod, "status": {"reason": reason}}),
                                              "job") == reason
    quota = [{"reason": "FailedCreate", "message": 'pods "p" is forbidden: exceeded quota: q, requested: cpu=1'}]
    assert training_metrics.failure_class(failure.quota_problem(quota), None) == "QuotaWaitTimeout"
    unschedulable = {**pod, "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                        "reason": "Unschedulable", "message": "0/3 nodes"}]}}
    assert training_metrics.failure_class(failure.unschedulable_problem(unschedulable), None) == "Unschedulable"


def test_job_times_read_creation_first_container_and_completion():
    job = {"metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"},
           "status": {"completionTime": "2026-12-01T10:05:00Z",
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    late = _pod(state={"running": {"startedAt": "2026-12-01T10:02:00Z"}})
    early = _pod(state={"terminated": {"exitCode": 0, "startedAt": "2026-12-01T10:01:30Z"}})
    pending = {"metadata": {"name": "q"}, "status": {"phase": "Pending"}}
    times = training_metrics.job_times(job, [late, early, pending])
    assert times["first_running_at"] - times["created_at"] == 90
    assert times["completed_at"] - times["created_at"] == 300
    assert training_metrics.job_times(None, [pending]) == {"created_at": None, "first_running_at": None, "completed_at": None}


def test_a_success_counts_once_with_both_timings_in_milliseconds():
    result = {"status": "success", "namespace": "recsys",
              "times": {"created_at": 100.0, "first_running_at": 112.5, "completed_at": 200.0}}
    out = {m.stat: (tags, v) for m, tags, v in training_metrics.training_outcome(result, now=201.25)}
    assert out == {"skiff.training.succeeded": ({"team": "recsys"}, 1),
                   "skiff.training.complete_to_success": ({"team": "recsys"}, 1250.0),
                   "skiff.training.queue_wait": ({"team": "recsys"}, 12500.0)}


def test_a_failure_that_never_ran_has_no_queue_wait():
    result = {"status": "failed", "namespace": "nlp", "kind": "quota", "reason": "exceeded quota: ...",
              "times": {"created_at": 100.0, "first_running_at": None, "completed_at": None}}
    assert [(m.stat, tags) for m, tags, _ in training_metrics.training_outcome(result, now=500)] == [
        ("skiff.training.failed", {"team": "nlp", "reason": "QuotaWaitTimeout"})]


def test_sedna_actions_map_to_created_healed_rolled_out():
    assert sedna_metrics.action_samples("JointInferenceService", "nlp", "Created")[0][0] is c.SEDNA_CREATED
    assert {sedna_metrics.action_samples("FederatedLearningJob", "nlp", r)[0][0] for r in
            ("Recreated", "DriftReverted", "OwnerRepaired")} == {c.SEDNA_HEALED}
    assert sedna_metrics.action_samples("FederatedLearningJob", "nlp", "RolledOut")[0][0] is c.SEDNA_ROLLED_OUT
    assert sedna_metrics.action_samples("FederatedLearningJob", "nlp", "Removed") == []


def test_a_pass_with_errors_is_failed_and_counts_them():
    out = sedna_metrics.pass_samples("FederatedLearningJob", {"errors": ["a", "b"], "seconds": 0.25})
    assert [(m.stat, t, v) for m, t, v in out] == [
        ("skiff.sedna.reconcile_passes", {"kind": "FederatedLearningJob", "result": "failed"}, 1),
        ("skiff.sedna.reconcile_pass", {"kind": "FederatedLearningJob"}, 250.0),
        ("skiff.sedna.failures", {"kind": "FederatedLearningJob"}, 2)]
    assert sedna_metrics.pass_samples("FederatedLearningJob", {"errors": []})[0][1]["result"] == "ok"


def test_instances_and_platform_sync():
    assert instance_metrics.action_samples("stop", "recsys", changed=True)[0][0].stat == "skiff.instances.stopped"
    assert instance_metrics.action_samples("stop", "recsys", changed=False) == []  # already stopped: nothing happened
    culled = instance_metrics.culled_samples({"stopped": ["recsys/a: idle", "recsys/b: idle", "nlp/c: idle"], "kept": []})
    assert [(t["team"], v) for _, t, v in culled] == [("nlp", 1), ("recsys", 2)]
    out = {m.stat: (t, v) for m, t, v in platform_metrics.sync_samples({"applied": ["x", "y"], "errors": ["z"]})}
    assert out == {"skiff.platform_sync.runs": ({"result": "failed"}, 1), "skiff.platform_sync.writes": ({}, 2),
                   "skiff.platform_sync.refusals": ({}, 1)}


def test_names_follow_prometheus_conventions():
    """skiff_ prefix, _total counters, _seconds timings, base units, and only low-cardinality labels."""
    # The Kueue gauges' extra labels are bounded by the platform file (its ClusterQueues, LocalQueues, flavors,
    # resources and priority classes), not by what users do: low-cardinality too.
    allowed = {"team", "reason", "kind", "state", "phase", "result",
               "cluster_queue", "local_queue", "flavor", "resource", "priority_class"}
    metrics = c.all_metrics()
    assert len({m.prom for m in metrics}) == len(metrics)
    for m in metrics:
        assert re.fullmatch(r"skiff_[a-z_]+", m.prom), m
        assert m.prom.endswith("_total") == (m.type == c.COUNTER), m
        assert m.type != c.TIMING or m.prom.endswith("_seconds"), m
        # the one per-pod series: kube-state-metrics' kube_pod_labels pattern, for joins (catalogue's docstring)
        assert set(m.labels) <= allowed or m in (c.POD_INFO, c.POD_REQUESTS), m
        assert not m.stat or re.fullmatch(r"skiff\.[a-z_]+\.[a-z_]+", m.stat), m  # Airflow's allowed characters
