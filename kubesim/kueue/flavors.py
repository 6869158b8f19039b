"""Kueue's flavor assignment: which ResourceFlavor each resource of a Workload's pod sets gets, and whether
it fits now (Fit), could fit by preempting (Preempt) or cannot (NoFit), with Kueue's own messages.

Follows kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go` (v0.19.2):
- resources are assigned per resource group; a group's flavors are tried in the ClusterQueue's order and
  every resource of the group gets the same flavor (`findFlavorForPodSets`); a requested resource no group
  covers is `resource X unavailable in ClusterQueue`;
- a flavor is skipped when the pod set does not tolerate one of its `nodeTaints` (NoSchedule/NoExecute;
  the flavor's own `tolerations` count: `untolerated taint {key value NoSchedule <nil>} in flavor F`, the
  taint as Go's `%s` prints a corev1.Taint) or when the pod's nodeSelector, restricted to the flavor's
  label keys, does not match its `nodeLabels` (`checkFlavorForPodSets`; required node affinity is not
  simulated);
- quota (`fitsResourceQuota`): over `potential_available` is NoFit (`insufficient quota for R in flavor F,
  previously considered podsets requests (A) + current podset request (B) > maximum capacity (C)`); within
  `available` is Fit, at borrowing level 0 (within the ClusterQueue's nominal quota) or 1 (from the flat
  cohort: `classical.FindHeightOfLowestSubtreeThatFits`); otherwise `insufficient unused quota for R in
  flavor F, N more needed`, and preemption is simulated only when the nominal quota covers the request
  (`borrowWithinCohort` and fair sharing are not simulated): the oracle (`preemption_oracle.go`
  SimulatePreemption) says NoCandidates, Preempt (a target in the ClusterQueue) or Reclaim (targets in
  the cohort only), with the borrowing level after the preemptions;
- modes rank noFit < noPreemptionCandidates < preempt < reclaim < fit (`preemptionMode`); a flavor's mode
  is the worst over its resources; `isPreferred` compares (mode, borrowing level) under `flavorFungibility.
  preference` (BorrowingOverPreemption, the default: mode first, then level; PreemptionOverBorrowing: level
  first); `shouldTryNextFlavor` stops at the first flavor that fits without borrowing, or that borrows
  while `whenCanBorrow` is MayStopSearch (default; `Borrow` is its old name), or needs preemption while
  `whenCanPreempt` is MayStopSearch (`Preempt` its old name; default TryNextFlavor); otherwise the
  preferred flavor seen wins (so reclaiming from a borrower beats preempting in the ClusterQueue);
- the pending message is `couldn't assign flavors to pod set <name>: <reasons sorted, joined by ", ">`
  (`Assignment.Message`, `Status.Message`). The QuotaReserved reason is the caller's: `Pending` under
  v0.19's default feature gates (UnadmittedWorkloadsObservability off).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from kubesim.apimachinery.selectors import selector_from_map
from kubesim.apiserver.admission.resourcequota import format_qty, pod_requests
from kubesim.controllers.scheduler import tolerates
from kubesim.kueue import quota as q

FIT, PREEMPT, NOFIT = "Fit", "Preempt", "NoFit"
_RANK = {FIT: 0, PREEMPT: 1, NOFIT: 2}
# flavorassigner.go preemptionMode, worst to best
NO_FIT, NO_CANDIDATES, PREEMPT_IN_CQ, RECLAIM, FITS = range(5)
_ASSIGNMENT_MODE = {NO_FIT: NOFIT, NO_CANDIDATES: PREEMPT, PREEMPT_IN_CQ: PREEMPT, RECLAIM: PREEMPT, FITS: FIT}
WORST = (NO_FIT, 1 << 30)


@dataclass
class PodSet:
    name: str
    count: int
    template: dict

    def requests(self) -> dict[str, Decimal]:
        per_pod = pod_requests({"spec": (self.template or {}).get("spec") or {}})
        return {r: v * self.count for r, v in per_pod.items() if r != "pods"}


@dataclass
class Assignment:
    """A Workload's flavors: `flavors[podset][resource] = flavor`, the usage per (flavor, resource), the mode
    (worst over pod sets), its borrowing level (`Assignment.Borrowing`: 0 within nominal quota, 1 from the
    cohort) and the reasons for anything but Fit."""
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    usage: dict[q.FR, Decimal] = field(default_factory=dict)
    mode: str = FIT
    borrows: int = 0
    reasons: dict[str, list[str]] = field(default_factory=dict)     # podset -> reasons

    def message(self) -> str:
        return "; ".join(f"couldn't assign flavors to pod set {ps}: {', '.join(sorted(r))}"
                         for ps, r in self.reasons.items() if r)

    def to_api(self, podsets: list[PodSet]) -> list[dict]:
        """status.admission.podSetAssignments."""
        out = []
        for ps in podsets:
            flv = self.flavors.get(ps.name, {})
            req = ps.requests()
            out.append({"name": ps.name, "flavors": dict(flv), "count": ps.count,
                        "resourceUsage": {r: format_qty(r, v) for r, v in req.items() if r in flv}})
        return out


def taint_string(taint: dict) -> str:
    """A corev1.Taint as flavorassigner.go's `%s` prints it: the struct's fields in order, `{key value
    NoSchedule <nil>}` (an empty value leaves two spaces; `<nil>` is the unset timeAdded)."""
    return f"{{{taint.get('key', '')} {taint.get('value', '')} {taint.get('effect', '')} {taint.get('timeAdded') or '<nil>'}}}"


def check_flavor(flavor: dict, pod_spec: dict) -> str | None:
    """`checkFlavorForPodSets`: why the pod set cannot use this flavor's nodes, or None."""
    name = flavor["metadata"]["name"]
    spec = flavor.get("spec") or {}
    tolerations = list(pod_spec.get("tolerations") or []) + list(spec.get("tolerations") or [])
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"untolerated taint {taint_string(taint)} in flavor {name}"
    labels = spec.get("nodeLabels") or {}
    wanted = {k: v for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in labels}
    if not selector_from_map(wanted).matches(labels):
        return f"flavor {name} doesn't match node affinity"
    return None


