"""Development instances' event metrics (pure rules, and the one-line calls the instance operators and the
culler make)."""

from __future__ import annotations

from collections.abc import Mapping

from operators.metrics import catalogue as c
from operators.metrics.emit import send


def action_samples(action: str, namespace: str, changed: bool) -> list[tuple[c.Metric, dict, float]]:
    metric = c.INSTANCE_ACTIONS.get({"create": "created", "start": "started", "stop": "stopped",
                                     "delete": "deleted"}.get(action, ""))
    return [(metric, {"team": namespace}, 1)] if metric and changed else []


def culled_samples(summary: Mapping) -> list[tuple[c.Metric, dict, float]]:
    """The culler's summary: one count per stopped ``"<namespace>/<name>: why"`` line, by team."""
    teams: dict[str, int] = {}
    for line in summary.get("stopped") or []:
        ns = line.split("/", 1)[0]
        teams[ns] = teams.get(ns, 0) + 1
    return [(c.INSTANCES_CULLED, {"team": ns}, n) for ns, n in sorted(teams.items())]


def instance_action(action: str, namespace: str, changed: bool) -> None:
    send(action_samples(action, namespace, changed))


def instances_culled(summary: Mapping) -> None:
    send(culled_samples(summary))
