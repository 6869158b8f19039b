"""One table per Sedna CR kind: everything the reconcile, the watch trigger and the DAGs need to know about it.

The reconcile shell (``reconcile.py``), the trigger's watch list (``trigger.watched_resources``) and the DAGs'
asset (``dags.sedna_asset``) read a ``KindSpec`` instead of branching on the kind, so a third Sedna kind is
one more entry here plus its ``desired`` and ``status`` functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from operators.sedna import kube as k
from operators.sedna.desired import (
    FL_KIND,
    FL_LABEL_PREFIX,
    JI_KIND,
    JI_LABEL_PREFIX,
    Desired,
    desired_federated_learning,
    desired_joint_inference,
)
from operators.sedna.plan import fl_status, ji_status


@dataclass(frozen=True)
class Sources:
    """What a CR's children are computed from besides the CR, in its namespace, by name."""

    models: Mapping[str, dict]
    datasets: Mapping[str, dict]
    secrets: Mapping[str, dict | None]  # storage.secret_summary of each Secret named; None = absent


# status(cr, desired, children after this pass's actions, error, error reason, now) -> the new status
StatusFn = Callable[[dict, Desired, dict[str, list[dict]], "str | None", str, str], dict]


@dataclass(frozen=True)
class KindSpec:
    kind: str
    resource: k.Resource  # the CRs
    label_prefix: str  # Sedna's "<kind>.sedna.io/" labels: name, uid, worker-type
    child_kinds: tuple[str, ...]
    in_place: frozenset[str]  # updated in place on a spec change; the other child kinds are replaced (new names)
    optional_kinds: frozenset[str]  # not served on every cluster (autoscaling/v2): a 404 on list = none
    sources: tuple[str, ...]  # "Model", "Dataset": listed per namespace, watched
    desired: Callable[[dict, Sources, str], Desired]  # (cr, sources, lc_server)
    status: StatusFn
    finished: Callable[[dict], bool]  # a finished CR's children are its record: nothing recreated

    @property
    def uid_label(self) -> str:
        return self.label_prefix + "uid"

    @property
    def plural(self) -> str:
        return self.resource.plural


def _fl_status(cr: dict, desired: Desired, after: dict[str, list[dict]], error: str | None, reason: str,
               now: str) -> dict:
    want = desired.by_kind("Pod")
    pods = [p for p in after.get("Pod", []) if p.get("metadata", {}).get("name") in want]
    return fl_status(cr, desired, pods, error=error, error_reason=reason, now=now)


def _ji_status(cr: dict, desired: Desired, after: dict[str, list[dict]], error: str | None, reason: str,
               now: str) -> dict:
    deps = [d for d in after.get("Deployment", []) if d.get("metadata", {}).get("name")]
    return ji_status(cr, deps, error=error, error_reason=reason, now=now)


FEDERATED_LEARNING = KindSpec(
    kind=FL_KIND, resource=k.FL_JOBS, label_prefix=FL_LABEL_PREFIX, child_kinds=("Pod", "Service"),
    in_place=frozenset({"Service"}), optional_kinds=frozenset(), sources=("Model", "Dataset"),
    desired=lambda cr, src, lc: desired_federated_learning(cr, src.models, src.datasets, lc, src.secrets),
    status=_fl_status,
    finished=lambda cr: (cr.get("status") or {}).get("phase") == "Succeeded",
)

JOINT_INFERENCE = KindSpec(
    kind=JI_KIND, resource=k.JI_SERVICES, label_prefix=JI_LABEL_PREFIX,
    child_kinds=("Deployment", "Service", "HorizontalPodAutoscaler"),
    in_place=frozenset({"Deployment", "Service", "HorizontalPodAutoscaler"}),
    optional_kinds=frozenset({"HorizontalPodAutoscaler"}), sources=("Model",),
    desired=lambda cr, src, lc: desired_joint_inference(cr, src.models, lc, src.secrets),
    status=_ji_status,
    finished=lambda cr: False,
)

KINDS: dict[str, KindSpec] = {s.kind: s for s in (FEDERATED_LEARNING, JOINT_INFERENCE)}
SOURCE_RESOURCES = {"Model": k.MODELS, "Dataset": k.DATASETS}


def kind_spec(kind: str) -> KindSpec:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}") from None
