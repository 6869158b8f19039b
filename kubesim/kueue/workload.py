"""Kueue's Workload objects: built from a Job or a StatefulSet, and their status conditions.

- name (`pkg/controller/jobframework/workload_names.go` GetWorkloadNameForOwnerWithGVK):
  `<kind>-<owner name>` truncated to 253 - 6, `-`, first 5 hex of sha1(kind, group, name, uid);
- one Workload per Job (`jobframework/reconciler.go` handleJobWithNoWorkload / constructWorkload): a
  controller ownerReference to the Job, label `kueue.x-k8s.io/job-uid`, `spec.queueName` from the
  `kueue.x-k8s.io/queue-name` label, pod set `main` with count = min(parallelism, completions) and the
  Job's pod template (`pkg/controller/jobs/job/job_controller.go` PodSets), priority from the
  `kueue.x-k8s.io/priority-class` WorkloadPriorityClass (`spec.priorityClassRef`, `spec.priority`), else the
  pod's PriorityClass;
- conditions (`pkg/workload/workload.go`, `admissionchecks.go`): QuotaReserved True `QuotaReserved`
  "Quota reserved in ClusterQueue X" / False with the pending reason and message; Admitted
  True "The workload is admitted" / False "The workload has no reservation"; Evicted (reason
  `Preempted`) and Preempted (reason `InClusterQueue`/`InCohortReclamation`), reset to False with
  "Previously: ..." when quota is reserved again (`SetQuotaReservation`); Requeued; Finished
  (`Succeeded`/`Failed`, the Job's condition message).
"""
from __future__ import annotations

import copy
import hashlib

from kubesim.apimachinery.clock import parse_time
from kubesim.apiserver.admission.resourcequota import qty

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
API_VERSION = f"{GROUP}/{VERSION}"
MAX_NAME = 253
PODS_READY_TIMEOUT = "PodsReadyTimeout"     # the Evicted reason of waitForPodsReady (podsready.py)


def workload_name(kind: str, group: str, owner_name: str, owner_uid: str) -> str:
    h = hashlib.sha1(f"{kind}\n{group}\n{owner_name}\n{owner_uid}".encode()).hexdigest()
    prefix = f"{kind.lower()}-{owner_name}"[:MAX_NAME - 1 - 5]
    return f"{prefix}-{h[:5]}"


def priority_of(labels: dict, pod_spec: dict, wpcs: dict[str, dict], pcs: dict[str, dict]) -> tuple[int, dict | None]:
    """(priority, priorityClassRef) as jobframework's constructWorkload / pkg/util/priority resolve them."""
    name = labels.get(PRIORITY_LABEL)
    if name and name in wpcs:
        return int(wpcs[name].get("value") or 0), {"group": GROUP, "kind": "WorkloadPriorityClass", "name": name}
    pc = pod_spec.get("priorityClassName")
    if pc and pc in pcs:
        return int(pcs[pc].get("value") or 0), {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pc}
    return 0, None


# labels the Job controller puts on every Job's pod template (job_controller.go cleanLabels drops them)
JOB_TEMPLATE_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name")


def clean_template(template: dict) -> dict:
    """The pod set template: the owner's pod template without the Job controller's per-Job labels."""
    t = copy.deepcopy(template or {})
    labels = t.setdefault("metadata", {}).get("labels")
    if labels:
        t["metadata"]["labels"] = {k: v for k, v in labels.items() if k not in JOB_TEMPLATE_LABELS}
    t.setdefault("spec", {})
    return t


