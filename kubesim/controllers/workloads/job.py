"""The Job controller: pods `<job>-<5 random>`, parallelism and completions, backoffLimit,
activeDeadlineSeconds, suspend, TTL after finished, and the Complete/Failed conditions; Indexed Jobs and
podFailurePolicy (indexed.py).

Upstream: pkg/controller/job/job_controller.go (`syncJob`, `manageJob`, `pastBackoffLimitOnFailure`,
`pastActiveDeadline`, `getFailJobMessage`), pkg/controller/job/indexed_job_utils.go,
pkg/controller/job/pod_failure_policy.go, pkg/controller/ttlafterfinished/ttlafterfinished_controller.go.
"""
from __future__ import annotations

import copy

from kubesim.apimachinery.clock import parse_time
from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import ControllerContext, Key, key_of
from kubesim.controllers.workloads import indexed
from kubesim.controllers.workloads.owned import (
    TERMINAL,
    OwnerController,
    active,
    condition,
    controller_uid,
    pod_phase,
    pod_ready,
)


def job_finish(spec: dict, succeeded: int, failures: int, running: int, elapsed: float) -> tuple | None:
    """Whether a Job is finished, as (outcome, reason, message); checked in the real controller's order:
    activeDeadlineSeconds, backoffLimit, then completions (no completions: one success and none running)."""
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and elapsed >= deadline:
        return "Failed", "DeadlineExceeded", "Job was active longer than specified deadline"
    if failures > int(spec.get("backoffLimit", 6)):
        return "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
    completions = spec.get("completions")
    if (completions is not None and succeeded >= completions) or (
            completions is None and succeeded > 0 and not running):
        return "Complete", "CompletionsReached", "Reached expected number of succeeded pods"
    return None


def job_pods_wanted(spec: dict, succeeded: int) -> int:
    """How many pods should be active: parallelism, capped by the completions still missing."""
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    if completions is None:
        return parallelism if succeeded == 0 else 0
    return max(0, min(parallelism, completions - succeeded))


