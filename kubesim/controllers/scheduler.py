"""The scheduler: binds Pending pods to nodes as kube-scheduler's default profile does.

Filters, in kube-scheduler's order (a node reports its first failing filter): NodeUnschedulable,
TaintToleration (NoSchedule/NoExecute), NodeAffinity (nodeSelector + required node affinity),
NodeResourcesFit (requests vs allocatable minus the requests of the node's non-terminated pods, and the
pod count). Score: the preferred node-affinity weights; ties go to the least-allocated node.
A pod that fits nowhere stays Pending with `PodScheduled=False/Unschedulable` and a `FailedScheduling`
event, and is retried when capacity frees (a pod ends or goes, a node is added or changed).
"""
from __future__ import annotations

from decimal import Decimal

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.resources import pod_requests, qty
from kubesim.apimachinery.selectors import node_selector_requirements, selector_from_map
from kubesim.controllers.framework import Controller, ControllerContext, EventRecorder, Key, key_of

TERMINAL = ("Succeeded", "Failed")


def tolerates(tolerations: list[dict], taint: dict) -> bool:
    for t in tolerations or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taint(pod: dict, node: dict) -> dict | None:
    tolerations = pod["spec"].get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


def match_term(term: dict, node: dict) -> bool:
    """A NodeSelectorTerm: all its matchExpressions (labels) and matchFields (metadata.name only) hold."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False   # an empty term matches no objects
    by_labels, by_fields = node_selector_requirements(exprs), node_selector_requirements(fields)
    if by_labels is None or by_fields is None or any(e.get("key") != "metadata.name" for e in fields):
        return False
    return (by_labels.matches(node["metadata"].get("labels") or {})
            and by_fields.matches({"metadata.name": node["metadata"]["name"]}))


def node_affinity(pod: dict) -> dict:
    return ((pod["spec"].get("affinity") or {}).get("nodeAffinity")) or {}


def matches_selector_and_affinity(pod: dict, node: dict) -> bool:
    labels = node["metadata"].get("labels") or {}
    if not selector_from_map(pod["spec"].get("nodeSelector")).matches(labels):
        return False
    required = node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required:
        return any(match_term(t, node) for t in required.get("nodeSelectorTerms") or [])
    return True


def preferred_score(pod: dict, node: dict) -> int:
    return sum(int(p.get("weight") or 0)
               for p in node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
               if match_term(p.get("preference") or {}, node))


def allocatable(node: dict) -> dict[str, Decimal]:
    """status.allocatable (a node registered without it offers its capacity)."""
    status = node.get("status") or {}
    return {k: qty(v) for k, v in (status.get("allocatable") or status.get("capacity") or {}).items()}


def fit_failures(requests: dict[str, Decimal], free: dict[str, Decimal], pods_free: Decimal) -> list[str]:
    reasons = []
    if pods_free < 1:
        reasons.append("Too many pods")
    for res, amount in sorted(requests.items()):
        if amount > 0 and amount > free.get(res, Decimal(0)):
            reasons.append(f"Insufficient {res}")
    return reasons


def taint_text(taint: dict) -> str:
    return f"{{{taint.get('key')}: {taint.get('value') or ''}}}"


def unschedulable_message(total: int, reasons: dict[str, int]) -> str:
    parts = sorted(f"{n} {r}" for r, n in reasons.items())
    head = f"0/{total} nodes are available"
    if parts:
        head += ": " + ", ".join(parts)
    return f"{head}. preemption: 0/{total} nodes are available: {total} Preemption is not helpful for scheduling."


class KubeScheduler(Controller):
    name = "scheduler"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.events = EventRecorder(self.store, "default-scheduler")
        self.pods_rt = cluster.rt("pods")
        self.nodes_rt = cluster.rt("nodes")
        self.usage: dict[str, dict[Key, dict[str, Decimal]]] = {}   # node -> pod key -> requests
        self.unschedulable: set[Key] = set()

    def reset(self) -> None:
        self.usage.clear()
        self.unschedulable.clear()

    # --- events ---------------------------------------------------------------------------------
    def on_event(self, event_type, rt, obj, old):
        if rt.group == "" and rt.plural in ("nodes", "persistentvolumeclaims"):
            if event_type != "DELETED":
                self._retry_unschedulable()
            return
        if rt.plural != "pods" or rt.group != "":
            return
        key = key_of(obj)
        spec, status = obj["spec"], obj.get("status") or {}
        node = spec.get("nodeName")
        gone = event_type == "DELETED" or status.get("phase") in TERMINAL
        freed = False
        for used in self.usage.values():
            if key in used and (gone or node is None or used is not self.usage.get(node)):
                del used[key]
                freed = True
        if node and not gone:
            self.usage.setdefault(node, {})[key] = pod_requests(obj)
        if gone:
            self.unschedulable.discard(key)
        if freed:
            self._retry_unschedulable()
        # a pod with schedulingGates waits (SchedulingGates PreEnqueue plugin) until they are all removed
        if (event_type != "DELETED" and not node and not gone and not spec.get("schedulingGates")
                and (spec.get("schedulerName") or "default-scheduler") == "default-scheduler"
                and not obj["metadata"].get("deletionTimestamp")):
            self.queue.add(key)

    def _retry_unschedulable(self) -> None:
        for key in list(self.unschedulable):
            self.queue.add(key)

    # --- scheduling -----------------------------------------------------------------------------
    def reconcile(self, key: Key) -> None:
        pod = self.cluster.cache.get(self.pods_rt, *key)
        if pod is None or pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            self.unschedulable.discard(key)
            return
        nodes = sorted(self.cluster.cache.list(self.nodes_rt), key=lambda n: n["metadata"]["name"])
        missing = self._missing_claim(pod)
        if missing:      # VolumeBinding's PreFilter: no node is even considered
            self.unschedulable.add(key)
            self._mark_unschedulable(pod, f'0/{len(nodes)} nodes are available: persistentvolumeclaim "{missing}" '
                                          f"not found. preemption: 0/{len(nodes)} nodes are available: {len(nodes)} "
                                          "Preemption is not helpful for scheduling.")
            return
        node, reasons = self.pick_node(pod, nodes)
        if node is None:
            self.unschedulable.add(key)
            self._mark_unschedulable(pod, unschedulable_message(len(nodes), reasons))
            return
        self.unschedulable.discard(key)
        self._bind(pod, node["metadata"]["name"])

    def _missing_claim(self, pod: dict) -> str | None:
        pvc_rt = self.cluster.rt("persistentvolumeclaims")
        for v in pod["spec"].get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and self.cluster.cache.get(pvc_rt, pod["metadata"]["namespace"], claim) is None:
                return claim
        return None

    def pick_node(self, pod: dict, nodes: list[dict]) -> tuple[dict | None, dict[str, int]]:
        requests = pod_requests(pod)
        reasons: dict[str, int] = {}
        feasible: list[tuple[int, Decimal, str, dict]] = []
        for node in nodes:
            why = self._filter(pod, node, requests)
            if why:
                for r in why:
                    reasons[r] = reasons.get(r, 0) + 1
                continue
            feasible.append((preferred_score(pod, node), self._free_fraction(node), node["metadata"]["name"], node))
        if not feasible:
            return None, reasons
        feasible.sort(key=lambda f: (-f[0], -f[1], f[2]))
        return feasible[0][3], reasons

    def _used(self, node_name: str) -> tuple[dict[str, Decimal], int]:
        used: dict[str, Decimal] = {}
        pods = self.usage.get(node_name, {})
        for req in pods.values():
            for res, amount in req.items():
                used[res] = used.get(res, Decimal(0)) + amount
        return used, len(pods)

    def _filter(self, pod: dict, node: dict, requests: dict[str, Decimal]) -> list[str]:
        if (node.get("spec") or {}).get("unschedulable"):
            return ["node(s) were unschedulable"]
        taint = untolerated_taint(pod, node)
        if taint is not None:
            return [f"node(s) had untolerated taint {taint_text(taint)}"]
        if not matches_selector_and_affinity(pod, node):
            return ["node(s) didn't match Pod's node affinity/selector"]
        alloc = allocatable(node)
        used, count = self._used(node["metadata"]["name"])
        free = {res: amount - used.get(res, Decimal(0)) for res, amount in alloc.items()}
        return fit_failures(requests, free, alloc.get("pods", Decimal(110)) - count)

    def _free_fraction(self, node: dict) -> Decimal:
        """LeastAllocated: the mean free share of cpu and memory after placing nothing more."""
        alloc = allocatable(node)
        used, _ = self._used(node["metadata"]["name"])
        shares = [(alloc[r] - used.get(r, Decimal(0))) / alloc[r] for r in ("cpu", "memory") if alloc.get(r)]
        return sum(shares, Decimal(0)) / len(shares) if shares else Decimal(0)

    def _bind(self, pod: dict, node_name: str) -> None:
        ns, name = key_of(pod)
        try:
            fresh = self.store.get(self.pods_rt, ns, name)
            if fresh["spec"].get("nodeName") or fresh["metadata"]["uid"] != pod["metadata"]["uid"]:
                return
            bind = getattr(self.store, "bind", None)
            if bind is not None:    # POST pods/<name>/binding: nodeName + PodScheduled in one write
                bound = self.cluster.observe(self.pods_rt, bind(ns, name, node_name))
            else:
                fresh["spec"]["nodeName"] = node_name
                bound = self.cluster.observe(self.pods_rt, self.store.update(self.pods_rt, ns, name, fresh))
                self._set_scheduled(bound, "True", None, None)
            self.usage.setdefault(node_name, {})[(ns, name)] = pod_requests(bound)
        except ApiError as e:
            if e.code == 404:
                return
            if e.code == 409:
                self.queue.add_rate_limited((ns, name))
                return
            raise
        self.events.record(bound, "Normal", "Scheduled", f"Successfully assigned {ns}/{name} to {node_name}")

    def _mark_unschedulable(self, pod: dict, message: str) -> None:
        conds = (pod.get("status") or {}).get("conditions") or []
        current = next((c for c in conds if c.get("type") == "PodScheduled"), None)
        if current and current.get("reason") == "Unschedulable" and current.get("message") == message:
            return   # already reported: kube-scheduler does not repeat an identical event on every retry
        try:
            self._set_scheduled(pod, "False", "Unschedulable", message)
        except ApiError as e:
            if e.code in (404, 409):
                return
            raise
        self.events.record(pod, "Warning", "FailedScheduling", message)

    def _set_scheduled(self, pod: dict, status: str, reason: str | None, message: str | None) -> None:
        ns, name = key_of(pod)
        fresh = self.store.get(self.pods_rt, ns, name)
        st = fresh.setdefault("status", {})
        st.setdefault("phase", "Pending")
        cond = {"type": "PodScheduled", "status": status, "lastProbeTime": None,
                "lastTransitionTime": self.cluster.now()}
        if reason:
            cond["reason"] = reason
            cond["message"] = message
        st["conditions"] = [c for c in st.get("conditions") or [] if c.get("type") != "PodScheduled"] + [cond]
        self.cluster.observe(self.pods_rt, self.store.update(self.pods_rt, ns, name, fresh, subresource="status"))
