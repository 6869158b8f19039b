"""Kueue's waitForPodsReady (v0.19, enabled by default; `config.wait_for_pods_ready`): an admitted Workload whose
pods are not all ready within `timeout` is evicted and requeued after a backoff, and deactivated after
`backoffLimitCount` requeues - the all-or-nothing start of a gang whose pods cannot all run.

Rule by rule, from kubernetes-sigs/kueue v0.19.2:
- the PodsReady condition (`pkg/controller/jobframework/reconciler.go` ReconcileGenericJob step 5,
  `generatePodsReadyCondition`; `jobs.JobReconciler` writes it): not admitted -> False `WaitForStart` "Not all
  pods are ready or succeeded"; admitted and the Job's ready + succeeded pods >= its pod count
  (`pkg/controller/jobs/job/job_controller.go` PodsReady) -> True `Started` "All pods reached readiness and the
  workload is running" (`Recovered` after a recovery); not ready: none yet -> False `WaitForStart`, after True
  -> False `WaitForRecovery` "At least one pod has failed, waiting for recovery"; written only when its
  (type, status, reason) changes, and then the reconcile ends;
- the timeout (`pkg/controller/core/workload_controller.go` `reconcileNotReadyTimeout`,
  `admittedNotReadyWorkload`): an active, admitted, not evicted Workload with PodsReady not True - `WaitForStart`
  timed from its Admitted condition's lastTransitionTime against `timeout`, `WaitForRecovery` from PodsReady's
  own against `recoveryTimeout` (none: not timed) - is rechecked when its time is up; then, if
  requeueState.count + 1 > backoffLimitCount, `triggerDeactivation` sets DeactivationTarget True
  `RequeuingLimitExceeded` "exceeding the maximum number of re-queuing retries"; otherwise
  `pkg/workload/evict/evict.go` Evict: Evicted True reason `PodsReadyTimeout`, "Exceeded the PodsReady timeout
  <namespace>/<name>", Event `EvictedDueToPodsReadyTimeout`, and `pkg/workload/workload.go` UpdateRequeueState:
  count + 1, requeueAt = now + min(backoffBaseSeconds * 2^(count-1), backoffMaxSeconds) (Kueue adds a jitter of
  at most 0.01%, left out here);
- the Job integration then stops the Job and, once no pod is active, removes the quota reservation and sets
  Requeued False with the eviction's reason and message (reconciler.go step 6: True only for preemption):
  `jobs.JobReconciler` step 3;
- the backoff (workload_controller.go Reconcile, active Workload): with requeueAt in the future, recheck then; once
  past and the Workload pending, requeueAt is cleared; a Requeued False `PodsReadyTimeout` with no requeueAt left
  becomes Requeued True `BackoffFinished` "The workload backoff was finished". The queue takes the Workload back
  only with Requeued not False and requeueAt not in the future (`pkg/cache/queue/cluster_queue.go`
  `backoffWaitingTimeExpired`: `workload.backoff_expired`, used by `cycle.run`), ordered by its eviction time
  (requeuingStrategy.timestamp Eviction, `Ordering.GetQueueOrderTimestamp`: `workload.queue_order_time`) or its creation (Creation);
- deactivation (same Reconcile): DeactivationTarget True on an active Workload sets `spec.active` false; an
  inactive Workload not yet evicted is evicted with reason `DeactivatedDueToRequeuingLimitExceeded` (the
  DeactivationTarget's reason as the cause, `patching.ReasonWithCause`), "The workload is deactivated due to
  exceeding the maximum number of re-queuing retries", DeactivationTarget and requeueState removed; its Job stays
  suspended (no `workloadRetentionPolicy` is simulated).
Not simulated: `blockAdmission` (the ClusterQueue admitting one not-ready Workload at a time), the metrics, and
PodsReady for a StatefulSet's Workload (Kueue's pod-group integration writes it; kubesim's `statefulsets.py` does
not, so such Workloads are never timed out here: `owned_by_job`).
"""
from __future__ import annotations

import copy
from datetime import timedelta

from kubesim.apimachinery.clock import parse_time
from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Key, key_of
from kubesim.kueue import config
from kubesim.kueue import workload as wlib
from kubesim.kueue.controller import KueueController, installed

NOT_READY = "Not all pods are ready or succeeded"
RECOVERING = "At least one pod has failed, waiting for recovery"
READY = "All pods reached readiness and the workload is running"
TIMEOUT_REASON = wlib.PODS_READY_TIMEOUT
LIMIT_REASON, LIMIT_MESSAGE = "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries"


def job_pods_ready(job: dict, count: int) -> bool:
    """job_controller.go PodsReady: succeeded + ready pods reach the pod set's count."""
    status = job.get("status") or {}
    return int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= count


def pods_ready_condition(wl: dict, ready: bool) -> tuple[bool, str, str]:
    """generatePodsReadyCondition: (status, reason, message)."""
    if not wlib.is_true(wl, "Admitted"):
        return False, "WaitForStart", NOT_READY
    current = wlib.condition(wl, "PodsReady")
    if ready:
        recovered = current is not None and current.get("reason") in ("WaitForRecovery", "Recovered")
        return True, "Recovered" if recovered else "Started", READY
    if current is not None and (current.get("status") == "True" or current.get("reason") == "WaitForRecovery"):
        return False, "WaitForRecovery", RECOVERING
    return False, "WaitForStart", NOT_READY


def has_condition(wl: dict, type_: str, status: bool, reason: str) -> bool:
    """workload.HasConditionWithTypeAndReason."""
    c = wlib.condition(wl, type_)
    return bool(c) and c.get("status") == ("True" if status else "False") and c.get("reason") == reason


