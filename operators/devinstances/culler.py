"""The idle culler: stop every running instance whose idle signal (``idle.py``) is older than the limit, or, with
``[skiff] devinstance_usage_idle_hours`` set, that is idle by usage (``usage_idle.py``).

One pass, level-triggered: whatever ran before, each running instance is looked at once, and one instance's
error is that instance's line in the summary, not the end of the pass. Instances are looked at concurrently on
``READERS`` threads, each idle signal read within the access layer's bound for user content: an instance that
floods, drips or hangs costs its thread at most that bound and never delays another instance (issue 30).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from operators.devinstances import idle, lifecycle, metrics, naming, usage_idle
from operators.devinstances.settings import Settings
from operators.k8s.resource import PODS, STATEFULSETS, Resource
from operators.k8s.rest import Kube

log = logging.getLogger("skiff.devinstances.culler")
READERS = 8  # instances looked at once
POD_METRICS = Resource("metrics.k8s.io/v1beta1", "pods")  # metrics-server's PodMetrics


class Usage:
    """One pass's usage facts: the instances' pods and their PodMetrics, one list each across namespaces."""

    def __init__(self, kube: Kube, settings: Settings) -> None:
        from operators.k8s import KubeError

        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p
                     for p in kube.list(PODS, None, label_selector=naming.all_selector())}
        try:
            items = kube.list(POD_METRICS, None, label_selector=naming.all_selector())
        except KubeError as exc:
            if exc.status not in (404, 503):  # no metrics API: every instance "no usage reading"
                raise
            items = []
        self.metrics = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in items}
        self.settings = settings

    def verdict(self, kube: Kube, sts: dict, now: datetime) -> idle.Verdict:
        """Idle by usage or not; a busy reading is written on the StatefulSet (``skiff.io/busy-at``)."""
        meta = sts["metadata"]
        key = (meta["namespace"], f"{meta['name']}-0")
        pod = self.pods.get(key)
        if pod is None:
            return idle.Verdict(False, "no pod: left running")
        cpu = usage_idle.pod_cpu(self.metrics.get(key))
        if cpu is not None and cpu >= self.settings.usage_idle_cpu:
            kube.merge_patch(STATEFULSETS, meta["namespace"], meta["name"], {"metadata": {"annotations": {
                usage_idle.ANN_BUSY_AT: now.isoformat()}}})
        since = usage_idle.quiet_since(pod, (meta.get("annotations") or {}).get(usage_idle.ANN_BUSY_AT))
        return usage_idle.decide(cpu, usage_idle.holds_device(pod), since, now, self.settings.usage_idle_seconds,
                                 self.settings.usage_idle_cpu)


def _one(kube: Kube, sts: dict, settings: Settings, now: datetime, usage: Usage | None = None) -> tuple[str, str]:
    """("stopped" | "kept" | "errors", "ns/name: why") for one running instance."""
    meta = sts["metadata"]
    ns, sts_name = meta["namespace"], meta["name"]
    ref = f"{ns}/{sts_name}"
    try:
        last, error = idle.read_last_activity(kube, ns, sts_name)
        verdict = idle.decide(last, now, settings.idle_seconds, error)
        if not verdict.idle and usage is not None:
            by_usage = usage.verdict(kube, sts, now)
            verdict = by_usage if by_usage.idle else idle.Verdict(False, f"{verdict.why}; {by_usage.why}")
        if not verdict.idle:
            return "kept", f"{ref}: {verdict.why}"
        lifecycle.stop(kube, (meta.get("annotations") or {}).get(naming.ANN_OWNER, ""), ns,
                       (meta.get("labels") or {}).get(naming.LABEL_INSTANCE, ""))
        return "stopped", f"{ref}: {verdict.why}"
    except Exception as exc:  # noqa: BLE001 - one instance's failure is its own line
        return "errors", f"{ref}: {exc}"


def cull(kube: Kube, settings: Settings, now: datetime | None = None) -> dict:
    """``{"stopped": [...], "kept": [...], "errors": [...]}``, each entry ``"ns/name: why"``, in listing order.
    Instances are looked at on ``READERS`` threads, each read and stopped on its own: a slow one holds its
    thread (within the read's bound), never the others'."""
    now = now or datetime.now(UTC)
    summary: dict[str, list[str]] = {"stopped": [], "kept": [], "errors": []}
    running = [s for s in kube.list(STATEFULSETS, label_selector=naming.all_selector()) if s["spec"].get("replicas")]
    if running:
        usage = Usage(kube, settings) if settings.usage_idle_seconds > 0 else None
        worker = kube.fork(connections=READERS)
        with ThreadPoolExecutor(max_workers=min(READERS, len(running)), thread_name_prefix="skiff-cull") as pool:
            for key, line in pool.map(lambda sts: _one(worker, sts, settings, now, usage), running):
                summary[key].append(line)
    for key in ("stopped", "kept", "errors"):
        for line in summary[key]:
            (log.error if key == "errors" else log.info)("%s %s", key, line)
    metrics.instances_culled(summary)
    return summary
