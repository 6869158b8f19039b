"""A training step's checkpoint directory, its resume/preemption env and grace period (pure; issue 28 part 1).

Preemption (Kueue suspends the Job, deletes its pod) and retries (a new Job per try) restart a step's process.
To lose no work, the process needs somewhere that outlives it and to be told that it restarts:

* ``SKIFF_CHECKPOINT_DIR`` = ``/root/.skiff/checkpoints/<dag>/<task>/<run>[.m<map index>]``: on the owner's
  home volume (mounted at ``/root``), one per DAG, task and logical run, the same for every try and every
  preemption of that step, so what one process saved the next one finds. Each component is built from an Airflow
  id and is *checked and bounded*: ``.``/``..`` and NUL are refused (naming the field), characters outside
  ``[A-Za-z0-9._-]`` become ``_``, a leading ``.`` becomes ``_``, and a component changed that way or longer than
  ``MAX_COMPONENT`` keeps a short hash of the original, so two distinct ids never share a directory.
  The container's wrapper script (``spec.SCRIPT``) creates it before the program starts and removes exactly that
  path after the program exited 0 without having been sent SIGTERM, unless ``keep_checkpoint`` (then it stays).
* ``SKIFF_TRY_NUMBER``: Airflow's try number of the Job (a value in the manifest).
* ``SKIFF_RESUME`` (``1`` / ``0``) and ``SKIFF_PREEMPTIONS`` (a count): from the pod's own annotations
  ``skiff.io/resume`` / ``skiff.io/preemptions`` through the downward API (``fieldRef:
  metadata.annotations['...']``), because a Job's env cannot change once created but its pod template's
  annotations can while it is suspended and not started (``pkg/registry/batch/job/strategy.go``
  ``validationOptionsForJob``: ``AllowMutableSchedulingDirectives`` = suspended && startTime nil; the Job
  controller resets ``status.startTime`` when a Job is suspended, ``pkg/controller/job/job_controller.go``
  ``syncJob``). A new try's Job starts with resume ``1``. On a preemption the follower writes the count into the
  suspended Job's template before Kueue starts it again (``preemption_annotations``), so the next pod reads it.
  The count is what Kubernetes/Kueue hold, never a counter kept only in Skiff's memory:
  ``preemption_count`` takes the largest of Kueue's own ``status.schedulingStats.evictions`` count for reason
  ``Preempted`` (Kueue v0.19's Workload API, ``apis/kueue/v1beta1/workload_types.go`` ``WorkloadSchedulingStats``),
  the count already written on the Job's template, and the preemptions the follower saw on the Workload.
* ``terminationGracePeriodSeconds``: how long the process has between SIGTERM and SIGKILL to save.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from operators.core.checks import invalid
from operators.core.volumes import ROOT_MOUNT

CHECKPOINT_ROOT = f"{ROOT_MOUNT}/.skiff/checkpoints"
MAX_COMPONENT = 100  # bytes of one directory name (ext4 allows 255; the three stay well inside PATH_MAX)
_SAFE = re.compile(r"[^A-Za-z0-9._-]")

ENV_DIR = "SKIFF_CHECKPOINT_DIR"
ENV_RESUME = "SKIFF_RESUME"
ENV_PREEMPTIONS = "SKIFF_PREEMPTIONS"
ENV_TRY = "SKIFF_TRY_NUMBER"
RESERVED_ENV = (ENV_DIR, ENV_RESUME, ENV_PREEMPTIONS, ENV_TRY)

ANNOTATION_RESUME = "skiff.io/resume"
ANNOTATION_PREEMPTIONS = "skiff.io/preemptions"
ANNOTATION_ENV = {ENV_RESUME: ANNOTATION_RESUME, ENV_PREEMPTIONS: ANNOTATION_PREEMPTIONS}  # downward API

MAX_GRACE_SECONDS = 24 * 3600  # a day: far beyond any save, bounded so a typo cannot block a node's drain for weeks


def component(field: str, value: Any) -> str:
    """One directory name from an Airflow id: safe characters kept, bounded, distinct ids never merged."""
    if not isinstance(value, str) or not value:
        raise invalid(field, value, "must be a non-empty string")
    if value in (".", "..") or "\x00" in value:
        raise invalid(field, value, "cannot name a checkpoint directory ('.', '..' and NUL are refused)")
    safe = _SAFE.sub("_", value)
    if safe.startswith("."):
        safe = "_" + safe[1:]
    if safe == value and len(safe) <= MAX_COMPONENT:
        return safe
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe[:MAX_COMPONENT - 11]}-{digest}"


def checkpoint_dir(dag_id: str, task_id: str, run_id: str, map_index: int = -1) -> str:
    """The step's directory in the container: ``/root/.skiff/checkpoints/<dag>/<task>/<run>[.m<i>]``."""
    run = component("run_id", run_id)
    if map_index is not None and map_index >= 0:
        run = f"{run}.m{int(map_index)}"
    return f"{CHECKPOINT_ROOT}/{component('dag_id', dag_id)}/{component('task_id', task_id)}/{run}"


def grace_seconds(value: Any) -> int:
    """``terminationGracePeriodSeconds`` from a timedelta or a number of seconds (whole, 0..a day)."""
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds != seconds \
            or not 0 <= seconds <= MAX_GRACE_SECONDS:
        raise invalid("termination_grace_period", value,
                      f"must be a timedelta or a number of seconds from 0 to {MAX_GRACE_SECONDS}")
    return int(-(-seconds // 1))  # a fraction of a second more is a whole second more (the API takes integers)


def initial_annotations(try_number: int) -> dict[str, str]:
    """The pod template's annotations at creation: a later try resumes, no preemption yet."""
    return {ANNOTATION_RESUME: "1" if try_number > 1 else "0", ANNOTATION_PREEMPTIONS: "0"}


def env_values(directory: str, try_number: int) -> dict[str, str]:
    """The env Skiff sets as values (after the user's own); ``ANNOTATION_ENV`` the ones read from annotations."""
    return {ENV_DIR: directory, ENV_TRY: str(try_number)}


def kueue_preemptions(workload: dict | None) -> int:
    """Kueue's own count: ``status.schedulingStats.evictions[reason=Preempted].count`` summed (0 if absent)."""
    stats = (((workload or {}).get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    return sum(int(e.get("count") or 0) for e in stats if isinstance(e, Mapping) and e.get("reason") == "Preempted")


def written_preemptions(job: dict | None) -> int:
    """The count already on the Job's pod template (0 if absent or unreadable)."""
    annotations = ((((job or {}).get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return max(int(annotations.get(ANNOTATION_PREEMPTIONS, 0)), 0)
    except (TypeError, ValueError):
        return 0


def preemption_count(workload: dict | None, job: dict | None, seen: int) -> int:
    return max(kueue_preemptions(workload), written_preemptions(job), seen)


def preemption_annotations(job: dict | None, count: int) -> dict[str, str] | None:
    """The template annotations to write so that the next pod resumes with ``count``; None if already there or
    if the Job cannot take them now (running, or started: the API server refuses a template change then)."""
    if count <= 0 or not job or not (job.get("spec") or {}).get("suspend") or (job.get("status") or {}).get("startTime"):
        return None
    annotations = ((job["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
    want = {ANNOTATION_RESUME: "1", ANNOTATION_PREEMPTIONS: str(count)}
    return None if all(annotations.get(k) == v for k, v in want.items()) else want
