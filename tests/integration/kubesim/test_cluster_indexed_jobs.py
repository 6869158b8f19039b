"""Indexed Jobs and podFailurePolicy as the Job controller and kube-apiserver do them
(kubesim/controllers/workloads/indexed.py, kubesim/apiserver/admission/jobvalidation.py; upstream
pkg/controller/job/indexed_job_utils.go, job_controller.go `manageJob`, pod_failure_policy.go and
pkg/apis/batch/validation/validation.go), through the `kubernetes` client."""
from __future__ import annotations

import json

import pytest
from kubernetes.client import BatchV1Api, CoreV1Api
from kubernetes.client.exceptions import ApiException

from kubesim.controllers.workloads import indexed
from kubesim.testing import wait_until
from tests.integration.kubesim.test_cluster_workloads import condition, finished, job

KEY = "batch.kubernetes.io/job-completion-index"


def test_intervals_as_upstream_writes_them():
    """orderedIntervals.String: ranges with '-', two neighbours with ','; parsing caps at completions."""
    assert indexed.format_intervals(indexed.with_indexes([], [0, 1, 2, 4, 6, 7])) == "0-2,4,6,7"
    assert indexed.parse_intervals("0-2,4,9-12", 10) == [[0, 2], [4, 4], [9, 9]]
    assert indexed.pending_indexes([], [[0, 1], [3, 3]], 5, 6) == [2, 4, 5]
    assert indexed.generate_name("x" * 70, 3) == "x" * 55 + "-3-"


def test_indexed_job_pods_carry_their_index_hostname_and_env(k8s):
    """completions = parallelism = 3: one pod per index 0..2, each with the completion-index annotation and
    label, hostname `<job>-<index>`, the template's subdomain kept, generateName `<job>-<index>-`, and
    JOB_COMPLETION_INDEX from the label; completedIndexes "0-2", succeeded 3."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    body = job(completions=3, parallelism=3, completionMode="Indexed", annotations={"duration": 0.2})
    body["spec"]["template"]["spec"]["subdomain"] = "train-workers"
    batch.create_namespaced_job("default", body)
    j = finished(batch, "train", "Complete")
    assert (j.status.completed_indexes, j.status.succeeded) == ("0-2", 3)
    pods = sorted(core.list_namespaced_pod("default", label_selector="job-name=train").items,
                  key=lambda p: int(p.metadata.labels[KEY]))
    assert [p.metadata.annotations[KEY] for p in pods] == ["0", "1", "2"]
    for i, p in enumerate(pods):
        assert p.spec.hostname == f"train-{i}" and p.spec.subdomain == "train-workers"
        assert p.metadata.name.startswith(f"train-{i}-") and len(p.metadata.name) == len(f"train-{i}-") + 5
        (env,) = [e for e in p.spec.containers[0].env if e.name == "JOB_COMPLETION_INDEX"]
        assert env.value_from.field_ref.field_path == f"metadata.labels['{KEY}']"


def test_a_failed_index_is_replaced_with_the_same_index_until_backoff_limit(k8s):
    """A failing index gets a new pod with the same index (the lowest pending); backoffLimit 1 -> Failed
    after 2 failures, BackoffLimitExceeded; no index completed."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(completions=1, parallelism=1, completionMode="Indexed",
                                               backoffLimit=1, annotations={"exit-code": 3, "duration": 0.05}))
    j = finished(batch, "train", "Failed")
    assert condition(j, "Failed").reason == "BackoffLimitExceeded" and j.status.failed == 2
    assert not j.status.completed_indexes
    pods = core.list_namespaced_pod("default", label_selector="job-name=train").items
    assert [p.metadata.labels[KEY] for p in pods] == ["0", "0"]


def _policy(*rules):
    return {"rules": list(rules)}


