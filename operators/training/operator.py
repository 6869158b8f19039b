"""``TrainingJobOperator``: one training step as a Kubernetes ``batch/v1`` Job (SPEC §1).

Thin shell around pure parts: ``spec`` validates inputs and builds the command, ``manifest`` renders the Job,
``failure`` explains failures, ``jobs`` makes the worker's Job requests (imported where a task runs, so that
parsing a DAG loads no Kubernetes client), ``follow`` watches the Job (in the triggerer by default, or in the
worker).

Crash safety (``ResumableJobMixin``) and the decision on reattaching:
  The Job name contains the try number (``...-t2``), so every try that *creates* a Job creates a new one and a
  failed try's Job stays inspectable.  A retry first asks the mixin's ``task_state_store`` for the Job the
  previous try saved: still active -> reattach to it (same uid, nothing created), succeeded -> done, failed or
  gone -> create this try's Job.  Then, to close the mixin's gap (a worker that died between creating the Job
  and saving its id), ``submit_job`` looks the task instance's Jobs up by the ``skiff.io/ti-hash`` label
  (same for every try of this dag/task/run/map-index) and adopts the newest one that is active or succeeded
  instead of creating a second Job.  An adopted Job keeps its original name (an earlier try number).
  Once a success has been handed back to Airflow the Job is annotated ``skiff.io/success-reported-by-try``;
  such a Job is never adopted *by labels* again, so clearing a successful task really trains again.

  A crash after that annotation but before Airflow stored the success (issue 18, class 8) must not train
  again: Airflow 3.3's ``[state_store] clear_on_success`` deletes the task's stored keys in the very
  transaction that stores SUCCESS, so a stored Job id on a later try proves the success was never stored (a
  crashed try's retry), while a cleared successful task finds nothing stored (a deliberate re-run).  With that
  option on (Skiff's deployments and devstack set it) a stored, succeeded Job is finished whatever its
  annotation says; with it off the annotation decides, and the crash window stays open (a warning says so).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from airflow.providers.common.compat.sdk import AirflowException
from airflow.sdk import BaseOperator
from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
from airflow.sdk.bases.resumablejobmixin import ResumableJobMixin

from operators import settings
from operators.core.checks import invalid
from operators.platform import kueue
from operators.platform.admission import Decision
from operators.training import admission, checkpoint, metrics
from operators.training.manifest import job_manifest, string_map
from operators.training.naming import TaskInstanceKey, ti_selector
from operators.training.spec import TrainingJobSpec, Volume, build_spec, default_pvc
from operators.training.waiting import FollowSettings

SUCCESS_END_LINES = 3   # a succeeded step's last log lines written again from the event (execute_complete)
REPORT_ATTEMPTS = 4     # writes of the "success reported" record before the try fails (get_job_result)
REPORT_BACKOFF = 0.5    # seconds before the first retry, doubled each time


class TrainingJobFailed(AirflowException):
    """The training Job failed; ``reason`` is one line naming the cause, ``log_tail`` the last log lines."""

    def __init__(self, reason: str, log_tail: Sequence[str] = (), job: str | None = None,
                 preemptions: Sequence[str] = (), usage: Sequence[str] = ()) -> None:
        self.reason = reason
        self.log_tail = list(log_tail)
        self.usage = list(usage)  # the end-of-step usage lines (training/usage.py), for the e-mail
        self.job = job
        self.preemptions = list(preemptions)  # Kueue: "<time>: <Preempted message>" of each preemption lived through
        text = f"Training Job {job} failed: {reason}" if job else f"Training failed: {reason}"
        for note in self.preemptions:
            text += f"\n(the Job was preempted by Kueue at {note})"
        if self.log_tail:
            text += f"\n--- last {len(self.log_tail)} log lines ---\n" + "\n".join(self.log_tail)
        super().__init__(text)


def _seconds(field: str, value: timedelta | float | int | None, *, allow_none: bool) -> float | None:
    if value is None:
        if allow_none:
            return None
        raise ValueError(f"{field}=None: a duration is required")
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0 \
            or not math.isfinite(seconds):  # nan and inf would make the task wait forever
        raise ValueError(f"{field}={value!r}: must be a timedelta or a finite number of seconds >= 0")
    return float(seconds)


def clear_on_success() -> bool:
    """Airflow 3.3's ``[state_store] clear_on_success``: the stored keys go with the SUCCESS state."""
    from airflow.configuration import conf

    return conf.getboolean("state_store", "clear_on_success", fallback=False)


