"""Diff desired against actual children of one Sedna CR, and compute its status: pure functions.

``plan_children`` turns (desired children, observed children) into a list of ``Action``s; ``fl_status`` and
``ji_status`` turn observed children into the CR's status. The reconcile (``reconcile.py``) only does the
I/O around them. Nothing here remembers anything between passes: every decision is made from what the API
server shows now, which is what makes the reconcile level-triggered and safe to run twice at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from operators.sedna.desired import SPEC_HASH_LABEL, Child, Desired, owner_reference
from operators.sedna.drift import drifted


@dataclass(frozen=True)
class Action:
    verb: str  # "create" | "delete" | "update" | "repair-owner"
    kind: str
    name: str
    reason: str  # the Event reason on the CR: Created, Recreated, RolledOut, DriftReverted, OwnerRepaired, Removed
    child: Child | None = field(default=None, compare=False)
    actual: dict | None = field(default=None, compare=False)
    detail: str = field(default="", compare=False)  # what drifted, for the Event


def is_terminating(obj: dict) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def has_only_owner(obj: dict, owner: dict) -> bool:
    refs = obj["metadata"].get("ownerReferences") or []
    return len(refs) == 1 and all(refs[0].get(k) == v for k, v in owner.items())


def first_pass(cr: dict) -> bool:
    """Whether this CR's children were never made: no pass recorded a status yet, or every pass so far made no
    child (``active``/``succeeded`` 0: its Model or Dataset was missing, its spec invalid). Such a CR's missing
    children are first creations (Event reason ``Created``), not heals (``Recreated``, "deleted by hand or
    lost"): issue 29 saw ``Recreated`` for children created the first time, after a pass that had failed."""
    status = cr.get("status") or {}
    return not status.get("startTime") or not (status.get("active") or status.get("succeeded"))


def plan_children(desired: Desired, actual: dict[str, list[dict]], *, first_pass: bool,
                  finished: bool = False, in_place: frozenset[str] = frozenset()) -> list[Action]:
    """Actions that bring ``actual`` (kind -> this CR's observed children, found by uid label) to ``desired``.

    * missing child -> create (a "Recreated" heal unless this is the CR's first pass);
    * child whose spec-hash label differs -> rolled out: kinds in ``in_place`` are updated in place
      (Deployments roll, Services/HPAs keep their identity), others (FL pods) are deleted, and the new-spec
      pod, which has a different name, is created in the same pass;
    * child of the current spec edited by hand (``drift.drifted``) -> reverted: updated in place, or, for a
      pod (whose spec is immutable), deleted so that the next pass recreates it as desired;
    * child that is not desired at all (old spec, removed HPA) -> deleted;
    * child with a missing or wrong ownerReference (e.g. kind "JointInference") -> repaired;
    * a finished CR gets nothing created, replaced or deleted (its pods are its record), only repairs.
    Terminating children are left to finish.
    """
    owner = owner_reference(desired.kind, desired.name, desired.uid)
    actions: list[Action] = []
    for kind in sorted({c.kind for c in desired.children} | set(actual)):
        want = desired.by_kind(kind)
        have = {o["metadata"]["name"]: o for o in actual.get(kind, [])}
        for name, obj in sorted(have.items()):
            if not is_terminating(obj):
                actions += _plan_existing(kind, want.get(name), obj, owner, kind in in_place, finished)
        if not finished:
            actions += [Action("create", kind, name, "Created" if first_pass else "Recreated", child)
                        for name, child in sorted(want.items()) if name not in have]
    return actions


def _plan_existing(kind: str, child: Child | None, obj: dict, owner: dict, in_place: bool,
                   finished: bool) -> list[Action]:
    name = obj["metadata"]["name"]
    if child is None:  # an old-spec pod (other name), a removed HPA
        reason = "RolledOut" if kind == "Pod" else "Removed"
        return [] if finished else [Action("delete", kind, name, reason, actual=obj)]
    if obj["metadata"].get("labels", {}).get(SPEC_HASH_LABEL) != child.spec_hash:
        if finished:
            return []
        if in_place:
            return [Action("update", kind, name, "RolledOut", child, obj)]
        return [Action("delete", kind, name, "RolledOut", actual=obj)]
    out = []
    if not finished and (paths := drifted(child.render(), obj)):
        detail = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        out.append(Action("update" if in_place else "delete", kind, name, "DriftReverted", child, obj, detail))
    if not has_only_owner(obj, owner):
        out.append(Action("repair-owner", kind, name, "OwnerRepaired", child, obj))
    return out


def updated_body(kind: str, actual: dict, want: dict) -> dict:
    """The body of an in-place update (PUT with the observed resourceVersion: 409 if it changed meanwhile):
    the live object with Skiff's labels, ownerReference and the fields Skiff owns. A Deployment keeps its
    replicas (the HPA's or the user's) and rolls its template; a Service keeps its clusterIP."""
    body = {**actual, "metadata": {**actual["metadata"], "labels": want["metadata"]["labels"],
                                   "ownerReferences": want["metadata"]["ownerReferences"]}}
    spec = dict(actual.get("spec") or {})
    if kind == "Deployment":
        spec["template"] = want["spec"]["template"]
    elif kind == "Service":
        spec.update(selector=want["spec"]["selector"], ports=want["spec"]["ports"], type=want["spec"]["type"])
    else:
        spec = want["spec"]
    body["spec"] = spec
    body.pop("status", None)
    return body


_EVENT_VERBS = {"Created": "created", "Recreated": "recreated (deleted by hand or lost)",
                "RolledOut": "rolled out the new spec", "DriftReverted": "reverted hand edits of",
                "OwnerRepaired": "repaired the ownerReference of", "Removed": "removed"}


def action_events(done: list[Action]) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the Events for the actions a pass carried out on one CR: one per reason."""
    by_reason: dict[str, list[str]] = {}
    for a in done:
        by_reason.setdefault(a.reason, []).append(f"{a.kind} {a.name}" + (f" ({a.detail})" if a.detail else ""))
    return [("Normal", reason, f"{_EVENT_VERBS[reason]}: {', '.join(what)}") for reason, what in by_reason.items()]


def status_event(old: dict, new: dict) -> tuple[str, str, str] | None:
    """A Warning Event when the CR turns Failed (not on every pass while it stays Failed)."""
    def failed(status: dict) -> dict | None:
        return next((c for c in status.get("conditions") or []
                     if c.get("type") == "Failed" and c.get("status") == "True"), None)

    cond = failed(new)
    if cond is None or failed(old) is not None:
        return None
    return ("Warning", cond.get("reason") or "Failed", cond.get("message") or "failed")


# ---------------------------------------------------------------- status


def _set_condition(conditions: list[dict], ctype: str, status: str, reason: str, message: str, now: str,
                   time_fields: tuple[str, ...]) -> None:
    """Set one condition in place; its timestamps move only when status, reason or message change, so
    an unchanged world produces an identical status (and no write)."""
    for c in conditions:
        if c.get("type") == ctype:
            if (c.get("status"), c.get("reason", ""), c.get("message", "")) != (status, reason, message):
                c.update(status=status, reason=reason, message=message, **dict.fromkeys(time_fields, now))
            return
    if status == "True":  # a False condition that never was True is noise
        conditions.append({"type": ctype, "status": status, "reason": reason, "message": message,
                           **dict.fromkeys(time_fields, now)})


FL_TIMES = ("lastHeartbeatTime", "lastProbeTime")
JI_TIMES = ("lastHeartbeatTime", "lastTransitionTime")


def fl_status(job: dict, desired: Desired, pods: list[dict], *, error: str | None, error_reason: str,
              now: str) -> dict:
    """FederatedLearningJob status like Sedna's: phase, conditions, active/succeeded/failed.

    ``pods``: this job's current-spec pods after this pass's actions (created ones count as active).
    Unlike Sedna, "Failed" is not terminal: when the failed pod is replaced (deleted by hand, or rolled
    by a spec edit) or the missing Model/Dataset appears, the job is Running again and the Failed
    condition turns False. Succeeded is terminal, like a batch/v1 Job.
    """
    old = job.get("status") or {}
    status = json.loads(json.dumps(old))  # a copy (much cheaper than deepcopy)
    conditions = status.setdefault("conditions", [])
    live = [p for p in pods if not is_terminating(p)]
    phases = [(p.get("status") or {}).get("phase", "Pending") for p in live]
    active = sum(ph not in ("Succeeded", "Failed") for ph in phases)
    succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
    status.update(active=active, succeeded=succeeded, failed=failed)
    status.setdefault("startTime", now)
    expected = len(desired.by_kind("Pod"))
    if error:
        phase, reason, message = "Failed", error_reason, error
    elif failed:
        names = sorted(p["metadata"]["name"] for p, ph in zip(live, phases, strict=True) if ph == "Failed")
        phase, reason, message = "Failed", "workerFailed", f"the worker of FederatedLearningJob failed: {', '.join(names)}"
    elif succeeded and not active and len(live) >= expected:
        phase, reason, message = "Succeeded", "Completed", "FederatedLearningJob completed"
    else:
        phase, reason, message = "Running", "", ""
    status["phase"] = phase
    _set_condition(conditions, "Failed", "True" if phase == "Failed" else "False",
                   reason if phase == "Failed" else "Recovered", message if phase == "Failed" else "", now, FL_TIMES)
    _set_condition(conditions, "Running", "True" if phase == "Running" else "False", "", "", now, FL_TIMES)
    if phase == "Succeeded":
        _set_condition(conditions, "Complete", "True", reason, message, now, FL_TIMES)
        status.setdefault("completionTime", now)
    return status


def deployment_failed(dep: dict) -> str | None:
    for c in (dep.get("status") or {}).get("conditions") or []:
        if c.get("type") == "ReplicaFailure" and c.get("status") == "True":
            return c.get("message") or c.get("reason") or "ReplicaFailure"
        if c.get("type") == "Progressing" and c.get("status") == "False":
            return c.get("message") or c.get("reason") or "not progressing"
    return None


def ji_status(svc: dict, deployments: list[dict], *, error: str | None, error_reason: str, now: str) -> dict:
    """JointInferenceService status like Sedna's: active/failed Deployments and conditions; the Failed
    condition is cleared (False, "Recovered") when both Deployments are healthy again."""
    old = svc.get("status") or {}
    status = json.loads(json.dumps(old))  # a copy (much cheaper than deepcopy)
    conditions = status.setdefault("conditions", [])
    live = [d for d in deployments if not is_terminating(d)]
    problems = [f"{d['metadata']['name']}: {p}" for d in live if (p := deployment_failed(d))]
    active = len(live) - len(problems)
    status.update(active=active, failed=max(0, 2 - active))
    status.setdefault("startTime", now)
    if error:
        failed, reason, message = True, error_reason, error
    elif problems or active < 2:
        failed, reason = True, "workerFailed"
        message = "the worker of service failed: " + ("; ".join(problems) or "a Deployment is missing")
    else:
        failed, reason, message = False, "", ""
    _set_condition(conditions, "Failed", "True" if failed else "False",
                   reason if failed else "Recovered", message, now, JI_TIMES)
    _set_condition(conditions, "Running", "False" if failed else "True", "", "", now, JI_TIMES)
    return status