class JobController(OwnerController):
    """batch/v1 Jobs: pods `<job>-<5 random>`, backoffLimit, activeDeadlineSeconds, suspend, TTL, conditions."""

    name = "job-controller"
    kind = ("batch", "jobs")
    component = "job-controller"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.counted: dict[str, set[str]] = {}    # job uid -> uids of finished pods already in its status
        self.lost: dict[str, dict[str, dict]] = {}  # job uid -> {uid: last seen} of pods deleted before they finished
        self.removing: set[str] = set()           # pods this controller deletes itself (not failures)

    def reset(self) -> None:
        super().reset()
        self.counted.clear()
        self.lost.clear()
        self.removing.clear()

    def on_event(self, event_type, rt, obj, old):
        if event_type == "DELETED" and (rt.group, rt.plural) == self.child:
            uid, owner = obj["metadata"]["uid"], controller_uid(obj)
            if owner and pod_phase(obj) not in TERMINAL and uid not in self.removing:
                # as the real controller (pod tracking finalizers): a pod deleted before it finished failed
                self.lost.setdefault(owner, {})[uid] = obj
            self.removing.discard(uid)
        elif event_type == "DELETED" and (rt.group, rt.plural) == self.kind:
            self.counted.pop(obj["metadata"]["uid"], None)
            self.lost.pop(obj["metadata"]["uid"], None)
        super().on_event(event_type, rt, obj, old)

    def delete_child(self, owner: dict, child: dict, event: bool = True) -> None:
        self.removing.add(child["metadata"]["uid"])
        super().delete_child(owner, child, event)

    def reconcile(self, key: Key) -> None:
        job = self.current(key)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return
        spec, status = job["spec"], copy.deepcopy(job.get("status") or {})
        now = self.cluster.now()
        conds = status.get("conditions") or []
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds):
            self._ttl(job, status)
            return
        pods = self.owned(job)
        # As the real controller: status.succeeded/failed are what was counted so far; each pod that
        # finished since is added once (the real one marks counted pods by removing its finalizer).
        # the pods counted in this pass join `self.counted` only once the status that counts them is written (a
        # 409 leaves them to count again on the retry; a pod deleted meanwhile stays in `self.lost`)
        counted = set(self.counted.setdefault(job["metadata"]["uid"], set()))
        lost = self.lost.pop(job["metadata"]["uid"], {})
        self._pass = (job, counted, lost)
        succeeded, failed = int(status.get("succeeded") or 0), int(status.get("failed") or 0)
        policy = spec.get("podFailurePolicy")
        is_indexed = indexed.is_indexed(spec)
        completions = int(spec.get("completions") or 0)
        done_indexes = indexed.parse_intervals(status.get("completedIndexes"), completions) if is_indexed else []
        fail_job = None     # getFailJobMessage: the first failed pod a FailJob rule matches
        newly_failed = [p for uid, p in lost.items() if uid not in counted]
        for p in pods:
            if p["metadata"]["uid"] in self.removing:
                continue    # deleted by this controller (suspend, finish, surplus): its finalizer went first, uncounted
            if pod_phase(p) in TERMINAL and p["metadata"]["uid"] not in counted:
                if pod_phase(p) == "Succeeded":
                    counted.add(p["metadata"]["uid"])
                    if not is_indexed:
                        succeeded += 1
                    elif (i := indexed.completion_index(p)) is not None and i < completions:
                        done_indexes = indexed.with_indexes(done_indexes, [i])
                else:
                    newly_failed.append(p)
        for p in newly_failed:
            counted.add(p["metadata"]["uid"])
            message, counts, _ = indexed.match_failure_policy(policy, p)
            fail_job = fail_job or message
            failed += 1 if counts else 0
        if is_indexed:
            succeeded = indexed.total(done_indexes)
            status["completedIndexes"] = indexed.format_intervals(done_indexes)
        running = [p for p in pods if active(p)]
        failures = failed    # for backoffLimit; with OnFailure, container restarts count too (as in 1.31)
        if spec.get("template", {}).get("spec", {}).get("restartPolicy") == "OnFailure":
            failures += sum(cs.get("restartCount", 0) for p in running
                            for cs in (p.get("status") or {}).get("containerStatuses") or [])

        if spec.get("suspend"):
            # job_controller.go manageJob: a suspended Job's active pods go through deleteJobPods, which removes
            # each pod's tracking finalizer before the DELETE, so trackJobStatusAndRemoveFinalizers never counts
            # them as failed (delete_child marks them `removing`): a preempted Job with backoffLimit 0 lives on
            for p in running:
                self.delete_child(job, p)
            if not any(c["type"] == "Suspended" and c["status"] == "True" for c in conds):
                conds = [c for c in conds if c["type"] != "Suspended"] + [
                    condition("Suspended", "True", "JobSuspended", "Job suspended", now)]
                self.events.record(job, "Normal", "Suspended", "Job suspended")
            status.pop("startTime", None)
            self._status(job, status, [], succeeded, failed, conds)
            return
        if any(c["type"] == "Suspended" and c["status"] == "True" for c in conds):
            conds = [c for c in conds if c["type"] != "Suspended"] + [
                condition("Suspended", "False", "JobResumed", "Job resumed", now)]
            self.events.record(job, "Normal", "Resumed", "Job resumed")
        status.setdefault("startTime", now)

        elapsed = (self.store.clock.now() - parse_time(status["startTime"])).total_seconds()
        finish = ("Failed", "PodFailurePolicy", fail_job) if fail_job else \
            job_finish(spec, succeeded, failures, len(running), elapsed)
        if finish is None and spec.get("activeDeadlineSeconds") is not None:
            self.queue.add_after(key, spec["activeDeadlineSeconds"] - elapsed)
        if finish is not None:
            outcome, reason, message = finish
            for p in running:
                self.delete_child(job, p)
            first = "SuccessCriteriaMet" if outcome == "Complete" else "FailureTarget"
            conds = [c for c in conds if c["type"] not in (first, outcome)] + [
                condition(first, "True", reason, message, now), condition(outcome, "True", reason, message, now)]
            if outcome == "Complete":
                status["completionTime"] = now
                self.events.record(job, "Normal", "Completed", "Job completed")
            else:
                self.events.record(job, "Warning", reason, message)
            job = self._status(job, status, [], succeeded, failed, conds)
            self._ttl(job, job.get("status") or {})
            return

        want = job_pods_wanted(spec, succeeded)
        template = spec.get("template") or {}
        if is_indexed:
            for p in indexed.duplicates_for_removal(running, completions):
                self.delete_child(job, p)
                running.remove(p)
            indexes = indexed.pending_indexes(running, done_indexes, want - len(running), completions)
            pods_to_make = [(indexed.index_template(job, template, i),
                             indexed.generate_name(job["metadata"]["name"], i)) for i in indexes]
        else:
            pods_to_make = [(template, f"{job['metadata']['name']}-")] * max(want - len(running), 0)
        for tmpl, prefix in pods_to_make:
            pod = self.pod_from_template(job, tmpl, generate_name=prefix)
            created = self.create_child(job, pod)
            if created is None:
                break
            running.append(created)
            self.events.record(job, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        if len(running) > max(want, 0):
            # activePodsForRemoval: the pods in the earliest stage go first (here: the last created)
            keep = sorted(running, key=lambda p: (indexed.completion_index(p) or 0) if is_indexed else 0)
            for p in keep[max(want, 0):]:
                self.delete_child(job, p)
            running = keep[:max(want, 0)]
        self._status(job, status, running, succeeded, failed, conds)

    def _status(self, job: dict, status: dict, running: list[dict], succeeded: int, failed: int,
                conds: list[dict]) -> dict:
        written = self._write_status(job, status, running, succeeded, failed, conds)
        seen, counted, lost = self._pass
        uid = seen["metadata"]["uid"]
        if written is seen or written["metadata"].get("resourceVersion") != seen["metadata"].get("resourceVersion"):
            self.counted[uid] = counted
        else:                                   # not written (409): count them again on the retry
            for k, v in lost.items():
                self.lost.setdefault(uid, {}).setdefault(k, v)
        return written

    def _write_status(self, job: dict, status: dict, running: list[dict], succeeded: int, failed: int,
                      conds: list[dict]) -> dict:
        status = {k: v for k, v in status.items() if k not in ("active", "succeeded", "failed")}
        if running:
            status["active"] = len(running)
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        status["ready"] = sum(1 for p in running if pod_ready(p))
        status["terminating"] = 0
        status["uncountedTerminatedPods"] = {}
        if conds:
            status["conditions"] = conds
        return self.write_status(job, status)

    def _ttl(self, job: dict, status: dict) -> None:
        """ttlSecondsAfterFinished: the TTL-after-finished controller deletes the Job (Background)."""
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            return
        done = [c for c in status.get("conditions") or [] if c["type"] in ("Complete", "Failed")]
        finished_at = status.get("completionTime") or (done[0]["lastTransitionTime"] if done else None)
        finished = parse_time(finished_at) if finished_at else None
        if finished is None:
            return
        left = ttl - (self.store.clock.now() - finished).total_seconds()
        if left > 0:
            self.queue.add_after(key_of(job), left)
            return
        try:
            self.store.delete(self.rt, job["metadata"]["namespace"], job["metadata"]["name"],
                              propagation="Background", preconditions={"uid": job["metadata"]["uid"]})
        except ApiError as e:
            if e.code not in (404, 409):
                raise