def task_instance_key(context: Mapping[str, Any]) -> TaskInstanceKey:
    ti, run = context["ti"], context.get("dag_run")  # the run instance and its pass: naming.py says why
    map_index = getattr(ti, "map_index", -1)
    run_after = getattr(run, "run_after", None)
    return TaskInstanceKey(ti.dag_id, ti.task_id, ti.run_id, int(ti.try_number),
                           -1 if map_index is None else int(map_index),
                           run_after.isoformat() if run_after else "", int(getattr(run, "clear_number", 0) or 0))


class TrainingJobOperator(ResumableJobMixin, BaseOperator):
    """Run a training step as a Kubernetes Job and wait for it, streaming its logs into the task log.

    :param image: container image (required).
    :param entry_path: script to run, relative to ``/root`` (the user's PVC), e.g. ``"recsys/train.py"``;
        ``None`` runs ``exec_command`` alone.
    :param work_dir: directory to ``cd`` into first (default ``/root``).
    :param exec_command: program that runs the entry file: ``"python -u"`` (split once with ``shlex``, never
        given to a shell) or a list of words.
    :param run_args: list of arguments appended after the entry file; each arrives in ``sys.argv`` verbatim.
    :param env: environment variables (dict).
    :param cpu: cores (``2``, ``0.5`` or ``"500m"``); requests == limits.
    :param memory: GiB (``4``, ``0.5``); requests == limits.
    :param gpu: whole number of GPUs (``nvidia.com/gpu``, or the platform file's ``node_pools.gpu.resource``);
        > 0 also adds the GPU toleration (the file's ``node_pools.gpu`` taint).
    :param pvc: PVC mounted at ``/root``; default: the owner's default PVC ``<owner>-home`` (task ``owner``
        lower-cased and DNS-sanitised), the convention of Skiff's team queues.
    :param volumes: extra PVC mounts: ``[Volume(pvc="shared", mount_path="/data", read_only=True)]`` or dicts.
    :param namespace: the team's queue (namespace); ``skiff_default_args(team=...)`` sets it for a whole DAG.
    :param online: production task: tolerate the online pool's taint and *prefer* its nodes (falls back to
        ordinary nodes when the pool is full).  Development/test tasks (False) never tolerate the pool taint.
    :param online_pool_key / online_pool_value: the pool's label/taint; default: the platform file's
        ``node_pools.online`` when one is configured, else Airflow config ``[skiff] online_pool_key`` /
        ``online_pool_value`` (``node.netease.com/node-pool`` / ``online``).
    :param pod_annotations / labels: added to the pod / Job (Skiff's own labels always win).
    :param ttl_seconds_after_finished: Kubernetes deletes the finished Job after this long (None: never).
    :param kubernetes_conn_id: Kubernetes connection (in-cluster, kubeconfig path or kubeconfig in extras);
        default ``[skiff] kubernetes_conn_id``, else ``kubernetes_default``.
    :param deferrable: wait in the triggerer (default) instead of holding a worker slot.
    :param pod_discovery_timeout: how long the Job may exist without any pod before the task fails.
    :param quota_wait: how long a ResourceQuota refusal may last before the task fails with the quota
        message (default 0: fail at once); ``None`` waits for quota as long as the task may run.
    :param unschedulable_timeout: how long a pod may stay unschedulable (no node fits) before failing.
    :param priority_class: with the platform file's ``queueing: kueue``, the Kueue WorkloadPriorityClass of
        the step: ``skiff-online``, ``skiff-scheduled`` or ``skiff-dev``; default ``skiff-online`` for online
        steps, else ``skiff-scheduled``. The Job is created suspended in the team's LocalQueue and Kueue
        starts it; ignored without Kueue.
    :param queue_wait: with Kueue, how long the Job may wait for Kueue to admit it before the task deletes it
        and fails with Kueue's message; default ``None``: as long as the task may run (``execution_timeout``).
    :param termination_grace_period: time between SIGTERM (preemption, deletion, the deadline) and SIGKILL for
        the process to save (``terminationGracePeriodSeconds``); default ``[skiff] training_grace_seconds``.
    :param workers: pods of the step (default 1). N > 1 trains on N workers at once, each with ``cpu``,
        ``memory`` and ``gpu``: one Indexed Job and a headless Service, all N admitted together or not at all,
        each worker told its rank and rank 0's address (torchrun's and TensorFlow's variables:
        ``operators/training/gang.py``); any failed rank fails the step, whose retry starts all N again.
    :param keep_checkpoint: keep the step's checkpoint directory (on the owner's home volume) after it
        succeeded; by default the container removes it once the program exits 0.

    Every step's container gets the checkpoint directory (``/root/.skiff/checkpoints/<dag>/<task>/<run>``, the
    same for every try and preemption), the try number, whether it resumes (a later try, or after a preemption)
    and how often Kueue preempted it, as environment variables: ``checkpoint.py`` names them.

    ``execution_timeout`` becomes the Job's ``activeDeadlineSeconds``; ``backoffLimit`` is 0 because retries
    (with exponential back-off) are Airflow's.
    """

    template_fields: Sequence[str] = (
        "image", "entry_path", "work_dir", "exec_command", "run_args", "env", "cpu", "memory", "gpu", "pvc",
        "namespace", "labels", "pod_annotations",
    )
    template_fields_renderers = {"env": "json", "run_args": "json", "labels": "json", "pod_annotations": "json"}
    ui_color = "#d8ecf3"
    external_id_key = "skiff_training_job"

    def __init__(
        self,
        *,
        image: str,
        entry_path: str | None = None,
        work_dir: str = "/root",
        exec_command: str | Sequence[str] = "python",
        run_args: Sequence[Any] = (),
        env: Mapping[str, Any] | None = None,
        cpu: float | int | str = 1,
        memory: float | int | str = 2,
        gpu: int = 0,
        pvc: str | None = None,
        volumes: Sequence[Volume | Mapping[str, Any]] | None = None,
        namespace: str = "default",
        online: bool = False,
        online_pool_key: str | None = None,
        online_pool_value: str | None = None,
        pod_annotations: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        ttl_seconds_after_finished: int | None = 86400,
        kubernetes_conn_id: str | None = None,
        deferrable: bool = True,
        pod_discovery_timeout: timedelta | float = timedelta(minutes=5),
        quota_wait: timedelta | float | None = timedelta(0),
        unschedulable_timeout: timedelta | float | None = timedelta(minutes=30),
        priority_class: str | None = None,
        queue_wait: timedelta | float | None = None,
        termination_grace_period: timedelta | float | None = None,
        keep_checkpoint: bool = False,
        workers: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.image = image
        self.entry_path = entry_path
        self.work_dir = work_dir
        self.exec_command = exec_command
        # copies of plain values; anything else (an XComArg, a template string) is kept for run time
        self.run_args = list(run_args) if isinstance(run_args, list | tuple) else run_args
        self.env = dict(env) if isinstance(env, Mapping) else ({} if env is None else env)
        self.cpu = cpu
        self.memory = memory
        self.gpu = gpu
        self.pvc = pvc
        self.volumes = list(volumes) if isinstance(volumes, list | tuple) else ([] if volumes is None else volumes)
        self.namespace = namespace
        self.online = online
        self.online_pool_key = online_pool_key
        self.online_pool_value = online_pool_value
        self.pod_annotations = dict(pod_annotations) if isinstance(pod_annotations, Mapping) else (pod_annotations or {})
        self.labels = dict(labels) if isinstance(labels, Mapping) else (labels or {})
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = deferrable
        self.follow_settings = FollowSettings(
            pod_discovery_timeout=_seconds("pod_discovery_timeout", pod_discovery_timeout, allow_none=False),
            quota_wait=_seconds("quota_wait", quota_wait, allow_none=True),
            unschedulable_timeout=_seconds("unschedulable_timeout", unschedulable_timeout, allow_none=True),
            queue_wait=_seconds("queue_wait", queue_wait, allow_none=True),
            usage_interval=settings.get_float("usage_interval_seconds"),
            usage_advice_share=settings.get_float("usage_advice_share"),
        )
        if priority_class is not None and priority_class not in kueue.PRIORITY_NAMES:
            raise invalid("priority_class", priority_class, f"must be one of {', '.join(kueue.PRIORITY_NAMES)} "
                          "(Skiff's Kueue WorkloadPriorityClasses), or None")
        self.priority_class = priority_class
        # None: the setting, read when the Job is built (parsing a DAG reads no configuration)
        self.termination_grace_period = (None if termination_grace_period is None
                                          else checkpoint.grace_seconds(termination_grace_period))
        if not isinstance(keep_checkpoint, bool):
            raise invalid("keep_checkpoint", keep_checkpoint, "must be true or false")
        self.keep_checkpoint = keep_checkpoint
        self.workers = workers
        self._job_ref: dict | None = None
        if not _has_jinja(self):
            self.build_spec()  # bad literal input fails when the DAG is parsed (pure: no file or cluster I/O)
            string_map("labels", self.labels, label_values=True)
            string_map("pod_annotations", self.pod_annotations, label_values=False)

    # ---- pure: inputs -> desired Job ---------------------------------------------------------------------
    def build_spec(self, admitted: Decision | None = None, key: TaskInstanceKey | None = None) -> TrainingJobSpec:
        """The validated spec of these inputs; ``admitted``: the platform's decision to apply (the volumes it
        granted, its node pools), None without a platform file ([skiff] online_pool_key/value then); ``key``:
        the task instance, whose checkpoint directory the command creates (None: not known yet)."""
        pools = admitted.node_pools if admitted else None
        ckpt = checkpoint.checkpoint_dir(key.dag_id, key.task_id, key.run_id, key.map_index) if key else ""
        return build_spec(
            image=self.image, namespace=self.namespace, work_dir=self.work_dir, exec_command=self.exec_command,
            entry_path=self.entry_path, run_args=self.run_args, env=self.env, cpu=self.cpu, memory=self.memory,
            gpu=self.gpu, pvc=self.pvc if self.pvc is not None else default_pvc(self.owner),
            volumes_=admitted.volumes if admitted else self.volumes, online=self.online,
            pool_key=self.online_pool_key or (pools.online_key if pools else settings.get("online_pool_key")),
            pool_value=self.online_pool_value or (pools.online_value if pools else settings.get("online_pool_value")),
            node_pools=pools, checkpoint_dir=ckpt, keep_checkpoint=self.keep_checkpoint, workers=self.workers,
        )

    def build_manifest(self, key: TaskInstanceKey, admitted: Decision | None = None) -> dict:
        grace = self.termination_grace_period
        if grace is None:
            grace = checkpoint.grace_seconds(settings.get_int("training_grace_seconds"))
        return job_manifest(self.build_spec(admitted, key), key, labels=self.labels,
                            pod_annotations=self.pod_annotations, execution_timeout=self.execution_timeout,
                            ttl_seconds_after_finished=self.ttl_seconds_after_finished,
                            queue_labels=dict(admitted.queue_labels) if admitted else None, grace_seconds=grace,
                            restricted=bool(admitted and admitted.restricted))

    # ---- ResumableJobMixin ------------------------------------------------------------------------------------
    def execute(self, context):
        # bad input fails here, then the platform file's rules and the team's quota: before anything is created
        key = task_instance_key(context)
        try:
            admitted = admission.admit(self.build_spec(), self.owner, self.kubernetes_conn_id,
                                       self.follow_settings.quota_wait, self.log, self.priority_class)
        except admission.QueueNotReady as exc:  # Kueue gone or no LocalQueue: an earlier try's Job never starts
            self._drop_left_for_kueue(exc.namespace, key, "no queue can admit it (below), so nothing would ever "
                                      "start it; this try fails without creating one")
            raise
        if admitted and admitted.queued:
            self.follow_settings = replace(self.follow_settings, queued=True)
        self._manifest = self.build_manifest(key, admitted)
        if not self.follow_settings.queued:  # an earlier try's Job suspended for Kueue would never start now
            self._drop_left_for_kueue(self._manifest["metadata"]["namespace"], key,
                                      "the platform file does not queue steps in Kueue now (queueing: quota), so "
                                      "nothing would ever start it; this try creates its own Job (same checkpoint "
                                      "directory)")
        return self.execute_resumable(context)

    def _drop_left_for_kueue(self, namespace: str, key: TaskInstanceKey, why: str) -> None:
        for name in self._jobs().drop_left_for_kueue(namespace, ti_selector(key)):
            self.log.warning("Deleted Job %s/%s: an earlier try left it suspended in Kueue's queue, but %s",
                             namespace, name, why)

    def _jobs(self):
        from operators.training.jobs import TrainingJobs

        return TrainingJobs(self.kubernetes_conn_id)

    def get_job_status(self, external_id, context) -> str:  # asked by the mixin on a retry only
        if (status := self._jobs().status(external_id, task_instance_key(context).clear_number)) == "active":
            metrics.training_reattached(external_id["namespace"])  # the mixin reconnects to it
        if status == "reported":
            if clear_on_success():  # stored yet reported: the try that reported it died before SUCCESS was stored
                self.log.info("Job %s/%s succeeded and its try crashed before Airflow stored the success: "
                              "finishing without training again", external_id["namespace"], external_id["name"])
                return "succeeded"
            self.log.warning("[state_store] clear_on_success is off: cannot tell a retry after a crash from a "
                             "cleared task, so Job %s/%s (already reported) is not reused", external_id["namespace"],
                             external_id["name"])
        return status

    def is_job_active(self, status: str) -> bool:
        return status == "active"

    def is_job_succeeded(self, status: str) -> bool:
        return status == "succeeded"

    def submit_job(self, context) -> dict:
        jobs = self._jobs()
        key = task_instance_key(context)
        adopted = jobs.find_adoptable(self._manifest["metadata"]["namespace"], ti_selector(key), key.clear_number)
        if adopted:
            self.log.info("Adopting Job %s/%s (uid %s) left by an earlier try instead of creating another",
                          adopted["namespace"], adopted["name"], adopted["uid"])
            jobs.ensure_workers_service_of(adopted)  # a crash between the Job and its Service
        self._job_ref = adopted or jobs.create(self._manifest)
        (metrics.training_reattached if adopted else metrics.training_started)(self._job_ref["namespace"])
        if not adopted:
            self.log.info("Created Job %s/%s (uid %s)", *self._job_ref.values())
        return self._job_ref

    def poll_until_complete(self, external_id, context) -> dict:
        # returns the result too: on reconnect the mixin returns whatever this returns (not get_job_result)
        from operators.k8s.connection import async_api_client, conn_id, sync_hook
        from operators.training.follow import follow_job
        from operators.training.trigger import TrainingJobTrigger

        self._job_ref = external_id
        if self.deferrable:
            self.defer(
                trigger=TrainingJobTrigger(namespace=external_id["namespace"], name=external_id["name"],
                                           uid=external_id.get("uid"), kubernetes_conn_id=conn_id(self.kubernetes_conn_id),  # resolved here: the worker's config
                                           settings=self.follow_settings.to_dict(),
                                           not_before=time.time() + settings.get_float("defer_resume_guard_seconds")),
                method_name="execute_complete",
                timeout=self._defer_timeout(context),
            )
        extras = sync_hook(self.kubernetes_conn_id).conn_extras  # no async connection lookup in asyncio.run

        async def _follow() -> dict:
            async with async_api_client(self.kubernetes_conn_id, connection_extras=extras) as api:
                return await follow_job(api, external_id["namespace"], external_id["name"], self.follow_settings,
                                        lambda line: self.log.info("%s", line), uid=external_id.get("uid"))

        self._finish(asyncio.run(_follow()))
        return self.get_job_result(external_id, context)

    def get_job_result(self, external_id, context) -> dict:
        """Called once the Job succeeded: mark it reported, so that only a crashed try's Job is ever adopted.
        The record is retried, and the task fails if it still cannot be written: a success left unrecorded
        would be adopted by a later clear of the task, which would then succeed without training."""
        jobs, try_number = self._jobs(), task_instance_key(context).try_number
        error = None
        for attempt in range(REPORT_ATTEMPTS):
            error = jobs.mark_reported(external_id, try_number)
            if error is None:
                break
            self.log.warning("Could not mark Job %s reported (attempt %d of %d): %s", external_id["name"],
                             attempt + 1, REPORT_ATTEMPTS, error)
            if attempt + 1 < REPORT_ATTEMPTS:
                time.sleep(REPORT_BACKOFF * 2 ** attempt)
        if error is not None:
            raise AirflowException(f"Job {external_id['namespace']}/{external_id['name']} succeeded, but Skiff could "
                                   f"not record that on it ({error}); failing the try rather than leave a success "
                                   "a later clear of the task would take without training (its retry records it)")
        return {k: external_id.get(k) for k in ("namespace", "name", "uid")}

    def _defer_timeout(self, context) -> timedelta | None:
        if self.execution_timeout is None:
            return None
        start = getattr(context.get("ti"), "start_date", None)
        elapsed = (time.time() - start.timestamp()) if start else 0.0
        # a minute of grace: the Job's own activeDeadlineSeconds should end it first, with a clearer reason
        return max(self.execution_timeout - timedelta(seconds=elapsed), timedelta(0)) + timedelta(minutes=1)

    # ---- results, kill, timeout -----------------------------------------------------------------------------
    def execute_complete(self, context, event: dict) -> dict:
        self._job_ref = {k: event.get(k) for k in ("namespace", "name", "uid")}
        if event.get("status") == "success" and event.get("log_tail"):
            # the trigger streamed the pods' lines live, but the triggerer can drop the last ones of a trigger
            # that ends right after them (see TrainingJobTrigger.run): the very end of the log, always, folded;
            # only its last lines, not the whole tail again after the streamed lines (issue 36)
            end = event["log_tail"][-SUCCESS_END_LINES:]
            self.log.info("::group::The pods' last %d log lines (streamed above; again here in case the "
                          "triggerer dropped the end)", len(end))
            for line in end:
                self.log.info("%s", line)
            self.log.info("::endgroup::")
        for line in event.get("usage") or []:  # said by the trigger too; the worker's copy is never dropped
            self.log.info("%s", line)
        self._finish(event)
        return self.get_job_result(self._job_ref, context)

    def _finish(self, result: dict) -> None:
        metrics.training_finished(result)
        job = f"{result['namespace']}/{result['name']}"
        preemptions = result.get("preemptions") or []
        if result["status"] == "success":
            self.log.info("Job %s succeeded%s", job, f" after {len(preemptions)} preemption(s) by Kueue: "
                          + "; ".join(preemptions) if preemptions else "")
            return
        if result.get("kind") in ("fatal", "quota", "unschedulable", "discovery", "queue"):
            # the Job is still active (or queued) but can never progress on its own: remove it (and any pod)
            self._delete_job(result["namespace"], result["name"])
        # the reason on a line of its own, before Airflow's traceback (which ends with it, after the raw event)
        self.log.error("Training Job %s failed: %s", job, result.get("reason") or "unknown")
        raise TrainingJobFailed(result.get("reason") or "unknown", result.get("log_tail") or [], job, preemptions,
                                result.get("usage") or [])

    def _delete_job(self, namespace: str, name: str) -> None:
        deleted, error = self._jobs().delete(namespace, name)
        if deleted:
            self.log.info("Deleted Job %s/%s (propagation Background)", namespace, name)
        elif error:
            self.log.warning("Could not delete Job %s/%s: %s", namespace, name, error)

    def on_kill(self) -> None:
        """Sync mode: the task was killed or timed out: delete the Job (its pods go with it)."""
        if self._job_ref:
            self._delete_job(self._job_ref["namespace"], self._job_ref["name"])

    def resume_execution(self, next_method: str, next_kwargs: dict | None, context):
        if next_method == TRIGGER_FAIL_REPR and (next_kwargs or {}).get("error") == TriggerFailureReason.TRIGGER_TIMEOUT:
            # execution_timeout ran out while deferred: stop this task instance's active Jobs.  (A trigger
            # that *crashed* leaves the Job alone: the retry reattaches to it.)
            for name in self._jobs().active(self.namespace, ti_selector(task_instance_key(context))):
                self._delete_job(self.namespace, name)
        return super().resume_execution(next_method, next_kwargs, context)


def _has_jinja(op: TrainingJobOperator) -> bool:
    def walk(value: Any) -> bool:
        if isinstance(value, str):
            return "{{" in value or "{%" in value
        if isinstance(value, Mapping):
            return any(walk(k) or walk(v) for k, v in value.items())
        if isinstance(value, list | tuple):
            return any(walk(v) for v in value)
        # numbers, None, Volume are static; anything else (an XComArg, a callable...) is resolved at run time
        return not isinstance(value, int | float | Volume | None)

    return any(walk(getattr(op, f, None)) for f in op.template_fields)
