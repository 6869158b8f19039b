"""Plain Kueue objects for replaying Kueue's own scheduler tables against `kubesim.kueue.cycle.run`.

Shaped like kubernetes-sigs/kueue `pkg/util/testing/v1beta2` wrappers (MakeClusterQueue, MakeWorkload,
SimpleReserveQuota): what `pkg/scheduler/scheduler_test.go` TestSchedule builds its cases from. The tables are
unit tests of Kueue's scheduler over its cache, so the replay is one cycle pass over the same objects.
"""
from __future__ import annotations

from kubesim.kueue import cycle


def cq(name: str, flavors: list[tuple[str, dict]], cohort: str | None = None, within: str | None = None,
       reclaim: str | None = None, resources: tuple[str, ...] | None = None, **spec) -> dict:
    """flavors: [(flavor, {resource: nominal | {nominalQuota, borrowingLimit, lendingLimit}})], in order."""
    covered = resources or tuple(dict.fromkeys(r for _, res in flavors for r in res))
    out = {"metadata": {"name": name}, "spec": {
        "namespaceSelector": {}, **spec,
        "resourceGroups": [{"coveredResources": list(covered), "flavors": [
            {"name": f, "resources": [{"name": r, **(q if isinstance(q, dict) else {"nominalQuota": str(q)})}
                                      for r, q in res.items()]} for f, res in flavors]}]}}
    if cohort:
        out["spec"]["cohortName"] = cohort
    preemption = {k: v for k, v in (("withinClusterQueue", within), ("reclaimWithinCohort", reclaim)) if v}
    if preemption:
        out["spec"]["preemption"] = preemption
    return out


def flavor(name: str, **spec) -> dict:
    return {"metadata": {"name": name}, "spec": spec}


def workload(name: str, namespace: str, queue: str, requests: dict, priority: int = 0, created: str = "",
             uid: str | None = None, job_uid: str | None = None, pod_spec: dict | None = None) -> dict:
    md = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
          "creationTimestamp": created or "2026-01-01T00:00:00Z"}
    if job_uid:
        md["labels"] = {"kueue.x-k8s.io/job-uid": job_uid}
    spec = {**(pod_spec or {}), "containers": [{"name": "c", "resources": {"requests": {
        r: str(v) for r, v in requests.items()}}}]}
    return {"metadata": md, "spec": {"queueName": queue, "priority": priority, "podSets": [
        {"name": "main", "count": 1, "template": {"spec": spec}}]}, "status": {}}


def reserve(wl: dict, cluster_queue: str, flavor_name: str, at: str = "2026-01-01T00:00:00Z") -> dict:
    """SimpleReserveQuota: admitted in `cluster_queue` with every resource on `flavor_name`."""
    requests = wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
    wl["status"] = {"admission": {"clusterQueue": cluster_queue, "podSetAssignments": [
        {"name": "main", "count": 1, "flavors": {r: flavor_name for r in requests}, "resourceUsage": dict(requests)}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": at},
                       {"type": "Admitted", "status": "True", "lastTransitionTime": at}]}
    return wl


def local_queues(*entries: tuple[str, str, str]) -> dict:
    """(namespace, name, cluster queue) -> the LocalQueues `cycle.run` takes."""
    return {(ns, name): {"metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": c}}
            for ns, name, c in entries}


def run(cqs: list[dict], lqs: dict, flavors: list[dict], workloads: list[dict], namespaces=None,
        hashes=None, cycles=None, preemptors=None) -> cycle.Decisions:
    spaces = namespaces if namespaces is not None else {
        ns: {} for ns in {w["metadata"]["namespace"] for w in workloads} | {k[0] for k in lqs}}
    return cycle.run({c["metadata"]["name"]: c for c in cqs}, lqs, {f["metadata"]["name"]: f for f in flavors},
                     workloads, spaces, hashes, cycles, preemptors)
