"""Kueue's flavor assignment: which ResourceFlavor each resource of a Workload's pod sets gets, and whether
it fits now (Fit), could fit by preempting (Preempt) or cannot (NoFit), with Kueue's own messages.

Follows kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go` (v0.19):
- resources are assigned per resource group; a group's flavors are tried in the ClusterQueue's order and
  every resource of the group gets the same flavor (`findFlavorForPodSets`); a requested resource no group
  covers is `resource X unavailable in ClusterQueue`;
- a flavor is skipped when the pod set does not tolerate one of its `nodeTaints` (NoSchedule/NoExecute;
  the flavor's own `tolerations` count: `untolerated taint {...} in flavor F`) or when the pod's
  nodeSelector, restricted to the flavor's label keys, does not match its `nodeLabels`
  (`checkFlavorForPodSets`; required node affinity is not simulated);
- quota (`fitsResourceQuota`): over `potential_available` is NoFit (`insufficient quota for R in flavor F,
  previously considered podsets requests (A) + current podset request (B) > maximum capacity (C)`); within
  `available` is Fit (borrowing when over nominal); otherwise `insufficient unused quota for R in flavor
  F, N more needed`, and Preempt is possible only when the nominal quota covers the request (classical
  preemption without `borrowWithinCohort`, which is not simulated);
- flavorFungibility defaults (`whenCanBorrow: MayStopSearch`, `whenCanPreempt: TryNextFlavor`,
  `shouldTryNextFlavor`): a flavor that fits (even by borrowing) ends the search; one that needs
  preemption is kept while later flavors are tried, and the first such is used if none fits;
- the pending message is `couldn't assign flavors to pod set <name>: <reasons sorted, joined by ", ">`
  (`Assignment.Message`, `Status.Message`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from kubesim.kueue import quota as q
from kubesim.quota import format_qty, pod_requests
from kubesim.scheduler import tolerates
from kubesim.selectors import selector_from_map

FIT, PREEMPT, NOFIT = "Fit", "Preempt", "NoFit"
_RANK = {FIT: 0, PREEMPT: 1, NOFIT: 2}


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
    """A Workload's flavors: `flavors[podset][resource] = flavor`, the usage per (flavor, resource),
    the mode (worst over resources), whether it borrows, and the reasons for anything but Fit."""
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    usage: dict[q.FR, Decimal] = field(default_factory=dict)
    mode: str = FIT
    borrows: bool = False
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
    """corev1.Taint.ToString: `key=value:Effect` (`key:Effect` without a value)."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


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


def _fits_quota(cq: q.Node, fr: q.FR, assumed: Decimal, request: Decimal) -> tuple[str, bool, str | None]:
    """`fitsResourceQuota`: (mode, borrows, reason)."""
    val = assumed + request
    max_capacity = q.potential_available(cq, fr)
    if val > max_capacity:
        return NOFIT, False, (
            f"insufficient quota for {fr[1]} in flavor {fr[0]}, previously considered podsets requests "
            f"({format_qty(fr[1], assumed)}) + current podset request ({format_qty(fr[1], request)}) > "
            f"maximum capacity ({format_qty(fr[1], max_capacity)})")
    borrows = cq.borrowing_with(fr, val)
    avail = q.available(cq, fr)
    if val <= avail:
        return FIT, borrows, None
    reason = (f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
              f"{format_qty(fr[1], val - avail)} more needed")
    nominal = cq.quotas.get(fr, q.ResourceQuota(q.ZERO)).nominal
    return (PREEMPT if nominal >= val else NOFIT), borrows, reason


def assign(cq_obj: dict, cq: q.Node, flavors: dict[str, dict], podsets: list[PodSet],
           can_preempt=lambda fr_usage: True) -> Assignment:
    """Flavors for every pod set of a Workload in ClusterQueue `cq_obj` (its quota node `cq`).

    `can_preempt(usage)` says whether preemption could make room for `usage` ({(flavor, resource): amount})
    (Kueue's preemption oracle); a Preempt flavor without candidates is treated like NoFit."""
    out = Assignment()
    groups = (cq_obj.get("spec") or {}).get("resourceGroups") or []
    for ps in podsets:
        requests = ps.requests()
        pod_spec = (ps.template or {}).get("spec") or {}
        reasons: list[str] = []
        chosen: dict[str, str] = {}
        for r in requests:
            if not any(r in (g.get("coveredResources") or []) for g in groups):
                reasons.append(f"resource {r} unavailable in ClusterQueue")
                out.mode = NOFIT
        for group in groups:
            wanted = {r: v for r, v in requests.items() if r in (group.get("coveredResources") or [])}
            if not wanted:
                continue
            best = None          # (mode, borrows, flavor)
            for flv in group.get("flavors") or []:
                fname = flv["name"]
                flavor = flavors.get(fname)
                if flavor is None:
                    reasons.append(f"flavor {fname} not found")
                    continue
                why = check_flavor(flavor, pod_spec)
                if why:
                    reasons.append(why)
                    continue
                mode, borrows = FIT, False
                for r, v in wanted.items():
                    m, b, why = _fits_quota(cq, (fname, r), out.usage.get((fname, r), q.ZERO), v)
                    borrows = borrows or b
                    if why:
                        reasons.append(why)
                    mode = max(mode, m, key=_RANK.get)
                if mode == PREEMPT and not can_preempt({(fname, r): v for r, v in wanted.items()}):
                    mode = NOFIT
                if mode == FIT:
                    best = (FIT, borrows, fname)
                    break                       # whenCanBorrow: MayStopSearch
                if mode == PREEMPT and best is None:
                    best = (PREEMPT, borrows, fname)   # whenCanPreempt: TryNextFlavor
            if best is None:
                out.mode = NOFIT
                continue
            mode, borrows, fname = best
            out.mode = max(out.mode, mode, key=_RANK.get)
            out.borrows = out.borrows or borrows
            for r, v in wanted.items():
                chosen[r] = fname
                out.usage[(fname, r)] = out.usage.get((fname, r), q.ZERO) + v
        out.flavors[ps.name] = chosen
        if out.mode != FIT:
            out.reasons[ps.name] = reasons
    return out
