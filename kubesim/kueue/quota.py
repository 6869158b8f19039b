"""Kueue's quota arithmetic: ClusterQueues and Cohorts as resource nodes, with borrowing and lending.

Follows kubernetes-sigs/kueue `pkg/cache/scheduler/resource_node.go` (v0.19) function by function:
a node's `subtree` quota (a ClusterQueue: its nominal quota; a Cohort: what its children put in it, i.e.
their subtree quota minus what `lendingLimit` keeps local), `local_quota` (what a lending limit keeps out of
the cohort), `available` (unused local quota plus what the parent still has, capped by `borrowingLimit`),
`potential_available` (the same with no usage: the most a workload could ever get), and usage that
bubbles up to the cohort only past the local quota (`add_usage` / `remove_usage`).

Only flat cohorts are built here (ClusterQueues with `spec.cohortName`, the cohort itself holding no quota
of its own): hierarchical Cohort objects with their own `resourceGroups` are not simulated. Amounts are
`Decimal`s of the resource's base unit; an unknown quota is 0, as in Kueue.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from kubesim.apiserver.admission.resourcequota import qty

FR = tuple[str, str]     # (flavor, resource): Kueue's resources.FlavorResource
ZERO = Decimal(0)


@dataclass
class ResourceQuota:
    nominal: Decimal
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None


@dataclass(eq=False)
class Node:
    """A ClusterQueue (`cohort` set when it is in one) or a Cohort (`children` set)."""
    name: str
    quotas: dict[FR, ResourceQuota] = field(default_factory=dict)
    subtree: dict[FR, Decimal] = field(default_factory=dict)
    usage: dict[FR, Decimal] = field(default_factory=dict)
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)

    def local_quota(self, fr: FR) -> Decimal:
        """resourceNode.localQuota: capacity a lendingLimit keeps from the cohort."""
        q = self.quotas.get(fr)
        if q is not None and q.lending_limit is not None:
            return max(ZERO, self.subtree.get(fr, ZERO) - q.lending_limit)
        return ZERO

    def borrowing_with(self, fr: FR, val: Decimal) -> bool:
        """Whether usage + val would exceed this node's own (subtree) quota."""
        return self.usage.get(fr, ZERO) + val > self.subtree.get(fr, ZERO)

    def borrowing(self, fr: FR) -> bool:
        return self.borrowing_with(fr, ZERO)

    def path_to_root(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


def local_available(node: Node, fr: FR) -> Decimal:
    return max(ZERO, node.local_quota(fr) - node.usage.get(fr, ZERO))


def available(node: Node, fr: FR) -> Decimal:
    """resource_node.go `available`: what the node may still use now, borrowing through its parent."""
    if node.parent is None:
        return node.subtree.get(fr, ZERO) - node.usage.get(fr, ZERO)
    parent_available = available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        lq = node.local_quota(fr)
        stored_in_parent = node.subtree.get(fr, ZERO) - lq
        used_in_parent = max(ZERO, node.usage.get(fr, ZERO) - lq)
        parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit, parent_available)
    return local_available(node, fr) + parent_available


def potential_available(node: Node, fr: FR) -> Decimal:
    """resource_node.go `potentialAvailable`: the most the node could use with nothing else running."""
    if node.parent is None:
        return node.subtree.get(fr, ZERO)
    avail = node.local_quota(fr) + potential_available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        avail = min(node.subtree.get(fr, ZERO) + q.borrowing_limit, avail)
    return avail


def add_usage(node: Node, fr: FR, val: Decimal) -> None:
    """resource_node.go `addUsage`: usage past the local quota is also used in the cohort."""
    local = local_available(node, fr)
    node.usage[fr] = node.usage.get(fr, ZERO) + val
    if node.parent is not None and val > local:
        add_usage(node.parent, fr, val - local)


def remove_usage(node: Node, fr: FR, val: Decimal) -> None:
    stored_in_parent = node.usage.get(fr, ZERO) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, ZERO) - val
    if stored_in_parent <= 0 or node.parent is None:
        return
    remove_usage(node.parent, fr, min(val, stored_in_parent))


def within_nominal(node: Node, frs) -> bool:
    """resource_node.go `IsWithinNominalInResources`."""
    return all(node.subtree.get(fr, ZERO) >= node.usage.get(fr, ZERO) for fr in frs)


def fits_in_quota(node: Node, requests: dict[FR, Decimal]) -> bool:
    """resource_node.go `QuantitiesFitInQuota` (the fit half): requests fit in the node's unused quota."""
    return all(node.subtree.get(fr, ZERO) >= node.usage.get(fr, ZERO) + v for fr, v in requests.items())


def cq_quotas(cq: dict) -> dict[FR, ResourceQuota]:
    """The quotas of a ClusterQueue object (`spec.resourceGroups[].flavors[].resources[]`)."""
    out: dict[FR, ResourceQuota] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                nominal, borrowing, lending = (None if res.get(k) is None else qty(res[k])
                                               for k in ("nominalQuota", "borrowingLimit", "lendingLimit"))
                out[(flavor["name"], res["name"])] = ResourceQuota(nominal or ZERO, borrowing, lending)
    return out


def build(cluster_queues: list[dict]) -> dict[str, Node]:
    """ClusterQueue name -> its node, wired into flat cohorts (updateCohortTreeResources: a cohort's
    subtree quota is the sum of its children's, minus what each lends nowhere)."""
    nodes: dict[str, Node] = {}
    cohorts: dict[str, Node] = {}
    for cq in cluster_queues:
        node = Node(cq["metadata"]["name"], cq_quotas(cq))
        node.subtree = {fr: q.nominal for fr, q in node.quotas.items()}
        nodes[node.name] = node
        cohort_name = (cq.get("spec") or {}).get("cohortName") or (cq.get("spec") or {}).get("cohort")
        if cohort_name:
            cohort = cohorts.setdefault(cohort_name, Node(cohort_name))
            node.parent = cohort
            cohort.children.append(node)
            for fr, q in node.subtree.items():       # accumulateFromChild
                cohort.subtree[fr] = cohort.subtree.get(fr, ZERO) + q - node.local_quota(fr)
    return nodes
