"""The Sedna reconcile's event metrics (pure rules, and the one-line calls ``operators.sedna.reconcile`` makes)."""

from __future__ import annotations

from collections.abc import Mapping

from operators.metrics import catalogue as c
from operators.metrics.emit import send

# Sedna action reasons (operators.sedna.plan) -> counter; "Removed" (leftovers of a deleted CR) counts nothing
_ACTIONS = {"Created": c.SEDNA_CREATED, "Recreated": c.SEDNA_HEALED, "DriftReverted": c.SEDNA_HEALED,
            "OwnerRepaired": c.SEDNA_HEALED, "RolledOut": c.SEDNA_ROLLED_OUT}


def action_samples(cr_kind: str, namespace: str, reason: str) -> list[tuple[c.Metric, dict, float]]:
    metric = _ACTIONS.get(reason)
    return [(metric, {"team": namespace, "kind": cr_kind}, 1)] if metric else []


def pass_samples(cr_kind: str, summary: Mapping) -> list[tuple[c.Metric, dict, float]]:
    """A reconcile pass's summary (``operators.sedna.reconcile``): pass result, failures, duration."""
    errors = len(summary.get("errors") or [])
    out = [(c.SEDNA_PASSES, {"kind": cr_kind, "result": "failed" if errors else "ok"}, 1),
           (c.SEDNA_PASS_DURATION, {"kind": cr_kind}, float(summary.get("seconds") or 0) * 1000)]
    return out + ([(c.SEDNA_FAILED, {"kind": cr_kind}, errors)] if errors else [])


def sedna_action(cr_kind: str, namespace: str, reason: str) -> None:
    send(action_samples(cr_kind, namespace, reason))


def sedna_pass(cr_kind: str, summary: Mapping) -> None:
    send(pass_samples(cr_kind, summary))