def build(owner: dict, count: int, template: dict, priority: int, priority_ref: dict | None) -> dict:
    md = owner["metadata"]
    group = owner["apiVersion"].rpartition("/")[0] if "/" in owner["apiVersion"] else ""
    spec = {"queueName": (md.get("labels") or {}).get(QUEUE_LABEL, ""), "active": True,
            "podSets": [{"name": "main", "count": count, "template": clean_template(template)}],
            "priority": priority}
    if not spec["queueName"]:   # a workload managed without a queue name (config.py): queueName,omitempty
        del spec["queueName"]
    if priority_ref:
        spec["priorityClassRef"] = priority_ref
    return {"apiVersion": API_VERSION, "kind": "Workload",
            "metadata": {"name": workload_name(owner["kind"], group, md["name"], md["uid"]),
                         "namespace": md["namespace"], "labels": {JOB_UID_LABEL: md["uid"]},
                         "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                              "name": md["name"], "uid": md["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": spec}


def condition(wl: dict, type_: str) -> dict | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)


def is_true(wl: dict, type_: str) -> bool:
    c = condition(wl, type_)
    return bool(c and c.get("status") == "True")


def set_condition(status: dict, type_: str, value: bool, reason: str, message: str, now: str,
                  generation: int = 1) -> None:
    """apimeta.SetStatusCondition: lastTransitionTime changes only when the status does."""
    conds = status.setdefault("conditions", [])
    new = {"type": type_, "status": "True" if value else "False", "reason": reason,
           "message": message[:32768], "observedGeneration": generation, "lastTransitionTime": now}
    for i, c in enumerate(conds):
        if c.get("type") == type_:
            if c.get("status") == new["status"]:
                new["lastTransitionTime"] = c.get("lastTransitionTime") or now
            conds[i] = new
            return
    conds.append(new)


def _reset(status: dict, type_: str, reason: str, now: str, gen: int) -> None:
    c = next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)
    if c and c.get("status") == "True":
        set_condition(status, type_, False, reason, "Previously: " + (c.get("message") or ""), now, gen)


def reserve(wl: dict, admission: dict, now: str) -> dict:
    """SetQuotaReservation + SyncAdmittedCondition (no admission checks): the new status."""
    gen = wl["metadata"].get("generation", 1)
    status = copy.deepcopy(wl.get("status") or {})
    status["admission"] = admission
    set_condition(status, "QuotaReserved", True, "QuotaReserved",
                  f"Quota reserved in ClusterQueue {admission['clusterQueue']}", now, gen)
    for t in ("Evicted", "Preempted"):
        _reset(status, t, "QuotaReserved", now, gen)
    set_condition(status, "Admitted", True, "Admitted", "The workload is admitted", now, gen)
    return status


def unreserve(wl: dict, reason: str, message: str, now: str) -> dict:
    """UnsetQuotaReservationWithCondition: QuotaReserved False, admission cleared, Admitted False."""
    gen = wl["metadata"].get("generation", 1)
    status = copy.deepcopy(wl.get("status") or {})
    set_condition(status, "QuotaReserved", False, reason, message, now, gen)
    status.pop("admission", None)
    if condition({"status": status}, "Admitted") is not None:
        set_condition(status, "Admitted", False, "NoReservation", "The workload has no reservation", now, gen)
    return status


def evict(wl: dict, reason: str, preempted_reason: str | None, message: str, now: str) -> dict:
    gen = wl["metadata"].get("generation", 1)
    status = copy.deepcopy(wl.get("status") or {})
    set_condition(status, "Evicted", True, reason, message, now, gen)
    if preempted_reason:
        set_condition(status, "Preempted", True, preempted_reason, message, now, gen)
    return status


def usage_of(wl: dict) -> dict[tuple[str, str], object]:
    """(flavor, resource) -> amount reserved by an admitted Workload (status.admission)."""
    out: dict = {}
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        for r, flavor in (psa.get("flavors") or {}).items():
            amount = (psa.get("resourceUsage") or {}).get(r)
            if amount is not None:
                out[(flavor, r)] = out.get((flavor, r), 0) + qty(amount)
    return out


def backoff_expired(wl: dict, now: str | None) -> bool:
    """cluster_queue.go backoffWaitingTimeExpired: Requeued not False and requeueAt (if any) not after `now` (an
    RFC 3339 time; None: only the condition is looked at)."""
    requeued = condition(wl, "Requeued")
    if requeued is not None and requeued.get("status") == "False":
        return False
    at = ((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt")
    return at is None or now is None or parse_time(at) <= parse_time(now)


def queue_order_time(wl: dict, timestamp: str) -> str:
    """Ordering.GetQueueOrderTimestamp for waitForPodsReady: the eviction's time after a PodsReadyTimeout when the
    requeuing timestamp is Eviction, else the creation."""
    ev = condition(wl, "Evicted")
    if timestamp == "Eviction" and ev and ev.get("status") == "True" and ev.get("reason") == PODS_READY_TIMEOUT:
        return ev.get("lastTransitionTime") or ""
    return wl["metadata"].get("creationTimestamp") or ""