def borrowing_level(cq: q.Node, fr: q.FR, val: Decimal) -> int:
    """`classical.FindHeightOfLowestSubtreeThatFits` on a flat cohort: 0 within the ClusterQueue, else 1."""
    return int(cq.parent is not None and cq.borrowing_with(fr, val))


def _fits_quota(cq: q.Node, fr: q.FR, assumed: Decimal, request: Decimal, oracle) -> tuple[tuple[int, int], str | None]:
    """`fitsResourceQuota`: ((preemption mode, borrowing level), reason)."""
    val = assumed + request
    max_capacity = q.potential_available(cq, fr)
    if val > max_capacity:
        return (NO_FIT, 0), (
            f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered podsets requests "
            f"({format_qty(fr[1], assumed)}) + current podset request ({format_qty(fr[1], request)}) > "
            f"maximum capacity ({format_qty(fr[1], max_capacity)})")
    borrow = borrowing_level(cq, fr, val)
    avail = q.available(cq, fr)
    if val <= avail:
        return (FITS, borrow), None
    reason = (f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
              f"{format_qty(fr[1], val - avail)} more needed")
    if cq.quotas.get(fr, q.ResourceQuota(q.ZERO)).nominal >= val:
        mode, borrow_after = oracle(fr, val)
        return (mode, borrow_after), reason
    return (NO_FIT, borrow), reason


def is_preferred(a: tuple[int, int], b: tuple[int, int], preference: str | None) -> bool:
    """flavorassigner.go `isPreferred`: (preemption mode, borrowing level) a better than b."""
    if a[0] == NO_FIT:
        return False
    if b[0] == NO_FIT:
        return True
    if (a[0] == NO_CANDIDATES) != (b[0] == NO_CANDIDATES):
        return a[0] != NO_CANDIDATES
    if preference == "PreemptionOverBorrowing":
        return a[1] < b[1] if a[1] != b[1] else a[0] > b[0]
    return a[0] > b[0] if a[0] != b[0] else a[1] < b[1]


def should_try_next_flavor(mode: tuple[int, int], fungibility: dict) -> bool:
    """flavorassigner.go `shouldTryNextFlavor` (the CRD's defaults: whenCanBorrow MayStopSearch,
    whenCanPreempt TryNextFlavor)."""
    if mode[0] in (NO_FIT, NO_CANDIDATES):
        return True
    if mode[0] in (PREEMPT_IN_CQ, RECLAIM) and (fungibility.get("whenCanPreempt") or "TryNextFlavor") == "TryNextFlavor":
        return True
    return mode[1] > 0 and fungibility.get("whenCanBorrow") == "TryNextFlavor"


def _no_preemption(fr, val):
    return NO_CANDIDATES, 0


def assign(cq_obj: dict, cq: q.Node, flavors: dict[str, dict], podsets: list[PodSet], oracle=_no_preemption) -> Assignment:
    """Flavors for every pod set of a Workload in ClusterQueue `cq_obj` (its quota node `cq`).

    `oracle(fr, amount)` is Kueue's preemption oracle: (NO_CANDIDATES | PREEMPT_IN_CQ | RECLAIM, borrowing
    level after the preemptions) for `amount` of (flavor, resource) `fr`."""
    out = Assignment()
    spec = cq_obj.get("spec") or {}
    groups = spec.get("resourceGroups") or []
    fungibility = spec.get("flavorFungibility") or {}
    for ps in podsets:
        requests = ps.requests()
        pod_spec = (ps.template or {}).get("spec") or {}
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        ps_mode = FIT
        for r in requests:
            if not any(r in (g.get("coveredResources") or []) for g in groups):
                reasons.append(f"resource {r} unavailable in ClusterQueue")
                ps_mode = NOFIT
        for group in groups:
            wanted = {r: v for r, v in requests.items() if r in (group.get("coveredResources") or [])}
            if not wanted:
                continue
            best, best_mode = None, WORST
            for flv in group.get("flavors") or []:
                fname = flv["name"]
                flavor = flavors.get(fname)
                why = f"flavor {fname} not found" if flavor is None else check_flavor(flavor, pod_spec)
                if why:
                    reasons.append(why)
                    continue
                mode = (FITS, 0)
                for r, v in wanted.items():
                    m, why = _fits_quota(cq, (fname, r), out.usage.get((fname, r), q.ZERO), v, oracle)
                    if why:
                        reasons.append(why)
                    if is_preferred(mode, m, fungibility.get("preference")):
                        mode = m                     # the flavor's mode: the worst of its resources
                    if mode[0] == NO_FIT:
                        break
                if not should_try_next_flavor(mode, fungibility):
                    best, best_mode = fname, mode
                    break
                if is_preferred(mode, best_mode, fungibility.get("preference")):
                    best, best_mode = fname, mode
            if best is None:
                ps_mode = NOFIT
                continue
            ps_mode = max(ps_mode, _ASSIGNMENT_MODE[best_mode[0]], key=_RANK.get)
            out.borrows = max(out.borrows, best_mode[1])
            for r, v in wanted.items():
                chosen[r] = best
                out.usage[(best, r)] = out.usage.get((best, r), q.ZERO) + v
        out.flavors[ps.name] = chosen
        out.mode = max(out.mode, ps_mode, key=_RANK.get)
        if ps_mode != FIT:
            out.reasons[ps.name] = reasons
    return out
