"""Reconcile Sedna FederatedLearningJobs and JointInferenceServices with their children (the thin shell).

One pass = observe, plan, act, for every CR in scope, shaped by the kind's ``KindSpec`` (``kinds.py``):

* observe with ONE list per kind per scope (cluster-wide, or per configured namespace), children found by
  the Sedna uid label. Children are listed BEFORE the CRs: any child we see was created before our CR list,
  so a child whose uid matches no listed CR really is a leftover of a deleted CR (no race with a CR being
  created right now). Secrets named by ``credentialName`` are read one GET each (only their key names and
  endpoint annotations are kept);
* plan each CR with the pure ``desired``/``plan_children`` and render every child it would write, so a CR
  whose children cannot all be made (a name too long, a bad URL) writes nothing at all;
* act per CR on a bounded thread pool (``concurrency`` CRs at once): create (409 AlreadyExists = another
  reconcile did it), delete (uid precondition: never an incarnation we did not see), update in place,
  repair ownerReferences; status through the ``/status`` subresource, written only when it changed; one
  Event on the CR per kind of action taken.

Errors are per CR, as controller-runtime's are per key: ANY exception while planning or acting on one CR
(not only a spec error) becomes that CR's Failed condition (reason ``ReconcileError``) and a Warning Event,
is listed in the summary's ``errors``, and the other CRs go on; the DAG task fails at the end, listing them.
A spec error (missing Model, bad name) is the CR's condition too, but the user's to fix: not a run error.

Before acting we read the CRs to act on again (a GET each, or one list when there are many) and skip any
whose generation or deletion state changed since the list: a pass that observed an old spec must not
recreate old-spec children after a newer pass rolled them out. There are no timers and nothing is
remembered between passes; a second pass with no drift makes 0 writes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from operators.k8s.errors import KubeError, api_error_message
from operators.k8s.rest import Kube
from operators.sedna import kube as k
from operators.sedna import metrics, podsecurity
from operators.sedna.desired import (
    API_VERSION,
    DEFAULT_LC_SERVER,
    FL_KIND,
    JI_KIND,
    Desired,
    SpecError,
    with_queue_labels,
)
from operators.sedna.kinds import SOURCE_RESOURCES, KindSpec, Sources, kind_spec
from operators.sedna.plan import (
    Action,
    action_events,
    first_pass,
    is_terminating,
    plan_children,
    status_event,
    updated_body,
)
from operators.sedna.storage import credential_names, secret_summary
from operators.settings import default
from operators.templating import render

log = logging.getLogger(__name__)

MAX_LISTED_ACTIONS = 200  # the summary lists actions up to this many (it goes to XCom and the log)
DEFAULT_CONCURRENCY = int(default("sedna_concurrency"))  # CRs acted on at once (each does its writes in order)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NameTaken(Exception):
    """A child's name is taken by an object that does not belong to the CR."""


class Summary:
    """What a pass did; shared by the pass's threads."""

    def __init__(self, kind: str):
        self.kind = kind
        self.counts: dict[str, int] = defaultdict(int)
        self.actions: list[str] = []
        self.errors: list[str] = []
        self.started = time.monotonic()
        self._lock = threading.Lock()

    def add(self, what: str, line: str | None = None) -> None:
        with self._lock:
            self.counts[what] += 1
            if line and len(self.actions) < MAX_LISTED_ACTIONS:
                self.actions.append(line)

    def error(self, line: str) -> None:
        with self._lock:
            self.errors.append(line)

    def as_dict(self, kube: Kube) -> dict:
        writes = sum(n for key, n in kube.requests.items() if not key.startswith(("list ", "get ")))
        return {
            "kind": self.kind, **dict(sorted(self.counts.items())), "writes": writes,
            "requests": dict(sorted(kube.requests.items())), "actions": self.actions, "errors": sorted(self.errors),
            "seconds": round(time.monotonic() - self.started, 3),
        }


def _by_name(objs: Iterable[dict]) -> dict[str, dict[str, dict]]:
    """namespace -> name -> object"""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for o in objs:
        out[o["metadata"]["namespace"]][o["metadata"]["name"]] = o
    return out


