"""Reconcile Sedna FederatedLearningJobs and JointInferenceServices with their children (the thin shell).

One pass = observe, diff, act, for every CR in scope:

* observe with ONE list per kind per scope (cluster-wide, or per configured namespace), children found by
  the Sedna uid label. Children are listed BEFORE the CRs: any child we see was created before our CR list,
  so a child whose uid matches no listed CR really is a leftover of a deleted CR (no race with a CR being
  created right now);
* diff with the pure ``plan_children`` and act: create (409 AlreadyExists = another reconcile did it),
  delete (uid precondition: never an incarnation we did not see), update in place, repair ownerReferences;
* status through the ``/status`` subresource, written only when it changed, and one Event on the CR per
  kind of action taken.

Before acting we read the CRs to act on again (a GET each, or one list when there are many) and skip any
whose generation or deletion state changed since the list: a pass that observed an old spec must not
recreate old-spec children after a newer pass rolled them out. There are no timers and nothing is remembered between passes; a second pass with no drift makes
0 writes. Each reconcile returns a JSON-able summary of what it changed.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from operators.sedna import kube as k
from operators.sedna.desired import (
    API_VERSION,
    DEFAULT_LC_SERVER,
    FL_KIND,
    FL_LABEL_PREFIX,
    JI_KIND,
    JI_LABEL_PREFIX,
    Desired,
    desired_federated_learning,
    desired_joint_inference,
)
from operators.sedna.plan import Action, fl_status, is_terminating, ji_status, plan_children
from operators.templating import render

log = logging.getLogger(__name__)

MAX_LISTED_ACTIONS = 200  # the summary lists actions up to this many (it goes to XCom and the log)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NameTaken(Exception):
    """A child's name is taken by an object that does not belong to the CR."""


class Summary:
    def __init__(self, kind: str):
        self.kind = kind
        self.counts: dict[str, int] = defaultdict(int)
        self.actions: list[str] = []
        self.errors: list[str] = []
        self.started = time.monotonic()

    def add(self, what: str, line: str | None = None) -> None:
        self.counts[what] += 1
        if line and len(self.actions) < MAX_LISTED_ACTIONS:
            self.actions.append(line)

    def as_dict(self, kube: k.Kube) -> dict:
        writes = sum(n for key, n in kube.requests.items() if not key.startswith(("list ", "get ")))
        return {
            "kind": self.kind, **dict(sorted(self.counts.items())), "writes": writes,
            "requests": dict(sorted(kube.requests.items())), "actions": self.actions, "errors": self.errors,
            "seconds": round(time.monotonic() - self.started, 3),
        }


def _by_name(objs: Iterable[dict]) -> dict[str, dict[str, dict]]:
    """namespace -> name -> object"""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for o in objs:
        out[o["metadata"]["namespace"]][o["metadata"]["name"]] = o
    return out