def test_pod_failure_policy_fail_job_ends_the_job_at_once(k8s):
    """A FailJob rule on exit code 3: the first failure fails the Job (backoffLimit 6 notwithstanding), reason
    PodFailurePolicy, upstream's message naming the container, the pod and the rule; the other index's
    running pod is deleted."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(
        completions=2, parallelism=2, completionMode="Indexed", annotations={"exit-code": 3, "duration": 0.05},
        podFailurePolicy=_policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3]}})))
    j = finished(batch, "train", "Failed")
    failed = condition(j, "Failed")
    assert failed.reason == "PodFailurePolicy" and condition(j, "FailureTarget").reason == "PodFailurePolicy"
    assert failed.message.startswith("Container main for pod default/train-")
    assert failed.message.endswith("failed with exit code 3 matching FailJob rule at index 0")
    assert j.spec.pod_replacement_policy == "Failed"
    pods = core.list_namespaced_pod("default", label_selector="job-name=train").items
    assert len(pods) <= 2


def test_pod_failure_policy_ignore_does_not_count_and_count_does(k8s):
    """Ignore on exit code 4: the failures are not counted (status.failed stays 0) and the index is retried;
    a NotIn [0 4] Count rule counts exit code 5 against backoffLimit 0 -> BackoffLimitExceeded."""
    batch = BatchV1Api(k8s)
    batch.create_namespaced_job("default", job(
        name="ign", completions=1, completionMode="Indexed", backoffLimit=0,
        annotations={"exit-code": 4, "duration": 0.05},
        podFailurePolicy=_policy({"action": "Ignore", "onExitCodes": {"operator": "In", "values": [4]}})))
    core = CoreV1Api(k8s)
    wait_until(lambda: len(core.list_namespaced_pod("default", label_selector="job-name=ign").items) >= 3, 15)
    j = batch.read_namespaced_job("ign", "default")
    assert not j.status.failed and not condition(j, "Failed")
    batch.delete_namespaced_job("ign", "default", propagation_policy="Background")
    batch.create_namespaced_job("default", job(
        name="cnt", completions=1, completionMode="Indexed", backoffLimit=0,
        annotations={"exit-code": 5, "duration": 0.05},
        podFailurePolicy=_policy({"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0, 4]}})))
    j = finished(batch, "cnt", "Failed")
    assert condition(j, "Failed").reason == "BackoffLimitExceeded" and j.status.failed == 1


def test_suspend_and_resume_an_indexed_job_as_a_whole(k8s):
    """Suspending deletes every index's pod without counting a failure; resuming creates all indexes again."""
    batch, core = BatchV1Api(k8s), CoreV1Api(k8s)
    batch.create_namespaced_job("default", job(completions=2, parallelism=2, completionMode="Indexed",
                                               annotations={"duration": 30}))
    sel = "job-name=train"
    wait_until(lambda: len([p for p in core.list_namespaced_pod("default", label_selector=sel).items
                            if p.status.phase == "Running"]) == 2, 15)
    batch.patch_namespaced_job("train", "default", {"spec": {"suspend": True}})
    wait_until(lambda: not core.list_namespaced_pod("default", label_selector=sel).items, 15)
    j = wait_until(lambda: (lambda j: j if condition(j, "Suspended") else None)(
        batch.read_namespaced_job("train", "default")), 15)
    assert not j.status.failed and not j.status.active
    batch.patch_namespaced_job("train", "default", {"spec": {"suspend": False}})
    pods = wait_until(lambda: (lambda ps: ps if len(ps) == 2 else None)(
        core.list_namespaced_pod("default", label_selector=sel).items), 15)
    assert sorted(p.metadata.labels[KEY] for p in pods) == ["0", "1"]


@pytest.mark.parametrize("spec, field, message", [
    ({"completionMode": "Indexed", "parallelism": 2}, "spec.completions",
     "Required value: when completion mode is Indexed"),
    ({"completionMode": "Indexed", "completions": 2, "parallelism": 100001}, "spec.parallelism",
     "must be less than or equal to 100000 when completion mode is Indexed"),
    ({"completionMode": "Sometimes"}, "spec.completionMode", 'Unsupported value: "Sometimes"'),
    ({"podFailurePolicy": _policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [0]}})},
     "spec.podFailurePolicy.rules[0].onExitCodes.values[0]", "must not be 0 for the In operator"),
    ({"podFailurePolicy": _policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [3, 1]}})},
     "spec.podFailurePolicy.rules[0].onExitCodes.values", "must be ordered"),
    ({"podFailurePolicy": _policy({"action": "Explode", "onExitCodes": {"operator": "In", "values": [1]}})},
     "spec.podFailurePolicy.rules[0].action", 'Unsupported value: "Explode"'),
    ({"podFailurePolicy": _policy({"action": "Ignore"})}, "spec.podFailurePolicy.rules[0]",
     "specifying one of OnExitCodes and OnPodConditions is required"),
    ({"podFailurePolicy": _policy({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                             "status": "Maybe"}]})},
     "spec.podFailurePolicy.rules[0].onPodConditions[0].status", 'Unsupported value: "Maybe"'),
    ({"podFailurePolicy": _policy({"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1],
                                                                        "containerName": "nope"}})},
     "spec.podFailurePolicy.rules[0].onExitCodes.containerName", "must be one of the container"),
])
def test_indexed_and_failure_policy_fields_are_validated(k8s, spec, field, message):
    """kube-apiserver's validateJobSpec / validatePodFailurePolicy*: 422 naming the field, nothing created."""
    batch = BatchV1Api(k8s)
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_job("default", job(**spec))
    causes = json.loads(e.value.body)["details"]["causes"]
    assert e.value.status == 422 and any(c["field"] == field and message in c["message"] for c in causes), causes
    assert not batch.list_namespaced_job("default").items


def test_failure_policy_needs_restart_never_and_is_immutable(k8s):
    batch = BatchV1Api(k8s)
    pol = _policy({"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]})
    with pytest.raises(ApiException) as e:
        batch.create_namespaced_job("default", job(restart="OnFailure", podFailurePolicy=pol))
    assert 'only \\"Never\\" is supported when podFailurePolicy is specified' in e.value.body
    batch.create_namespaced_job("default", job(suspend=True, podFailurePolicy=pol, completionMode="Indexed",
                                               completions=1))
    for patch, f in (({"spec": {"podFailurePolicy": None}}, "spec.podFailurePolicy"),
                     ({"spec": {"completionMode": "NonIndexed"}}, "spec.completionMode")):
        with pytest.raises(ApiException) as e:
            batch.patch_namespaced_job("train", "default", patch)
        assert e.value.status == 422 and f"{f}: Invalid value" in e.value.body and "field is immutable" in e.value.body