@dataclass
class _Plan:
    """What one pass intends for one CR (computed, and every child to write rendered, before any write)."""

    cr: dict
    desired: Desired
    actual: dict[str, list[dict]]
    actions: list[Action]
    finished: bool


def _ref(cr: dict) -> str:
    return f"{cr['metadata']['namespace']}/{cr['metadata']['name']}"


class _Pass:
    """One reconcile pass of one CR kind; all state lives for the pass only."""

    def __init__(self, kube: Kube, kind: str, lc_server: str, concurrency: int = DEFAULT_CONCURRENCY,
                 queue_labels: Mapping[str, Mapping[str, str]] | None = None):
        self.queue_labels = queue_labels or {}      # namespace -> Kueue's labels for the pods made there
        self.concurrency = max(1, int(concurrency))
        self.kube = kube.fork(connections=self.concurrency)  # this pass's request counts; a connection per writer
        self.spec: KindSpec = kind_spec(kind)
        self.kind = kind
        self.lc_server = lc_server
        self.summary = Summary(kind)

    # -------------------------------------------------------------- observe
    def _list_children(self, namespace: str | None) -> dict[str, list[dict]]:
        children: dict[str, list[dict]] = {}
        for ckind in self.spec.child_kinds:  # "exists" selector: every Sedna child of this kind, whatever its CR
            try:
                children[ckind] = self.kube.list(k.BY_KIND[ckind], namespace, self.spec.uid_label)
            except KubeError as e:
                if ckind in self.spec.optional_kinds and e.status == 404:
                    children[ckind] = []  # not served (autoscaling/v2): nothing to reconcile
                    continue
                raise
        return children

    def _list_crs(self, namespace: str | None) -> list[dict]:
        try:
            return self.kube.list(self.spec.resource, namespace)
        except KubeError as e:
            if e.status == 404:
                raise RuntimeError(
                    f"the {self.kind} CRD ({self.spec.plural}.sedna.io) is not installed on this cluster: "
                    "install k8s_templates/sedna/crds/ (operators.sedna.install.install_crds)") from e
            raise

    def _sources(self, namespace: str | None, crs: list[dict]) -> dict[str, Sources]:
        """namespace -> the Models, Datasets and named Secrets the CRs there are made from."""
        listed = {s: _by_name(self.kube.list(SOURCE_RESOURCES[s], namespace)) if crs else {}
                  for s in ("Model", "Dataset") if s in self.spec.sources}
        models, datasets = listed.get("Model", {}), listed.get("Dataset", {})
        wanted = {(o["metadata"]["namespace"], name) for o in crs for name in credential_names(o)}
        for objs in (models, datasets):
            wanted |= {(ns, name) for ns, by_name in objs.items() for o in by_name.values()
                       for name in credential_names(o)}
        secrets: dict[str, dict[str, dict | None]] = defaultdict(dict)
        for ns, name in sorted(wanted):
            try:
                found = self.kube.get(k.SECRETS, ns, name)
            except KubeError as e:
                if e.status != 403:
                    raise
                # Skiff acts only where it is bound (team namespaces): that CR's error, not the pass's
                secrets[ns][name] = {"forbidden": api_error_message(e)}
                continue
            secrets[ns][name] = secret_summary(found) if found is not None else None
        return {ns: Sources(models.get(ns, {}), datasets.get(ns, {}), secrets.get(ns, {}))
                for ns in {o["metadata"]["namespace"] for o in crs}}

    def run(self, namespaces: list[str] | None) -> dict:
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="sedna-reconcile") as pool:
            for ns in namespaces or [None]:
                try:
                    self._run_scope(ns, pool)
                except KubeError as e:  # this scope could not be observed; the others go on
                    self.summary.error(f"{self.kind} in {ns or 'all namespaces'}: observe failed: "
                                       f"{api_error_message(e)}")
        result = self.summary.as_dict(self.kube)
        log.info("reconciled %s: %s", self.kind, {k_: v for k_, v in result.items() if k_ != "actions"})
        metrics.sedna_pass(self.kind, result)
        return result

    def _run_scope(self, ns: str | None, pool: ThreadPoolExecutor) -> None:
        children = self._list_children(ns)
        crs = sorted(self._list_crs(ns), key=lambda c: (c["metadata"]["namespace"], c["metadata"]["name"]))
        sources = self._sources(ns, crs)
        by_uid: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for ckind, objs in children.items():
            for o in objs:
                by_uid[(o["metadata"].get("labels") or {}).get(self.spec.uid_label)][ckind].append(o)
        plans: list[_Plan] = []
        for cr in crs:
            actual = {ck: by_uid.get(cr["metadata"]["uid"], {}).get(ck, []) for ck in self.spec.child_kinds}
            try:
                if (plan := self._plan_one(cr, actual, sources[cr["metadata"]["namespace"]])) is not None:
                    plans.append(plan)
            except Exception as e:  # any failure is this CR's, never the pass's
                pool.submit(self._fail, cr, actual, "plan", e)
        current = self._current_generations(ns, [p for p in plans if p.actions])
        for future in [pool.submit(self._apply_safely, plan, current) for plan in plans]:
            future.result()
        self._remove_leftovers(children, {cr["metadata"]["uid"] for cr in crs}, pool)

    # -------------------------------------------------------------- one CR
    def _plan_one(self, cr: dict, actual: dict[str, list[dict]], sources: Sources) -> _Plan | None:
        self.summary.add("crs")
        if is_terminating(cr):
            self.summary.add("skipped_deleting")  # its children go through garbage collection
            return None
        desired = with_queue_labels(self.spec.desired(cr, sources, self.lc_server),
                                    self.queue_labels.get(cr["metadata"]["namespace"]))
        finished = self.spec.finished(cr)
        if finished:
            self.summary.add("skipped_finished")
        if desired.error:
            self.summary.add("invalid")
        actions = [] if desired.error else plan_children(
            desired, actual, first_pass=first_pass(cr), finished=finished,
            in_place=self.spec.in_place)
        for a in actions:
            if a.child is not None:
                a.child.render()  # a child that cannot be rendered stops this CR here, before any write
        return _Plan(cr, desired, actual, actions, finished)

    def _current_generations(self, ns: str | None, acting: list[_Plan]) -> dict[str, tuple]:
        """uid -> (generation, terminating) of the CRs about to be acted on, read again now: a pass that
        listed an old spec must not act on it (e.g. recreate old-spec pods another pass just rolled out).
        A few CRs: one GET each; many (a mass heal): one list."""
        if not acting:
            return {}
        if len(acting) <= 10:
            fresh = [self.kube.get(self.spec.resource, p.cr["metadata"]["namespace"], p.cr["metadata"]["name"])
                     for p in acting]
        else:
            fresh = self.kube.list(self.spec.resource, ns)
        return {o["metadata"]["uid"]: (o["metadata"].get("generation"), is_terminating(o)) for o in fresh if o}

    def _apply_safely(self, plan: _Plan, current: dict[str, tuple]) -> None:
        try:
            self._apply_one(plan, current)
        except Exception as e:  # any failure is this CR's, never the pass's
            self._fail(plan.cr, plan.actual, "act", e)

    def _fail(self, cr: dict, actual: dict[str, list[dict]], stage: str, e: Exception) -> None:
        """Record an unexpected failure on the CR (Failed condition, Warning Event) and in the summary."""
        message = f"reconcile failed ({stage}): " + (
            api_error_message(e) if isinstance(e, KubeError) else f"{type(e).__name__}: {e}")
        log.warning("%s %s: %s", self.kind, _ref(cr), message, exc_info=not isinstance(e, KubeError))
        self.summary.error(f"{self.kind} {_ref(cr)}: {message}")
        meta = cr["metadata"]
        desired = Desired(self.kind, meta["namespace"], meta["name"], meta["uid"],
                          error=SpecError("ReconcileError", message))
        try:
            self._write_status(cr, desired, actual, None, "")
        except Exception as again:  # the API server refuses even that: the summary has it
            log.warning("could not record the failure on %s %s: %s", self.kind, _ref(cr), again)

    def _apply_one(self, plan: _Plan, current: dict[str, tuple]) -> None:
        cr, actions = plan.cr, plan.actions
        meta = cr["metadata"]
        after = {ck: list(objs) for ck, objs in plan.actual.items()}
        act_error, act_reason = None, ""
        if actions:
            if current.get(meta["uid"]) != (meta.get("generation"), False):
                self.summary.add("skipped_stale")  # changed or gone since we listed it: the next pass sees it
                return
            refused = podsecurity.refusal(self.kube, meta["namespace"], actions)
            if refused:  # a pod would break the namespace's Pod Security level: nothing is written
                act_error, act_reason, actions = f"Pod Security: {refused}", "PodSecurity", []
                self.summary.error(f"{self.kind} {_ref(cr)}: {act_error}")
            done: list[Action] = []
            for a in actions:
                try:
                    if self._act_and_track(meta["namespace"], a, after):
                        done.append(a)
                except NameTaken as e:
                    act_error, act_reason = str(e), "NameConflict"
                    self.summary.error(f"{self.kind} {_ref(cr)}: {act_error}")
                except KubeError as e:
                    if e.status in (404, 409):  # gone / changed under us: the next pass sees it
                        continue
                    act_error = f"{a.verb} {a.kind} {a.name} failed: {api_error_message(e)}"
                    act_reason = "CreateFailed"
                    self.summary.error(f"{self.kind} {_ref(cr)}: {act_error}")
            for etype, reason, message in action_events(done):
                self._event(cr, etype, reason, message)
        if not plan.finished:
            self._write_status(cr, plan.desired, after, act_error, act_reason)

    def _act_and_track(self, ns: str, a: Action, after: dict[str, list[dict]]) -> bool:
        """Carry out one action; keep ``after`` (the children as they are now) up to date. True if it wrote."""
        obj = self._act(ns, a)
        objs = after.setdefault(a.kind, [])
        objs[:] = [o for o in objs if o["metadata"]["name"] != a.name]
        if obj is None:
            if a.verb == "create":  # 409: another reconcile created it; it exists, not yet seen
                objs.append({"metadata": {"name": a.name}})
            return False
        if a.verb != "delete":
            objs.append(obj if isinstance(obj, dict) else {"metadata": {"name": a.name}})
        self.summary.add({"create": "created", "delete": "deleted", "update": "updated",
                          "repair-owner": "owner_repaired"}[a.verb] if a.reason != "DriftReverted" else "reverted",
                         f"{a.verb} {a.kind} {ns}/{a.name} ({a.reason}{': ' + a.detail if a.detail else ''})")
        metrics.sedna_action(self.kind, ns, a.reason)
        return True

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
        return self._update(res, ns, a)

    def _update(self, res: k.Resource, ns: str, a: Action, attempts: int = 3) -> dict | None:
        """PUT the updated child with the resourceVersion it was read at; on 409 (its status or another
        writer moved it on, e.g. the Deployment controller) read it again and retry, as client-go's
        RetryOnConflict does, as long as it is the same object (same uid)."""
        live = a.actual
        for attempt in range(attempts):
            try:
                return self.kube.replace(res, ns, a.name, updated_body(a.kind, live, a.child.render()))
            except KubeError as e:
                if e.status != 409 or attempt == attempts - 1:
                    raise
            live = self.kube.get(res, ns, a.name)
            if live is None or live["metadata"]["uid"] != a.actual["metadata"]["uid"]:
                return None  # gone or replaced meanwhile: the next pass sees it
        return None

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
        uid = want["metadata"]["labels"][self.spec.uid_label]
        if (md.get("labels") or {}).get(self.spec.uid_label) == uid:
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
        new = self.spec.status(cr, desired, after, error, reason, now_rfc3339())
        old = cr.get("status") or {}
        if new == old:
            return
        meta = cr["metadata"]
        try:
            self.kube.merge_patch(self.spec.resource, meta["namespace"], meta["name"], {"status": new}, sub="status")
        except KubeError as e:
            if e.status == 404:
                return
            raise
        self.summary.add("status_updated")
        if event := status_event(old, new):
            self._event(cr, *event)

    # -------------------------------------------------------------- leftovers
    def _remove_leftovers(self, children: dict[str, list[dict]], live_uids: set[str],
                          pool: ThreadPoolExecutor) -> None:
        """Children with Sedna labels whose CR (by uid) is gone: garbage collection normally removes them;
        this catches the ones it cannot (no or a wrong-kind ownerReference)."""
        doomed = [(ckind, o) for ckind, objs in children.items() for o in objs
                  if o["metadata"]["labels"].get(self.spec.uid_label) not in live_uids and not is_terminating(o)]
        for future in [pool.submit(self._remove_leftover, ckind, o) for ckind, o in doomed]:
            future.result()

    def _remove_leftover(self, ckind: str, o: dict) -> None:
        meta = o["metadata"]
        try:
            if self.kube.delete(k.BY_KIND[ckind], meta["namespace"], meta["name"], uid=meta["uid"]):
                self.summary.add("leftovers_deleted", f"delete {ckind} {meta['namespace']}/{meta['name']} (owner "
                                                      f"{self.kind} uid {meta['labels'][self.spec.uid_label]} is gone)")
        except KubeError as e:
            self.summary.error(f"delete leftover {ckind} {meta['namespace']}/{meta['name']}: {api_error_message(e)}")

    # -------------------------------------------------------------- events
    def _event(self, cr: dict, etype: str, reason: str, message: str) -> None:
        meta = cr["metadata"]
        stamp = now_rfc3339()
        digest = hashlib.sha256(f"{meta['uid']}/{reason}/{message}/{time.time_ns()}".encode()).hexdigest()[:16]
        body = render(
            "sedna/event.yaml.j2", name=f"{meta['name'][:200]}.{digest}", namespace=meta["namespace"],
            involved={"apiVersion": API_VERSION, "kind": self.kind, "name": meta["name"],
                      "namespace": meta["namespace"], "uid": meta["uid"]},
            type=etype, reason=reason, message=message[:1000], timestamp=stamp,
        )
        try:
            self.kube.create(k.EVENTS, meta["namespace"], body)
            self.summary.add("events")
        except KubeError as e:  # an Event is best effort: never fail a reconcile for it
            log.warning("could not record event %s on %s: %s", reason, _ref(cr), e)