def _by_uid(objs: Iterable[dict], prefix: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for o in objs:
        uid = (o["metadata"].get("labels") or {}).get(prefix + "uid")
        if uid:
            out[uid].append(o)
    return out


@dataclass
class _Plan:
    """What one pass intends for one CR (computed before any write)."""

    cr: dict
    desired: Desired
    actual: dict[str, list[dict]]
    actions: list[Action]
    finished: bool


class _Pass:
    """One reconcile pass of one CR kind; all state lives for the pass only."""

    def __init__(self, api: ApiClient, kind: str, lc_server: str):
        self.kube = k.Kube(api)
        self.kind = kind
        self.fl = kind == FL_KIND
        self.prefix = FL_LABEL_PREFIX if self.fl else JI_LABEL_PREFIX
        self.cr_res = k.FL_JOBS if self.fl else k.JI_SERVICES
        self.child_kinds = ("Pod", "Service") if self.fl else ("Deployment", "Service", "HorizontalPodAutoscaler")
        self.lc_server = lc_server
        self.summary = Summary(kind)

    # -------------------------------------------------------------- observe
    def _list_children(self, namespace: str | None) -> dict[str, list[dict]]:
        children: dict[str, list[dict]] = {}
        selector = self.prefix + "uid"  # "exists": every Sedna child of this kind, whatever its CR
        for ckind in self.child_kinds:
            try:
                children[ckind] = self.kube.list(k.BY_KIND[ckind], namespace, selector)
            except ApiException as e:
                if ckind == "HorizontalPodAutoscaler" and e.status == 404:
                    children[ckind] = []  # autoscaling/v2 not served: no HPAs to reconcile
                    continue
                raise
        return children

    def run(self, namespaces: list[str] | None) -> dict:
        for ns in namespaces or [None]:
            children = self._list_children(ns)
            try:
                crs = self.kube.list(self.cr_res, ns)
            except ApiException as e:
                if e.status == 404:
                    raise RuntimeError(
                        f"the {self.kind} CRD ({self.cr_res.plural}.sedna.io) is not installed on this cluster: "
                        "install k8s_templates/sedna/crds/ (operators.sedna.install.install_crds)") from e
                raise
            models = _by_name(self.kube.list(k.MODELS, ns)) if crs else {}
            datasets = _by_name(self.kube.list(k.DATASETS, ns)) if crs and self.fl else {}
            by_uid = {ck: _by_uid(objs, self.prefix) for ck, objs in children.items()}
            plans = []
            for cr in sorted(crs, key=lambda c: (c["metadata"]["namespace"], c["metadata"]["name"])):
                actual = {ck: by_uid[ck].get(cr["metadata"]["uid"], []) for ck in self.child_kinds}
                plans.append(self._plan_one(cr, actual, models, datasets))
            current = self._current_generations(ns, [p for p in plans if p and p.actions])
            for plan in plans:
                if plan is None:
                    continue
                try:
                    self._apply_one(plan, current)
                except ApiException as e:
                    meta = plan.cr["metadata"]
                    self.summary.errors.append(f"{self.kind} {meta['namespace']}/{meta['name']}: "
                                               f"{e.status} {e.reason}: {(e.body or '')[:300]}")
            self._remove_leftovers(children, {cr["metadata"]["uid"] for cr in crs})
        result = self.summary.as_dict(self.kube)
        log.info("reconciled %s: %s", self.kind, {k_: v for k_, v in result.items() if k_ != "actions"})
        return result

    # -------------------------------------------------------------- one CR
    def _plan_one(self, cr: dict, actual: dict[str, list[dict]], models: dict, datasets: dict) -> _Plan | None:
        meta = cr["metadata"]
        ns = meta["namespace"]
        self.summary.add("crs")
        if is_terminating(cr):
            self.summary.add("skipped_deleting")  # its children go through garbage collection
            return None
        if self.fl:
            desired = desired_federated_learning(cr, models.get(ns, {}), datasets.get(ns, {}), self.lc_server)
        else:
            desired = desired_joint_inference(cr, models.get(ns, {}), self.lc_server)
        status = cr.get("status") or {}
        finished = self.fl and status.get("phase") == "Succeeded"
        if finished:
            self.summary.add("skipped_finished")
        actions = [] if desired.error else plan_children(
            desired, actual, first_pass=not status.get("startTime"), finished=finished,
            # FL pods are replaced (new names); everything else is updated in place and keeps its identity
            replace_in_place=frozenset({"Service"} if self.fl else {"Deployment", "Service", "HorizontalPodAutoscaler"}),
        )
        if finished:
            actions = [a for a in actions if a.verb == "repair-owner"]
        return _Plan(cr, desired, actual, actions, finished)

    def _current_generations(self, ns: str | None, acting: list[_Plan]) -> dict[str, tuple]:
        """uid -> (generation, terminating) of the CRs about to be acted on, read again now: a pass that
        listed an old spec must not act on it (e.g. recreate old-spec pods another pass just rolled out).
        A few CRs: one GET each; many (a mass heal): one list."""
        if not acting:
            return {}
        if len(acting) <= 10:
            fresh = [self.kube.get(self.cr_res, p.cr["metadata"]["namespace"], p.cr["metadata"]["name"])
                     for p in acting]
        else:
            fresh = self.kube.list(self.cr_res, ns)
        return {o["metadata"]["uid"]: (o["metadata"].get("generation"), is_terminating(o)) for o in fresh if o}

    def _apply_one(self, plan: _Plan, current: dict[str, tuple]) -> None:
        cr, desired, actions, finished = plan.cr, plan.desired, plan.actions, plan.finished
        meta = cr["metadata"]
        ns, name = meta["namespace"], meta["name"]
        after = {ck: list(objs) for ck, objs in plan.actual.items()}
        act_error, act_reason = None, ""
        if actions:
            if current.get(meta["uid"]) != (meta.get("generation"), False):
                self.summary.add("skipped_stale")  # changed or gone since we listed it: the next pass sees it
                return
            done: dict[str, list[str]] = defaultdict(list)
            for a in actions:
                try:
                    obj = self._act(ns, a)
                except NameTaken as e:
                    act_error, act_reason = str(e), "NameConflict"
                    self.summary.errors.append(f"{self.kind} {ns}/{name}: {act_error}")
                    continue
                except ApiException as e:
                    if e.status in (404, 409):  # gone / changed under us: the next pass sees it
                        continue
                    act_error = f"{a.verb} {a.kind} {a.name} failed: {e.status} {e.reason}: {(e.body or '')[:200]}"
                    act_reason = "CreateFailed"
                    self.summary.errors.append(f"{self.kind} {ns}/{name}: {act_error}")
                    continue
                objs = after.setdefault(a.kind, [])
                objs[:] = [o for o in objs if o["metadata"]["name"] != a.name]
                if obj is None:
                    if a.verb == "create":  # 409: another reconcile created it; it exists, not yet seen
                        objs.append({"metadata": {"name": a.name}})
                    continue
                if a.verb != "delete":
                    objs.append(obj if isinstance(obj, dict) else {"metadata": {"name": a.name}})
                done[a.reason].append(f"{a.kind} {a.name}")
                self.summary.add({"create": "created", "delete": "deleted", "update": "updated",
                                  "repair-owner": "owner_repaired"}[a.verb],
                                 f"{a.verb} {a.kind} {ns}/{a.name} ({a.reason})")
            for reason, what in done.items():
                self._event(cr, "Normal", reason, f"{_VERBS[reason]}: {', '.join(what)}")
        if not finished:
            self._write_status(cr, desired, after, act_error, act_reason)

    def _act(self, ns: str, a: Action) -> dict | bool | None:
        res = k.BY_KIND[a.kind]
        if a.verb == "create":
            want = a.child.render()
            created = self.kube.create(res, ns, want)
            return created if created is not None else self._name_taken(res, ns, a, want)
        if a.verb == "delete":
            return self.kube.delete(res, ns, a.name, uid=a.actual["metadata"]["uid"]) or None
        if a.verb == "repair-owner":
            owner_refs = a.child.render()["metadata"]["ownerReferences"]
            return self.kube.merge_patch(res, ns, a.name, {"metadata": {
                "ownerReferences": owner_refs, "resourceVersion": a.actual["metadata"]["resourceVersion"]}})
        # update in place: Deployments roll (replicas stay as the HPA or the user set them), a Service keeps
        # its clusterIP. PUT with the observed resourceVersion: 409 if it changed meanwhile.
        want = a.child.render()
        body = dict(a.actual)
        body["metadata"] = {**a.actual["metadata"], "labels": want["metadata"]["labels"],
                            "ownerReferences": want["metadata"]["ownerReferences"]}
        spec = dict(a.actual.get("spec") or {})
        if a.kind == "Deployment":
            spec["template"] = want["spec"]["template"]
        elif a.kind == "Service":
            spec.update(selector=want["spec"]["selector"], ports=want["spec"]["ports"], type=want["spec"]["type"])
        else:
            spec = want["spec"]
        body["spec"] = spec
        body.pop("status", None)
        return self.kube.replace(res, ns, a.name, body)

    def _name_taken(self, res: k.Resource, ns: str, a: Action, want: dict) -> dict | None:
        """409 on create: another reconcile created it (fine), or the name is taken by something that is
        not this CR's. Ours = it carries this CR's uid in its labels or an ownerReference: then it is
        adopted (labels and the one controller ownerReference set) and the next pass checks its spec.
        Anything else is never touched (Sedna recreated Deployments by name without checking the owner):
        the CR reports the conflict."""
        found = self.kube.get(res, ns, a.name)
        if found is None:
            return None  # deleted meanwhile: the next pass creates it
        md = found["metadata"]
        uid = want["metadata"]["labels"][self.prefix + "uid"]
        if (md.get("labels") or {}).get(self.prefix + "uid") == uid:
            return None  # another reconcile's create: nothing to do
        if not any(ref.get("uid") == uid for ref in md.get("ownerReferences") or []):
            owners = [f"{r.get('kind')}/{r.get('name')}" for r in md.get("ownerReferences") or []] or ["none"]
            raise NameTaken(f"{a.kind} {ns}/{a.name} already exists and is not this {self.kind}'s "
                            f"(owners: {', '.join(owners)}); rename or delete it")
        self.summary.add("adopted", f"adopt {a.kind} {ns}/{a.name}")
        return self.kube.merge_patch(res, ns, a.name, {"metadata": {
            "labels": want["metadata"]["labels"], "ownerReferences": want["metadata"]["ownerReferences"],
            "resourceVersion": md["resourceVersion"]}})

    def _write_status(self, cr: dict, desired: Desired, after: dict[str, list[dict]], act_error: str | None,
                      act_reason: str) -> None:
        error = str(desired.error) if desired.error else act_error
        reason = desired.error.reason if desired.error else act_reason
        now = now_rfc3339()
        if self.fl:
            want = desired.by_kind("Pod")
            pods = [p for p in after.get("Pod", []) if p.get("metadata", {}).get("name") in want]
            new = fl_status(cr, desired, pods, error=error, error_reason=reason, now=now)
        else:
            deps = [d for d in after.get("Deployment", []) if d.get("metadata", {}).get("name")]
            new = ji_status(cr, deps, error=error, error_reason=reason, now=now)
        old = cr.get("status") or {}
        if new == old:
            return
        meta = cr["metadata"]
        try:
            self.kube.merge_patch(self.cr_res, meta["namespace"], meta["name"], {"status": new}, sub="status")
        except ApiException as e:
            if e.status == 404:
                return
            raise
        self.summary.add("status_updated")
        failed_now = any(c["type"] == "Failed" and c["status"] == "True" for c in new.get("conditions", []))
        failed_before = any(c.get("type") == "Failed" and c.get("status") == "True" for c in old.get("conditions") or [])
        if failed_now and not failed_before:
            cond = next(c for c in new["conditions"] if c["type"] == "Failed")
            self._event(cr, "Warning", cond["reason"] or "Failed", cond["message"] or "failed")

    # -------------------------------------------------------------- leftovers
    def _remove_leftovers(self, children: dict[str, list[dict]], live_uids: set[str]) -> None:
        """Children with Sedna labels whose CR (by uid) is gone: garbage collection normally removes them;
        this catches the ones it cannot (no or a wrong-kind ownerReference)."""
        for ckind, objs in children.items():
            for o in objs:
                uid = o["metadata"]["labels"].get(self.prefix + "uid")
                if uid in live_uids or is_terminating(o):
                    continue
                meta = o["metadata"]
                try:
                    if self.kube.delete(k.BY_KIND[ckind], meta["namespace"], meta["name"], uid=meta["uid"]):
                        self.summary.add("leftovers_deleted", f"delete {ckind} {meta['namespace']}/{meta['name']} "
                                                              f"(owner {self.kind} uid {uid} is gone)")
                except ApiException as e:
                    self.summary.errors.append(f"delete leftover {ckind} {meta['name']}: {e.status} {e.reason}")

    # -------------------------------------------------------------- events
    def _event(self, cr: dict, etype: str, reason: str, message: str) -> None:
        meta = cr["metadata"]
        stamp = now_rfc3339()
        digest = hashlib.sha256(f"{meta['uid']}/{reason}/{message}/{time.time_ns()}".encode()).hexdigest()[:16]
        body = render(
            "sedna/event.yaml.j2", name=f"{meta['name']}.{digest}", namespace=meta["namespace"],
            involved={"apiVersion": API_VERSION, "kind": self.kind, "name": meta["name"],
                      "namespace": meta["namespace"], "uid": meta["uid"]},
            type=etype, reason=reason, message=message[:1000], timestamp=stamp,
        )
        try:
            self.kube.create(k.EVENTS, meta["namespace"], body)
            self.summary.add("events")
        except ApiException as e:  # an Event is best effort: never fail a reconcile for it
            log.warning("could not record event %s on %s/%s: %s", reason, meta["namespace"], meta["name"], e)


_VERBS = {"Created": "created", "Recreated": "recreated (deleted by hand or lost)",
          "RolledOut": "rolled out the new spec", "OwnerRepaired": "repaired the ownerReference of",
          "Removed": "removed"}


def reconcile_federated_learning(api: ApiClient, namespaces: list[str] | None = None,
                                 lc_server: str = DEFAULT_LC_SERVER) -> dict:
    """One pass over every FederatedLearningJob (in ``namespaces``, or cluster-wide); returns a summary."""
    return _Pass(api, FL_KIND, lc_server).run(namespaces)


def reconcile_joint_inference(api: ApiClient, namespaces: list[str] | None = None,
                              lc_server: str = DEFAULT_LC_SERVER) -> dict:
    """One pass over every JointInferenceService (in ``namespaces``, or cluster-wide); returns a summary."""
    return _Pass(api, JI_KIND, lc_server).run(namespaces)
