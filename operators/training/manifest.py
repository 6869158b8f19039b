"""The desired training Job as a dict (pure): validated spec + task-instance identity -> template."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta

from operators.core.checks import short_repr
from operators.core.names import is_label_value
from operators.platform.kueue import is_kueue_key
from operators.templating import render
from operators.training import checkpoint, gang
from operators.training.naming import TaskInstanceKey, job_annotations, job_labels, job_name
from operators.training.spec import TrainingJobSpec, label_key

TEMPLATE = "training/job.yaml.j2"
# the uid and gid a step runs as where its namespace enforces Pod Security "restricted" (runAsNonRoot needs a
# number: the image's own user is usually root)
RESTRICTED_UID = 1000
SERVICE_TEMPLATE = "training/workers-service.yaml.j2"


def string_map(field: str, value: Mapping | None, *, label_values: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    if value is not None and not isinstance(value, Mapping):
        raise ValueError(f"{field}={value!r}: must be a dict of key -> value")
    for key, val in (value or {}).items():
        label_key(field, key)
        if is_kueue_key(key):
            raise ValueError(f"{field}[{short_repr(key)}]: Kueue's labels and annotations are Skiff's to set "
                             "(the platform file's queueing decides the queue and priority)")
        if not isinstance(val, str) or (label_values and not is_label_value(val)):
            raise ValueError(f"{field}[{key!r}]={val!r}: is not a valid {'label' if label_values else 'annotation'} value")
        out[key] = val
    return out


def deadline_seconds(execution_timeout: timedelta | None) -> int | None:
    if execution_timeout is None:
        return None
    seconds = math.ceil(execution_timeout.total_seconds())
    if seconds <= 0:
        raise ValueError(f"execution_timeout={execution_timeout!r}: must be positive")
    return seconds


def job_manifest(
    spec: TrainingJobSpec,
    key: TaskInstanceKey,
    *,
    labels: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    execution_timeout: timedelta | None = None,
    ttl_seconds_after_finished: int | None = None,
    queue_labels: Mapping[str, str] | None = None,
    grace_seconds: int = 30,
    restricted: bool = False,
) -> dict:
    """``queue_labels``: the platform's Kueue labels (``Decision.queue_labels``); with them the Job is created
    suspended for Kueue to start. ``restricted``: the namespace enforces Pod Security "restricted"
    (``Decision.restricted``): the step runs as ``RESTRICTED_UID``, no capabilities, seccomp RuntimeDefault."""
    if ttl_seconds_after_finished is not None and (
        isinstance(ttl_seconds_after_finished, bool)
        or not isinstance(ttl_seconds_after_finished, int)
        or ttl_seconds_after_finished < 0
    ):
        raise ValueError(f"ttl_seconds_after_finished={ttl_seconds_after_finished!r}: must be a whole number >= 0")
    name = job_name(key, gang.reserve(spec.workers))
    ours = job_labels(key, name, string_map("labels", labels, label_values=True))
    return render(
        TEMPLATE,
        name=name,
        namespace=spec.namespace,
        labels=ours,
        job_labels={**ours, **(queue_labels or {})},
        queued=bool(queue_labels),
        annotations=job_annotations(key),
        pod_annotations={**string_map("pod_annotations", pod_annotations, label_values=False), **job_annotations(key),
                         **checkpoint.initial_annotations(key.try_number)},
        image=spec.image,
        command=spec.command,
        env={**spec.env, **(checkpoint.env_values(spec.checkpoint_dir, key.try_number) if spec.checkpoint_dir else {})},
        annotation_env=checkpoint.ANNOTATION_ENV if spec.checkpoint_dir else {},
        grace_seconds=grace_seconds,
        cpu=spec.cpu,
        memory_gi=spec.memory_gi,
        gpu=spec.gpu,
        pvc=spec.pvc,
        volumes=[
            {"name": f"vol-{i}", "claim": v.pvc, "mount_path": v.mount_path, "read_only": v.read_only}
            for i, v in enumerate(spec.volumes)
        ],
        online=spec.online,
        pool_key=spec.pool_key,
        pool_value=spec.pool_value,
        node_pools=spec.node_pools,
        active_deadline_seconds=deadline_seconds(execution_timeout),
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        restricted=restricted,
        run_as=RESTRICTED_UID,
        workers=spec.workers,
        subdomain=gang.service_name(name),
        gang_env=gang.env(name, spec.namespace, spec.workers) if spec.workers > 1 else {},
        index_annotation=gang.INDEX_ANNOTATION,
    )


def workers_service(job: dict) -> dict | None:
    """The headless Service of a gang's created Job (None for a single-pod step): owned by the Job."""
    spec = job["spec"]
    if spec.get("completionMode") != "Indexed":
        return None
    md = job["metadata"]
    return render(SERVICE_TEMPLATE, name=gang.service_name(md["name"]), namespace=md["namespace"],
                  labels={k: v for k, v in (md.get("labels") or {}).items() if not is_kueue_key(k)},
                  job_name=md["name"], job_uid=md["uid"],
                  ports=[{"name": "rendezvous", "port": gang.MASTER_PORT}, {"name": "tf", "port": gang.TF_PORT}])
