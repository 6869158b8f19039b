"""A training step's admission: the request from its validated spec, the team's quota observed through
``operators.k8s``, the platform's decision (``operators.platform.admission.decide``) applied here.

Applying it: a refusal raises ``AdmissionError`` before anything is created; a wait is logged with what the Job
will do about it (``quota_wait``); the granted volumes (read-only where the file shares them read-only) and the
file's node pools go into the Job through ``TrainingJobOperator.build_manifest(key, decision)``. Without a
platform file (``[skiff] platform_file``) nothing is enforced and there is no decision. With ``queueing: kueue`` the
decision carries Kueue's labels (``Decision.queue_labels``): the Job is created suspended in the team's
LocalQueue and its follower waits for Kueue (``waiting.FollowSettings.queued``). Before that, ``queue_ready`` makes
sure a queue can admit it: on a cluster that does not serve Kueue's API, or in a namespace without the team's
LocalQueue, the step fails at once (``AdmissionError``) and nothing is created - Kueue itself would keep the
Job's Workload pending with "LocalQueue skiff doesn't exist" until someone creates the queue
(kueue pkg/controller/core/workload_controller.go, Reconcile), and the Job suspended forever.
"""

from __future__ import annotations

import logging
import time

from operators.platform.admission import AdmissionError, AdmissionRequest, Decision, decide, enforced_platform
from operators.platform.kueue import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL, not_served
from operators.platform.model import QUOTA_NAME
from operators.training.queued import FIXES
from operators.training.spec import TrainingJobSpec


def admission_request(spec: TrainingJobSpec, owner: str, priority_class: str | None = None) -> AdmissionRequest:
    return AdmissionRequest(team=spec.namespace, user=owner, cpu=spec.cpu, memory=spec.memory_gi + "Gi",
                            gpu=spec.gpu, home=spec.pvc, volumes=spec.volumes, online=spec.online,
                            priority_class=priority_class, workers=spec.workers)


def how_it_waits(quota_wait: float | None) -> str:
    if quota_wait is None:
        return "the Job waits at the quota until it fits (quota_wait=None)"
    if quota_wait > 0:
        return f"the Job waits at the quota up to {quota_wait:g} s (quota_wait) for it to fit"
    return ("quota_wait is 0: the task fails if the quota is still in use when the Job's pod is created "
            "(queue in the team's Airflow pool or set quota_wait)")


def apply(decision: Decision, asked: TrainingJobSpec, owner: str, quota_wait: float | None,
          log: logging.Logger) -> Decision:
    """Raise on a refusal; log a wait and every volume the grant made read-only."""
    if decision.refused:
        raise AdmissionError(decision.reason)
    if decision.waits:
        log.info("%s; %s", decision.reason, how_it_waits(quota_wait))
    if decision.queued:
        labels = dict(decision.queue_labels)
        log.info("queued in Kueue: LocalQueue %s, priority class %s; the Job starts when Kueue admits it",
                 labels.get(QUEUE_NAME_LABEL), labels.get(PRIORITY_CLASS_LABEL))
    for before, after in zip(asked.volumes, decision.volumes, strict=True):
        if after.read_only and not before.read_only:
            log.info("volume %s is shared read-only with %s: mounted read-only", after.pvc, owner)
    return decision


NOT_STARTED = "the step was not started (no Job was created)"
_FIX = FIXES["LocalQueue"]  # the same fix as for Kueue's own "LocalQueue ... doesn't exist"
NO_LOCAL_QUEUE = ("queueing: kueue, but namespace {namespace} has no LocalQueue {queue} (Kueue would keep the Job "
                  "suspended until one exists): {consequence}. " + _FIX[:1].upper() + _FIX[1:])


class QueueNotReady(AdmissionError):
    """No queue can admit the step's Job (Kueue's API not served, or no LocalQueue): a Job an earlier try left
    suspended in ``namespace`` would never start either (the operator deletes it before failing)."""

    def __init__(self, message: str, namespace: str):
        super().__init__(message)
        self.namespace = namespace


def queue_ready(kube, decision: Decision, namespace: str) -> None:
    """Raise ``QueueNotReady`` unless Kueue's API is served and the LocalQueue the Job names exists."""
    from operators.k8s import KubeError
    from operators.k8s.resource import LOCALQUEUES

    queue = dict(decision.queue_labels).get(QUEUE_NAME_LABEL)
    try:
        names = {q["metadata"]["name"] for q in kube.list(LOCALQUEUES, namespace)}
    except KubeError as exc:
        if exc.status == 404:   # the kind is not served: Kueue's CRDs are not installed
            raise QueueNotReady(not_served("LocalQueue", NOT_STARTED), namespace) from None
        raise
    if queue not in names:
        raise QueueNotReady(NO_LOCAL_QUEUE.format(namespace=namespace, queue=queue, consequence=NOT_STARTED),
                            namespace)


def admit(spec: TrainingJobSpec, owner: str, conn_id: str | None, quota_wait: float | None,
          log: logging.Logger, priority_class: str | None = None) -> Decision | None:
    """Observe, decide, apply (``TrainingJobOperator.execute``, before anything is created); None: no platform
    file is enforced."""
    from operators.k8s import Kube, api_client
    from operators.k8s.resource import RESOURCEQUOTAS

    platform = enforced_platform()
    if platform is None:
        return None
    request = admission_request(spec, owner, priority_class)
    kube = Kube(api_client(conn_id))
    namespace = platform.team(spec.namespace).namespace
    quota = kube.get(RESOURCEQUOTAS, namespace, QUOTA_NAME)
    decision = decide(platform, request, (quota or {}).get("status"))
    if decision.queued and not decision.refused:
        queue_ready(kube, decision, namespace)
    if decision.waits and spec.workers > 1:
        decision = wait_for_gang(lambda: decide(platform, request, ((kube.get(RESOURCEQUOTAS, namespace, QUOTA_NAME)
                                                                    or {}).get("status"))),
                                 decision, spec.workers, quota_wait, log)
    return apply(decision, spec, owner, quota_wait, log)


GANG = ("a step of {n} workers is started whole or not at all: a ResourceQuota alone would admit its pods one by "
        "one and leave part of them holding resources while the rest wait")
GANG_POLL = 2.0     # seconds between two reads of the team's quota while a gang waits for room


def wait_for_gang(again, decision: Decision, workers: int, quota_wait: float | None, log: logging.Logger,
                  clock=time.monotonic, sleep=time.sleep) -> Decision:
    """A gang that does not fit the team's quota now: nothing is created until all its pods fit (``again()``
    decides anew on the quota read now); with ``quota_wait`` 0 it fails at once, after ``quota_wait`` seconds
    it fails with the sum it waited for (None: it waits as long as the task may run)."""
    why = GANG.format(n=workers)
    if quota_wait is not None and quota_wait <= 0:
        raise AdmissionError(f"{decision.reason}; {why}, so nothing was created (quota_wait is 0: set it to wait)")
    log.info("%s; %s: nothing is created until all %d fit (quota_wait %s)", decision.reason, why, workers,
             "None: as long as the task may run" if quota_wait is None else f"{quota_wait:g} s")
    deadline = None if quota_wait is None else clock() + quota_wait
    while decision.waits:
        if deadline is not None and clock() >= deadline:
            raise AdmissionError(f"{decision.reason} after waiting {quota_wait:g} s (quota_wait); {why}, so "
                                 "nothing was created")
        sleep(GANG_POLL if deadline is None else max(0.0, min(GANG_POLL, deadline - clock())))
        decision = again()
    log.info("the quota now has room for all %d workers: creating the Job", workers)
    return decision