def not_ready_timeout(wl: dict, cfg: config.PodsReady, now) -> tuple[str, float]:
    """admittedNotReadyWorkload: (the underlying cause, seconds left) - ("", 0) when nothing is timed."""
    if not wlib.is_true(wl, "Admitted"):
        return "", 0.0
    ready = wlib.condition(wl, "PodsReady")
    if ready is not None and ready.get("status") == "True":
        return "", 0.0
    if ready is None or ready.get("reason") in ("WaitForStart", "PodsReady"):
        since = parse_time(wlib.condition(wl, "Admitted")["lastTransitionTime"])
        return "WaitForStart", max(cfg.timeout - (now - since).total_seconds(), 0.0)
    if ready.get("reason") == "WaitForRecovery" and cfg.recovery_timeout is not None:
        since = parse_time(ready["lastTransitionTime"])
        return "WaitForRecovery", max(cfg.recovery_timeout - (now - since).total_seconds(), 0.0)
    return "", 0.0


def backoff_seconds(count: int, cfg: config.PodsReady) -> float:
    """The wait before requeue number `count` (1, 2, ...): base * 2^(count-1), at most backoffMaxSeconds."""
    return float(min(cfg.backoff_base_seconds * 2 ** max(count - 1, 0), cfg.backoff_max_seconds))


def owned_by_job(wl: dict) -> bool:
    """Only the Job integration writes PodsReady in kubesim (jobs.py); a StatefulSet's Workload (statefulsets.py,
    Kueue's pod-group integration) is not timed here."""
    return any(r.get("kind") == "Job" for r in wl["metadata"].get("ownerReferences") or [])


def pending(wl: dict) -> bool:
    return not wlib.is_true(wl, "QuotaReserved") and not wlib.is_true(wl, "Finished")


class PodsReadyReconciler(KueueController):
    """The waitForPodsReady parts of Kueue's workload controller (see the module's rules)."""

    name = "kueue-workload-controller"

    def on_event(self, event_type, rt, obj, old):
        if rt.group == wlib.GROUP and rt.plural == "workloads" and event_type != "DELETED":
            self.queue.add(key_of(obj))

    def reconcile(self, key: Key) -> None:
        if not installed(self.store):
            return
        rt = self.rt("workloads")
        try:
            wl = self.store.get(rt, *key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        if wlib.is_true(wl, "Finished") or wl["metadata"].get("deletionTimestamp"):
            return
        now_dt, now = self.store.clock.now(), self.cluster.now()
        status = copy.deepcopy(wl.get("status") or {})
        gen = wl["metadata"].get("generation", 1)
        if wl["spec"].get("active") is False:
            target = wlib.condition(wl, "DeactivationTarget")
            evicted = wlib.is_true(wl, "Evicted")
            if evicted and "requeueState" not in status:
                return
            if not evicted:
                message = "The workload is deactivated"
                reason = "Deactivated"
                if target is not None:
                    message += f" due to {target.get('message') or ''}"
                    reason += f"DueTo{target.get('reason') or ''}"
                wlib.set_condition(status, "Evicted", True, reason, message, now, gen)
                self.events.record(wl, "Normal", f"EvictedDueTo{reason}", message)
            status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != "DeactivationTarget"]
            status.pop("requeueState", None)
            self.write_status(rt, wl, status, key)
            return
        if wlib.is_true(wl, "DeactivationTarget"):
            fresh = copy.deepcopy(wl)
            fresh["spec"]["active"] = False
            try:
                self.cluster.observe(rt, self.store.update(rt, *key, fresh))
            except ApiError as e:
                if e.code not in (404, 409):
                    raise
                self.queue.add_after(key, 0.01)
            return
        requeue_at = (status.get("requeueState") or {}).get("requeueAt")
        if requeue_at is not None:
            left = (parse_time(requeue_at) - now_dt).total_seconds()
            if left > 0:
                self.queue.add_after(key, left)
                return
            if pending(wl):
                status["requeueState"].pop("requeueAt")
                self.write_status(rt, wl, status, key)
                return
        requeued = wlib.condition(wl, "Requeued")
        if requeued is not None and requeued.get("status") == "False" and requeued.get("reason") == TIMEOUT_REASON:
            wlib.set_condition(status, "Requeued", True, "BackoffFinished", "The workload backoff was finished", now, gen)
            self.write_status(rt, wl, status, key)
            return
        self._not_ready_timeout(wl, status, key, now_dt, now)

    def _not_ready_timeout(self, wl: dict, status: dict, key: Key, now_dt, now: str) -> None:
        cfg = config.wait_for_pods_ready(self.store)
        if cfg is None or wlib.is_true(wl, "Evicted") or not owned_by_job(wl):
            return
        cause, left = not_ready_timeout(wl, cfg, now_dt)
        if not cause:
            return
        if left > 0:
            self.queue.add_after(key, left)
            return
        gen = wl["metadata"].get("generation", 1)
        count = int((status.get("requeueState") or {}).get("count") or 0)
        if cfg.backoff_limit_count is not None and count + 1 > cfg.backoff_limit_count:
            wlib.set_condition(status, "DeactivationTarget", True, LIMIT_REASON, LIMIT_MESSAGE, now, gen)
            self.write_status(self.rt("workloads"), wl, status, key)
            return
        message = f"Exceeded the PodsReady timeout {key[0]}/{key[1]}"
        at = self.store.clock.rfc3339(now_dt + timedelta(seconds=backoff_seconds(count + 1, cfg)))
        status["requeueState"] = {**(status.get("requeueState") or {}), "count": count + 1, "requeueAt": at}
        wlib.set_condition(status, "Evicted", True, TIMEOUT_REASON, message, now, gen)
        if self.write_status(self.rt("workloads"), wl, status, key) is not None:
            self.events.record(wl, "Normal", f"EvictedDueTo{TIMEOUT_REASON}", message)
