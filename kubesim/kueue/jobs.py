"""Kueue's batch/v1 Job integration: one Workload per Job, and the Job suspended or started as its Workload
is admitted, evicted or finished.

Follows kubernetes-sigs/kueue `pkg/controller/jobframework/reconciler.go` ReconcileGenericJob in its
order, with the Job specifics of `pkg/controller/jobs/job/job_controller.go`:
1. a finished Job (Complete/Failed) finishes its Workload (`Finished`, reason Succeeded/Failed, the
   Job condition's message): its quota is released;
2. a Job without a Workload gets one (`workload.build`), and is suspended first if it runs;
2b. with waitForPodsReady (on by default in v0.19), the Workload's PodsReady condition follows the Job's ready and
   succeeded pods (`podsready.pods_ready_condition`; the timeout and requeue are `podsready.PodsReadyReconciler`'s);
3. an evicted Workload (`Evicted` True) stops its Job - `Stop`: suspend, reset `status.startTime`,
   restore the pod template's nodeSelector/tolerations from the Workload's pod set - and once the Job has
   no active pod, its quota reservation is removed (QuotaReserved False, the eviction message) and it is
   requeued (`Requeued` True when preempted);
4. a suspended Job whose Workload is admitted is started - `RunWithPodSetsInfo`: the assigned flavors'
   nodeLabels merged into the template's nodeSelector, their tolerations added, `suspend: false` - with
   Event `Started` "Admitted by clusterQueue X";
5. a running Job whose Workload is not admitted is stopped.
A deleted Job's Workloads are deleted (they are the Job's; Kueue removes them with its finalizer).
A Job without a queue name is Kueue's when the Configuration says so (config.py: manageJobsWithoutQueueName
and managedJobsNamespaceSelector): its Workload's queue name is empty, and it stays suspended.
"""
from __future__ import annotations

import copy

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import EventRecorder, Key, key_of
from kubesim.kueue import config, podsready
from kubesim.kueue import workload as wlib
from kubesim.kueue.controller import KueueController, installed


def job_finished(job: dict) -> tuple[str, bool] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c.get("message") or "", c["type"] == "Complete"
    return None


def pods_count(job: dict) -> int:
    spec = job.get("spec") or {}
    n = int(spec.get("parallelism", 1))
    if spec.get("completions") is not None:
        n = min(n, int(spec["completions"]))
    return n


def merged_template(template: dict, flavors: list[dict]) -> dict:
    """podset.Merge: flavor nodeLabels into nodeSelector, flavor tolerations appended."""
    t = copy.deepcopy(template)
    spec = t.setdefault("spec", {})
    for flavor in flavors:
        fspec = flavor.get("spec") or {}
        if fspec.get("nodeLabels"):
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **fspec["nodeLabels"]}
        for tol in fspec.get("tolerations") or []:
            if tol not in (spec.get("tolerations") or []):
                spec.setdefault("tolerations", []).append(tol)
    return t


