"""The idle culler: stop every running instance whose idle signal (``idle.py``) is older than the limit.

One pass, level-triggered: whatever ran before, each running instance is looked at once, and one instance's
error is that instance's line in the summary, not the end of the pass.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from operators.devinstances import idle, lifecycle, naming
from operators.devinstances.settings import Settings

log = logging.getLogger("skiff.devinstances.culler")


def cull(api_client, settings: Settings, now: datetime | None = None) -> dict:
    """``{"stopped": [...], "kept": [...], "errors": [...]}``, each entry ``"ns/name: why"``."""
    from kubernetes import client

    now = now or datetime.now(UTC)
    apps = client.AppsV1Api(api_client)
    summary: dict[str, list[str]] = {"stopped": [], "kept": [], "errors": []}
    for sts in apps.list_stateful_set_for_all_namespaces(label_selector=naming.all_selector()).items:
        meta = sts.metadata
        ref = f"{meta.namespace}/{meta.name}"
        if not (sts.spec.replicas or 0):
            continue
        try:
            last, error = idle.read_last_activity(api_client, meta.namespace, meta.name)
            verdict = idle.decide(last, now, settings.idle_seconds, error)
            if verdict.idle:
                ann = meta.annotations or {}
                lifecycle.stop(api_client, ann.get(naming.ANN_OWNER, ""), meta.namespace,
                               (meta.labels or {}).get(naming.LABEL_INSTANCE, ""))
                summary["stopped"].append(f"{ref}: {verdict.why}")
            else:
                summary["kept"].append(f"{ref}: {verdict.why}")
        except Exception as exc:  # noqa: BLE001 - one instance's failure is its own line
            summary["errors"].append(f"{ref}: {exc}")
    for key in ("stopped", "kept", "errors"):
        for line in summary[key]:
            (log.error if key == "errors" else log.info)("%s %s", key, line)
    return summary
