"""Kueue's mutating webhooks, as one admission plugin: a queued Job is created suspended
(pkg/controller/jobframework/defaults.go `ApplyDefaultForSuspend`, jobs/job/job_webhook.go), a queued
StatefulSet passes its queue name to its pods' template (jobs/statefulset/statefulset_webhook.go), and a
queued StatefulSet's pod is gated until its Workload is admitted (jobs/pod/pod_webhook.go). With the
Configuration's `manageJobsWithoutQueueName` (config.py), a Job without a queue name in a managed namespace is
suspended too, and a bare pod (no controller) gated: neither runs until it is given a queue and admitted.
"""
from __future__ import annotations

from kubesim.kueue import config, statefulsets
from kubesim.kueue import workload as wlib
from kubesim.kueue.controller import installed


class Webhook:
    """Kueue's mutating webhooks for Jobs, StatefulSets and their pods (an admission plugin)."""

    def __init__(self, store):
        self.store = store

    def __call__(self, req) -> None:
        if req.operation != "CREATE" or req.obj is None or not installed(self.store):
            return
        labels = req.obj["metadata"].get("labels") or {}
        kind = (req.rt.group, req.rt.plural)
        queue = labels.get(wlib.QUEUE_LABEL)
        if kind == ("batch", "jobs") and queue:
            req.obj.setdefault("spec", {})["suspend"] = True
        elif kind == ("apps", "statefulsets") and queue:
            # statefulset_webhook.go: the queue name reaches the pods through the template
            tmd = req.obj.setdefault("spec", {}).setdefault("template", {}).setdefault("metadata", {})
            tmd.setdefault("labels", {})[wlib.QUEUE_LABEL] = queue
        elif kind == ("", "pods") and queue:
            if statefulsets.sts_owner(req.obj):
                statefulsets.gate_pod(req.obj)
        elif kind == ("batch", "jobs") and config.manages_without_queue_name(self.store, req.namespace):
            req.obj.setdefault("spec", {})["suspend"] = True
        elif kind == ("", "pods") and not any(r.get("controller") for r in req.obj["metadata"].get("ownerReferences") or []) \
                and config.manages_without_queue_name(self.store, req.namespace):
            statefulsets.add_gate(req.obj)