class JobReconciler(KueueController):
    name = "kueue-job-controller"

    def __init__(self, cluster):
        super().__init__(cluster)
        self.job_events = EventRecorder(self.store, "kueue-job-controller")
        self.jobs_rt = cluster.rt("jobs", "batch")

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) == ("batch", "jobs"):
            if event_type == "DELETED":
                self._delete_workloads(obj)
            elif self._managed(obj):
                self.queue.add(key_of(obj))
        elif rt.group == wlib.GROUP and rt.plural == "workloads":
            ref = next((r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == "Job"), None)
            if ref:
                self.queue.add((obj["metadata"]["namespace"], ref["name"]))

    def _managed(self, job: dict) -> bool:
        return bool((job["metadata"].get("labels") or {}).get(wlib.QUEUE_LABEL)) or \
            config.manages_without_queue_name(self.store, job["metadata"]["namespace"])

    def _delete_workloads(self, job: dict) -> None:
        rt = self.rt("workloads")
        if rt is None:
            return
        for wl in self.cluster.cache.select(rt, job["metadata"]["namespace"], {wlib.JOB_UID_LABEL: job["metadata"]["uid"]}):
            try:
                self.store.delete(rt, *key_of(wl))
            except ApiError as e:
                if e.code != 404:
                    raise

    def _workload(self, job: dict) -> dict | None:
        found = self.cluster.cache.select(self.rt("workloads"), job["metadata"]["namespace"],
                                          {wlib.JOB_UID_LABEL: job["metadata"]["uid"]})
        return found[0] if found else None

    def reconcile(self, key: Key) -> None:
        if not installed(self.store):
            return
        try:
            job = self.store.get(self.jobs_rt, *key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        if job["metadata"].get("deletionTimestamp") or not self._managed(job):
            return
        wl, now, wl_rt = self._workload(job), self.cluster.now(), self.rt("workloads")
        finished = job_finished(job)
        if finished is not None:                                               # 1
            if wl is not None and not wlib.is_true(wl, "Finished"):
                status = copy.deepcopy(wl.get("status") or {})
                wlib.set_condition(status, "Finished", True, "Succeeded" if finished[1] else "Failed",
                                   finished[0], now, wl["metadata"].get("generation", 1))
                self.write_status(wl_rt, wl, status, key)
                self.job_events.record(job, "Normal", "FinishedWorkload",
                                       f"Workload '{wl['metadata']['namespace']}/{wl['metadata']['name']}' is declared finished")
            return
        suspended = bool(job["spec"].get("suspend"))
        if wl is None:                                                         # 2
            if not suspended:
                job = self._stop(job, None)
            self._create_workload(job)
            return
        if self._pods_ready(job, wl, now, key):                               # 2b
            return
        admitted = wlib.is_true(wl, "Admitted") and bool((wl.get("status") or {}).get("admission"))
        evicted = wlib.condition(wl, "Evicted")
        if evicted and evicted.get("status") == "True":                        # 3
            job = self._stop(job, wl)
            if (wl.get("status") or {}).get("admission") and not (job.get("status") or {}).get("active"):
                status = wlib.unreserve(wl, "Pending", evicted.get("message") or "", now)
                wlib.set_condition(status, "Requeued", evicted.get("reason") == "Preempted", evicted.get("reason") or "",
                                   evicted.get("message") or "", now, wl["metadata"].get("generation", 1))
                self.write_status(wl_rt, wl, status, key)
            return
        if suspended:                                                          # 4
            if admitted:
                self._start(job, wl)
            return
        if not admitted:                                                       # 5
            self._stop(job, wl)

    def _pods_ready(self, job: dict, wl: dict, now: str, key: Key) -> bool:
        """waitForPodsReady on (podsready.py): the Workload's PodsReady condition, written when its status or
        reason changes (then this reconcile ends, as ReconcileGenericJob's step 5 returns)."""
        if config.wait_for_pods_ready(self.store) is None:
            return False
        value, reason, message = podsready.pods_ready_condition(wl, podsready.job_pods_ready(job, pods_count(job)))
        if podsready.has_condition(wl, "PodsReady", value, reason):
            return False
        status = copy.deepcopy(wl.get("status") or {})
        wlib.set_condition(status, "PodsReady", value, reason, message, now, wl["metadata"].get("generation", 1))
        self.write_status(self.rt("workloads"), wl, status, key)
        return True

    def _create_workload(self, job: dict) -> None:
        wpcs = {o["metadata"]["name"]: o for o in self.objects("workloadpriorityclasses")}
        pcs = {o["metadata"]["name"]: o for o in self.cluster.cache.list(self.cluster.rt("priorityclasses", "scheduling.k8s.io", "v1"))} \
            if self.cluster.rt("priorityclasses", "scheduling.k8s.io", "v1") is not None else {}
        template = job["spec"].get("template") or {}
        prio, ref = wlib.priority_of(job["metadata"].get("labels") or {}, template.get("spec") or {}, wpcs, pcs)
        wl = wlib.build(job, pods_count(job), template, prio, ref)
        try:
            self.cluster.observe(self.rt("workloads"), self.store.create(self.rt("workloads"), job["metadata"]["namespace"], wl))
        except ApiError as e:
            if e.code != 409:
                raise
            return
        self.job_events.record(job, "Normal", "CreatedWorkload",
                               f"Created Workload: {job['metadata']['namespace']}/{wl['metadata']['name']}")

    def _update(self, job: dict) -> dict:
        return self.cluster.observe(self.jobs_rt, self.store.update(self.jobs_rt, *key_of(job), job))

    def _stop(self, job: dict, wl: dict | None) -> dict:
        """job_controller.go Stop: suspend, reset startTime, restore the pod set's scheduling directives."""
        try:
            if not job["spec"].get("suspend"):
                job = copy.deepcopy(job)
                job["spec"]["suspend"] = True
                job = self._update(job)
                self.job_events.record(job, "Normal", "Stopped", "Not admitted by cluster queue" if wl is None or
                                       not wlib.is_true(wl, "Evicted") else
                                       (wlib.condition(wl, "Evicted") or {}).get("message", ""))
            if (job.get("status") or {}).get("startTime"):
                job = copy.deepcopy(job)
                job["status"].pop("startTime")
                job = self.cluster.observe(self.jobs_rt, self.store.update(self.jobs_rt, *key_of(job), job, subresource="status"))
            if wl is not None:
                original = (wl["spec"]["podSets"][0].get("template") or {}).get("spec") or {}
                spec = job["spec"]["template"].setdefault("spec", {})
                if (spec.get("nodeSelector"), spec.get("tolerations")) != (original.get("nodeSelector"), original.get("tolerations")):
                    job = copy.deepcopy(job)
                    spec = job["spec"]["template"]["spec"]
                    for f in ("nodeSelector", "tolerations"):
                        if original.get(f) is None:
                            spec.pop(f, None)
                        else:
                            spec[f] = copy.deepcopy(original[f])
                    job = self._update(job)
        except ApiError as e:
            if e.code not in (404, 409):
                raise
            self.queue.add_after(key_of(job), 0.01)
        return job

    def _start(self, job: dict, wl: dict) -> None:
        assignments = (wl["status"]["admission"].get("podSetAssignments") or [{}])
        names = sorted(set((assignments[0].get("flavors") or {}).values()))
        flavors = [f for f in (self.cluster.cache.get(self.rt("resourceflavors"), None, n) for n in names) if f]
        job = copy.deepcopy(job)
        job["spec"]["template"] = merged_template(job["spec"].get("template") or {}, flavors)
        job["spec"]["suspend"] = False
        try:
            job = self._update(job)
        except ApiError as e:
            if e.code not in (404, 409):
                raise
            self.queue.add_after(key_of(job), 0.01)
            return
        self.job_events.record(job, "Normal", "Started",
                               f"Admitted by clusterQueue {wl['status']['admission']['clusterQueue']}")
