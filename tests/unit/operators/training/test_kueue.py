"""Training steps in Kueue's queue: the Job's shape (pure), the operator's validation, and on kubesim with Kueue
a queued step that waits for quota, logs Kueue's words, and one that times out of the queue."""
from __future__ import annotations

import pytest

from operators.platform.admission import ADMIT, Decision
from operators.platform.kueue import queue_labels
from operators.training.naming import TaskInstanceKey
from tests.support.training.training_support import operator

KEY = TaskInstanceKey("d", "train", "manual__1", 1, -1)
QUEUE, PRIO = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"


def test_a_queued_job_is_created_suspended_with_kueues_labels_on_the_job_only():
    decision = Decision(ADMIT, queue_labels=queue_labels(False, "skiff-online"))
    job = operator(labels={"project": "ctr"}).build_manifest(KEY, decision)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][QUEUE] == "skiff" and job["metadata"]["labels"][PRIO] == "skiff-online"
    assert job["metadata"]["labels"]["project"] == "ctr"
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert QUEUE not in pod_labels and PRIO not in pod_labels and pod_labels["project"] == "ctr"


def test_without_kueue_the_job_is_not_suspended():
    job = operator().build_manifest(KEY, Decision(ADMIT))
    assert "suspend" not in job["spec"] and QUEUE not in job["metadata"]["labels"]
    assert "suspend" not in operator().build_manifest(KEY)["spec"]


def test_a_bad_priority_class_is_refused_when_the_dag_is_parsed():
    with pytest.raises(ValueError) as info:
        operator(priority_class="x" * 5000)
    text = str(info.value)
    assert text.startswith("priority_class='xxxx") and "characters)" in text and len(text) < 400
    assert "skiff-online, skiff-scheduled, skiff-dev" in text
    assert operator(priority_class="skiff-dev").priority_class == "skiff-dev"
    with pytest.raises(ValueError, match="queue_wait"):
        operator(queue_wait=-1)


def test_the_failure_mail_says_when_and_by_what_the_step_was_preempted():
    from types import SimpleNamespace

    from operators import TrainingJobFailed
    from operators.training.alerts import compose

    note = "2026-12-01T10:00:00Z: Preempted to accommodate a workload (UID: u-a, JobUID: j-a) due to reclamation"
    exc = TrainingJobFailed("exit code 1", ["boom"], "nlp/train-x", [note])
    ti = SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1, log_url="http://x/log")
    _, body = compose({"ti": ti, "exception": exc})
    assert "<th align='left'>Preempted</th><td>2026-12-01T10:00:00Z: Preempted to accommodate a workload" in body
    assert "(the Job was preempted by Kueue at 2026-12-01T10:00:00Z" in str(exc)
