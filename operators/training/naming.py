"""Names, labels and annotations that tie a training Job to its Airflow task instance (pure functions).

* The Job name is DNS-1123 (a label, <= 63 chars), unique per (dag, task, run, map index, try):
  ``<dag>-<task>`` slug (truncated) + ``-<10 hex of the task-instance hash>-t<try>``.
* Labels are sanitised to label-value rules (they are for selection and display); the
  ``skiff.io/ti-hash`` label is the lookup key of the task instance across tries: it is what a retry uses
  to find (and adopt) a Job an earlier try left running.  Truncated/sanitised label values may collide,
  the hash does not.
* Annotations keep the raw ids (annotations have no charset or length limit that matters here).
* A Job belongs to one run *instance*, not just its run id: ``run_after`` (set when the run is created, never
  changed by a clear) is part of the task-instance hash, so a run deleted and created again with the same run
  id never adopts, nor collides with, the old run's Jobs. ``clear_number`` (the run's count of clears, the same
  for every retry in between) is recorded on the Job: a Job that succeeded before the run was cleared is never
  taken for this pass's result (``jobs.adoption_state``), whatever became of the "reported" record (issue 30).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from operators.core.names import label_value, slug

MANAGED_BY = "skiff"
APP_NAME = "skiff-training"

LABEL_TI_HASH = "skiff.io/ti-hash"
LABEL_TRY = "skiff.io/try-number"
LABEL_JOB = "skiff.io/job-name"
ANNOTATION_CLEARS = "skiff.io/run-clear-number"  # the run's clear_number this Job's result belongs to


@dataclass(frozen=True)
class TaskInstanceKey:
    dag_id: str
    task_id: str
    run_id: str
    try_number: int
    map_index: int = -1
    run_after: str = ""  # the DAG run's run_after (ISO 8601): which run of that run id
    clear_number: int = 0  # the DAG run's clear_number: which pass of that run

    @property
    def ti_hash(self) -> str:
        """Stable across tries and clears: identifies the task instance of one run instance (not the try)."""
        parts = (self.dag_id, self.task_id, self.run_id, str(self.map_index)) + ((self.run_after,) if self.run_after
                                                                                else ())
        return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:10]


def job_name(key: TaskInstanceKey, reserve: int = 0) -> str:
    """``reserve``: characters left free for a suffix of the pods' hostnames (a gang's ``-<rank>``)."""
    suffix = f"-{key.ti_hash}-t{key.try_number}"
    return (slug(f"{key.dag_id}-{key.task_id}", 63 - reserve - len(suffix)) or "skiff") + suffix


def job_labels(key: TaskInstanceKey, name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """User labels first, Skiff's last (a user label can never hide a Job from Skiff's lookup)."""
    labels = dict(extra or {})
    labels.update(
        {
            "app.kubernetes.io/name": APP_NAME,
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/managed-by": MANAGED_BY,
            "skiff.io/dag-id": label_value(key.dag_id),
            "skiff.io/task-id": label_value(key.task_id),
            "skiff.io/run-id": label_value(key.run_id),
            LABEL_TRY: str(key.try_number),
            LABEL_TI_HASH: key.ti_hash,
            LABEL_JOB: name,
        }
    )
    return labels


def job_annotations(key: TaskInstanceKey) -> dict[str, str]:
    return {
        "skiff.io/dag-id": key.dag_id,
        "skiff.io/task-id": key.task_id,
        "skiff.io/run-id": key.run_id,
        "skiff.io/map-index": str(key.map_index),
        "skiff.io/try-number": str(key.try_number),
        **({"skiff.io/run-after": key.run_after} if key.run_after else {}),
        ANNOTATION_CLEARS: str(key.clear_number),
    }


def ti_selector(key: TaskInstanceKey) -> str:
    """Label selector for every Job of this task instance, whatever the try."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{LABEL_TI_HASH}={key.ti_hash}"