def reconcile(kube: Kube, kind: str, namespaces: list[str] | None = None, lc_server: str = DEFAULT_LC_SERVER,
              concurrency: int = DEFAULT_CONCURRENCY, queue_labels: Mapping[str, Mapping[str, str]] | None = None
              ) -> dict:
    """One pass over every CR of ``kind`` (in ``namespaces``, or cluster-wide); returns a summary.
    ``queue_labels``: namespace -> Kueue's labels for the pods of its CRs (``queueing: kueue``:
    ``kueue_queue_labels``)."""
    return _Pass(kube, kind, lc_server, concurrency, queue_labels).run(namespaces)


def kueue_queue_labels(platform) -> dict[str, dict[str, str]]:
    """Each team namespace's Kueue labels for Sedna's pods under ``queueing: kueue`` (the team's training
    LocalQueue, priority ``skiff-scheduled``: batch work as a scheduled training step); {} under quota."""
    from operators.platform import kueue

    if platform.queueing != "kueue":
        return {}
    return {t.namespace: dict(kueue.queue_labels(False, kueue.SCHEDULED)) for t in platform.teams}


def reconcile_federated_learning(kube: Kube, namespaces: list[str] | None = None,
                                 lc_server: str = DEFAULT_LC_SERVER, concurrency: int = DEFAULT_CONCURRENCY) -> dict:
    """One pass over every FederatedLearningJob (in ``namespaces``, or cluster-wide); returns a summary."""
    return reconcile(kube, FL_KIND, namespaces, lc_server, concurrency)


def reconcile_joint_inference(kube: Kube, namespaces: list[str] | None = None,
                              lc_server: str = DEFAULT_LC_SERVER, concurrency: int = DEFAULT_CONCURRENCY) -> dict:
    """One pass over every JointInferenceService (in ``namespaces``, or cluster-wide); returns a summary."""
    return reconcile(kube, JI_KIND, namespaces, lc_server, concurrency)
