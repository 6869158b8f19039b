"""A distributed training step: N workers on N pods, one Indexed Job and a headless Service (pure; issue 35).

``TrainingJobOperator(workers=N)``, N >= 2 (1 is the single-pod step, unchanged):

* The Job has ``completionMode: Indexed`` and ``completions = parallelism = N``: the Job controller gives each
  pod its completion index (the rank), the hostname ``<job>-<rank>`` and keeps the template's ``subdomain``;
  the step succeeds when every index has succeeded. ``backoffLimit: 0`` and a ``podFailurePolicy`` rule
  ``FailJob`` on any non-zero exit code end the Job at the first failed rank, with the Job controller's
  message naming the pod and the exit code (pkg/controller/job/pod_failure_policy.go); retries are
  Airflow's and start the whole gang again.
* A headless Service (``clusterIP: None``) named like the Job selects its pods
  (``batch.kubernetes.io/job-name``) and publishes not-ready addresses, so each rank is
  ``<job>-<rank>.<job>.<namespace>.svc`` in cluster DNS from the moment it has an IP (the ranks start at
  slightly different times and find each other by name while they come up). It is owned by the Job
  (ownerReference): it goes when the Job goes.
* Each worker's environment: ``SKIFF_WORKERS``, ``SKIFF_RANK``, ``SKIFF_MASTER_ADDR`` (rank 0's name),
  ``SKIFF_MASTER_PORT``; torchrun's static rendezvous variables ``MASTER_ADDR``, ``MASTER_PORT``,
  ``WORLD_SIZE``, ``RANK`` and ``NODE_RANK``; and ``TF_CONFIG`` for TensorFlow's
  MultiWorkerMirroredStrategy (every worker at ``<name>:2222``, ``task.index`` its rank). The rank comes
  from the pod's completion-index annotation through the downward API (``JOB_COMPLETION_INDEX``, set first so
  that the others can name it as ``$(JOB_COMPLETION_INDEX)``: the kubelet expands a variable defined earlier).
"""

from __future__ import annotations

import json

from operators.core.checks import invalid

MAX_WORKERS = 64          # a bound on one step's pods (Kubernetes allows 100000 indexes)
MASTER_PORT = 29500       # torch.distributed's default
TF_PORT = 2222            # TensorFlow's customary worker port
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
INDEX_ENV = "JOB_COMPLETION_INDEX"
ENV_NAMES = ("SKIFF_WORKERS", "SKIFF_RANK", "SKIFF_MASTER_ADDR", "SKIFF_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT",
             "WORLD_SIZE", "RANK", "NODE_RANK", "TF_CONFIG", INDEX_ENV)


def workers_count(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORKERS:
        raise invalid("workers", value, f"must be a whole number from 1 to {MAX_WORKERS} (pods of the step)")
    return value


def reserve(workers: int) -> int:
    """Characters the Job name leaves for the pods' hostnames `<job>-<rank>` (a DNS label: <= 63)."""
    return len(f"-{workers - 1}") if workers > 1 else 0


def service_name(job: str) -> str:
    """The headless Service's name: the Job's (a DNS-1035 label must start with a letter)."""
    return job if job[:1].isalpha() else ("w" + job)[:63]


def rank_name(job: str, namespace: str, rank: int) -> str:
    return f"{job}-{rank}.{service_name(job)}.{namespace}.svc"


def env(job: str, namespace: str, workers: int) -> dict[str, str]:
    """The gang's variables (after ``JOB_COMPLETION_INDEX``, which the template sets from the annotation)."""
    master = rank_name(job, namespace, 0)
    rank = f"$({INDEX_ENV})"
    tf = {"cluster": {"worker": [f"{rank_name(job, namespace, r)}:{TF_PORT}" for r in range(workers)]},
          "task": {"type": "worker", "index": "RANK"}}
    tf_config = json.dumps(tf, separators=(",", ":")).replace('"RANK"', rank)
    return {"SKIFF_WORKERS": str(workers), "SKIFF_RANK": rank, "SKIFF_MASTER_ADDR": master,
            "SKIFF_MASTER_PORT": str(MASTER_PORT), "MASTER_ADDR": master, "MASTER_PORT": str(MASTER_PORT),
            "WORLD_SIZE": str(workers), "RANK": rank, "NODE_RANK": rank, "TF_CONFIG": tf_config}

