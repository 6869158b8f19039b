"""The idle culler: stop every running instance whose idle signal (``idle.py``) is older than the limit.

One pass, level-triggered: whatever ran before, each running instance is looked at once, and one instance's
error is that instance's line in the summary, not the end of the pass. Instances are looked at concurrently on
``READERS`` threads, each idle signal read within the access layer's bound for user content: an instance that
floods, drips or hangs costs its thread at most that bound and never delays another instance (issue 30).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from operators.devinstances import idle, lifecycle, metrics, naming
from operators.devinstances.settings import Settings
from operators.k8s.resource import STATEFULSETS
from operators.k8s.rest import Kube

log = logging.getLogger("skiff.devinstances.culler")
READERS = 8  # instances looked at once


def _one(kube: Kube, sts: dict, settings: Settings, now: datetime) -> tuple[str, str]:
    """("stopped" | "kept" | "errors", "ns/name: why") for one running instance."""
    meta = sts["metadata"]
    ns, sts_name = meta["namespace"], meta["name"]
    ref = f"{ns}/{sts_name}"
    try:
        last, error = idle.read_last_activity(kube, ns, sts_name)
        verdict = idle.decide(last, now, settings.idle_seconds, error)
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
        worker = kube.fork(connections=READERS)
        with ThreadPoolExecutor(max_workers=min(READERS, len(running)), thread_name_prefix="skiff-cull") as pool:
            for key, line in pool.map(lambda sts: _one(worker, sts, settings, now), running):
                summary[key].append(line)
    for key in ("stopped", "kept", "errors"):
        for line in summary[key]:
            (log.error if key == "errors" else log.info)("%s %s", key, line)
    metrics.instances_culled(summary)
    return summary
