"""The idle culler: stop every running instance whose idle signal (``idle.py``) is older than the limit.

One pass, level-triggered: whatever ran before, each running instance is looked at once, and one instance's
error is that instance's line in the summary, not the end of the pass.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from operators.devinstances import idle, lifecycle, naming
from operators.devinstances.settings import Settings
from operators.k8s.resource import STATEFULSETS
from operators.k8s.rest import Kube
from operators.metrics import emit as metrics

log = logging.getLogger("skiff.devinstances.culler")


def cull(kube: Kube, settings: Settings, now: datetime | None = None) -> dict:
    """``{"stopped": [...], "kept": [...], "errors": [...]}``, each entry ``"ns/name: why"``."""
    now = now or datetime.now(UTC)
    summary: dict[str, list[str]] = {"stopped": [], "kept": [], "errors": []}
    for sts in kube.list(STATEFULSETS, label_selector=naming.all_selector()):
        meta = sts["metadata"]
        ns, sts_name = meta["namespace"], meta["name"]
        ref = f"{ns}/{sts_name}"
        if not (sts["spec"].get("replicas") or 0):
            continue
        try:
            last, error = idle.read_last_activity(kube, ns, sts_name)
            verdict = idle.decide(last, now, settings.idle_seconds, error)
            if verdict.idle:
                lifecycle.stop(kube, (meta.get("annotations") or {}).get(naming.ANN_OWNER, ""), ns,
                               (meta.get("labels") or {}).get(naming.LABEL_INSTANCE, ""))
                summary["stopped"].append(f"{ref}: {verdict.why}")
            else:
                summary["kept"].append(f"{ref}: {verdict.why}")
        except Exception as exc:  # noqa: BLE001 - one instance's failure is its own line
            summary["errors"].append(f"{ref}: {exc}")
    for key in ("stopped", "kept", "errors"):
        for line in summary[key]:
            (log.error if key == "errors" else log.info)("%s %s", key, line)
    metrics.instances_culled(summary)
    return summary
