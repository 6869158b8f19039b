"""Kueue's objects for a platform file with ``queueing: kueue`` (pure: ``Platform`` in, manifests out).

- ResourceFlavors from the node pools: ``default`` (any untainted node), ``gpu`` (the gpu pool's taint, so
  only pods tolerating it - GPU steps - get it) and ``online`` (the online pool's label and taint: only
  online steps, which tolerate it, get it and are placed there).
- WorkloadPriorityClasses ``skiff-online`` > ``skiff-scheduled`` > ``skiff-dev``.
- Per team a ClusterQueue ``<team>`` in the one cohort (nominal quota per flavor, optional borrowing and
  lending limits), ``withinClusterQueue: LowerPriority`` (an online step preempts the team's own scheduled
  ones) and ``reclaimWithinCohort: Any`` (lent quota comes back when the owner needs it; Kueue's default
  ``Never`` would never give it back), with LocalQueue ``skiff`` in the team's namespace.
- Per team a ClusterQueue ``<team>-dev`` for development instances, in the same cohort, LocalQueue
  ``skiff-dev``. It never preempts inside itself (``withinClusterQueue: Never``): a preempted notebook loses
  its session, so one instance must never evict another. Training ClusterQueues reclaim only from queues
  that borrow, so an instance within the dev queue's own quota is never taken; one running on borrowed
  (idle) quota is reclaimed - before any scheduled Job that runs within its team's quota, which no one
  may reclaim. With no ``dev`` quota in the file every instance runs on idle quota.
- Kueue's manager Configuration (``manager_config``): ``manageJobsWithoutQueueName: true`` with
  ``managedJobsNamespaceSelector`` on the team namespaces' ``skiff.io/team`` label, so a Job or bare pod a DAG's
  code creates there without a queue name is Kueue's too (suspended or gated; its Workload names no LocalQueue
  and is never admitted): no way around the queues. Elsewhere (kube-system, Skiff's own namespace) Kueue
  manages only what names a queue.
Kueue counts pod requests only: storage stays in the team's ResourceQuota (``desired.quota_hard``), and so does a
hard cap on pod requests at the team's ``ceiling`` (what its queues may ever hold, borrowing included): Kueue
manages only what carries its queue label, the API server's quota holds everything else.
"""
from __future__ import annotations

from decimal import Decimal

from operators.core.checks import short_repr
from operators.core.quantity import parse_quantity, quantity_text
from operators.platform.model import FlavorQuota, Platform, PodsReady, Quota, Team
from operators.templating import render

ONLINE, SCHEDULED, DEV = "skiff-online", "skiff-scheduled", "skiff-dev"
PRIORITIES = ((ONLINE, 3000, "online training steps"), (SCHEDULED, 2000, "scheduled training steps"),
              (DEV, 1000, "development instances"))
PRIORITY_NAMES = tuple(n for n, _v, _d in PRIORITIES)
LOCAL_QUEUE, DEV_LOCAL_QUEUE = "skiff", "skiff-dev"
# the labels Kueue's Job and StatefulSet integrations read (kueue pkg/controller/constants/constants.go:
# QueueLabel, WorkloadPriorityClassLabel)
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
KUEUE_DOMAIN = "kueue.x-k8s.io"
# queueing: kueue on a cluster whose API does not serve Kueue's kinds (its CRDs not installed): said by platform_sync
# (which then applies nothing) and by a training step (which then creates no Job), with the same fix
NOT_SERVED = "queueing: kueue, but this cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2 {kind}: 404 Not Found)"
HOW_TO_FIX = ("Install Kueue v0.19 (helm install kueue oci://registry.k8s.io/kueue/charts/kueue --version 0.19.2 -n "
              "kueue-system --create-namespace), have a cluster admin apply its cluster-wide objects (python -m "
              "operators.rbac teams --platform FILE | kubectl apply -f -), or set queueing: quota in the platform file")


def not_served(kind: str, consequence: str) -> str:
    """What Skiff says when Kueue's API is missing: the 404, what was (not) done about it, and the fix."""
    return f"{NOT_SERVED.format(kind=kind)}: {consequence}. {HOW_TO_FIX}"


def is_kueue_key(key: str) -> bool:
    """A label or annotation key in Kueue's domain (``kueue.x-k8s.io/...``, ``*.kueue.x-k8s.io/...``): only Skiff
    sets them. A user's would pick a queue or a prebuilt Workload (``prebuilt-workload-name``) behind Skiff's back,
    or, under ``queueing: quota``, leave a Job suspended for a Kueue that is not there."""
    prefix, slash, _name = key.partition("/")
    return bool(slash) and (prefix == KUEUE_DOMAIN or prefix.endswith("." + KUEUE_DOMAIN))


FLAVOR_ORDER = ("online", "gpu", "default")      # a pod gets the first flavor whose taints it tolerates


def flavors(platform: Platform) -> list[dict]:
    pools = platform.node_pools
    gpu_taint = {"key": pools.gpu_taint_key, "value": pools.gpu_taint_value, "effect": pools.gpu_taint_effect}
    online_taint = {"key": pools.online_key, "value": pools.online_value, "effect": pools.online_taint_effect}
    return [{"name": "online", "node_labels": {pools.online_key: pools.online_value}, "node_taints": [online_taint]},
            {"name": "gpu", "node_labels": {}, "node_taints": [gpu_taint]},
            {"name": "default", "node_labels": {}, "node_taints": []}]


def cluster_objects(platform: Platform, labels: dict) -> list[dict]:
    """The ResourceFlavors and WorkloadPriorityClasses."""
    return render("kueue/cluster.yaml.j2", labels=labels, annotations={}, flavors=flavors(platform),
                  priorities=[{"name": n, "value": v, "description": d} for n, v, d in PRIORITIES])


# kueue pkg/controller/jobframework (defaults.go WorkloadShouldBeSuspended): with manageJobsWithoutQueueName, a
# workload without a queue name in a namespace the selector matches is suspended (a Job) or gated (a pod)
TEAM_NAMESPACE_LABEL = "skiff.io/team"     # operators.platform.desired.LABEL_TEAM, on every team Namespace
INTEGRATIONS = ("batch/job", "pod", "statefulset")   # training Jobs; instances' StatefulSets (need pod)


def manager_config(labels: dict, pods_ready: PodsReady | None = None) -> dict:
    """The ConfigMap ``kueue-system/kueue-manager-config`` holding Skiff's Kueue Configuration (what the Helm
    chart's ``managerConfig.controllerManagerConfigYaml`` sets); ``pods_ready``: the platform file's
    ``kueue.wait_for_pods_ready`` (None: Kueue's own waitForPodsReady defaults)."""
    import yaml

    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "manageJobsWithoutQueueName": True,
              "managedJobsNamespaceSelector": {"matchExpressions": [
                  {"key": TEAM_NAMESPACE_LABEL, "operator": "Exists"}]},
              "integrations": {"frameworks": list(INTEGRATIONS)}}
    if pods_ready is not None and pods_ready.configuration():
        config["waitForPodsReady"] = pods_ready.configuration()
    return render("kueue/manager-config.yaml.j2", labels=labels, config=yaml.safe_dump(config, sort_keys=False))


def _resource(platform: Platform, key: str) -> str:
    return platform.node_pools.gpu_resource if key == "gpu" else key


def _flavor_entries(platform: Platform, quotas: tuple[FlavorQuota, ...], covered: list[str]) -> list[dict]:
    """ClusterQueue ``resourceGroups[0].flavors``: every covered resource listed, 0 where the file says none."""
    by_name = {q.flavor: q for q in quotas}
    out = []
    for name in FLAVOR_ORDER:
        q = by_name.get(name)
        if q is None:
            continue
        nominal, borrow, lend = dict(q.nominal), dict(q.borrowing_limit), dict(q.lending_limit)
        resources = []
        for key in ("cpu", "memory", "gpu"):
            if _resource(platform, key) not in covered:
                continue
            entry = {"name": _resource(platform, key), "nominalQuota": nominal.get(key, "0")}
            if key in borrow:
                entry["borrowingLimit"] = borrow[key]
            if key in lend:
                entry["lendingLimit"] = lend[key]
            resources.append(entry)
        out.append({"name": name, "resources": resources})
    return out


def queue_names(team: str) -> tuple[str, str]:
    """The team's ClusterQueues (cluster-scoped): its training queue and its development instances' queue. The
    loader refuses a file where two teams derive the same name (team ``ml``'s ``ml-dev`` and team ``ml-dev``)."""
    return team, f"{team}-dev"


def _queues(team: Team) -> list[tuple[str, str, tuple[FlavorQuota, ...], str]]:
    """The team's two ClusterQueues: (name, LocalQueue, every flavor it lists, withinClusterQueue)."""
    out = []
    training, dev = queue_names(team.name)
    for name, local, quotas, within in ((training, LOCAL_QUEUE, team.kueue_flavors, "LowerPriority"),
                                        (dev, DEV_LOCAL_QUEUE, team.kueue_dev, "Never")):
        # a queue needs every flavor its team's pods may get, even at 0 quota, to borrow in it
        allowed = {q.flavor for q in team.kueue_flavors} | {q.flavor for q in quotas}
        present = {q.flavor for q in quotas}
        out.append((name, local, quotas + tuple(FlavorQuota(f, ()) for f in FLAVOR_ORDER
                                                if f in allowed and f not in present), within))
    return out


def ceiling(platform: Platform, team: Team) -> dict[str, Decimal]:
    """The most the team's ClusterQueues can ever have admitted at once, per ``cpu``/``memory``/``gpu``: in each
    flavor its queues' nominal quota plus their borrowing limits, no more than the cohort's whole nominal quota
    there (a queue without a borrowing limit may borrow all of it: Kueue's resource_node.go). The team's
    ResourceQuota holds the namespace's pod requests to it, so a pod or Job created without Kueue's queue label
    (which Kueue does not manage, and any DAG's code may create as Skiff's ServiceAccount) still meets a hard cap
    in the API server (issue 30, class 2)."""
    from operators.core.quantity import parse_quantity

    cohort: dict[tuple[str, str], Decimal] = {}
    for other in platform.teams:
        for _name, _local, quotas, _within in _queues(other):
            for q in quotas:
                for key, value in q.nominal:
                    cohort[(q.flavor, key)] = cohort.get((q.flavor, key), Decimal(0)) + parse_quantity(value)
    reach: dict[tuple[str, str], Decimal | None] = {}  # None: no borrowing limit in some queue of the team
    for _name, _local, quotas, _within in _queues(team):
        for q in quotas:
            nominal, borrow = dict(q.nominal), dict(q.borrowing_limit)
            for key in ("cpu", "memory", "gpu"):
                had = reach.get((q.flavor, key), Decimal(0))
                reach[(q.flavor, key)] = None if had is None or key not in borrow else (
                    had + parse_quantity(nominal.get(key, "0")) + parse_quantity(borrow[key]))
    out = {"cpu": Decimal(0), "memory": Decimal(0), "gpu": Decimal(0)}
    for (flavor, key), most in reach.items():
        whole = cohort.get((flavor, key), Decimal(0))
        out[key] += whole if most is None else min(most, whole)
    return out


def team_objects(platform: Platform, team: Team, labels: dict) -> list[dict]:
    """The team's two ClusterQueues with their LocalQueues: [CQ, LQ, dev CQ, dev LQ]."""
    covered = ["cpu", "memory", platform.node_pools.gpu_resource]
    docs = []
    for name, local, full, within in _queues(team):
        docs += render("kueue/clusterqueue.yaml.j2", name=name, local_queue=local, cohort=platform.cohort,
                       namespace=team.namespace, labels=labels, annotations={}, covered=covered,
                       flavors=_flavor_entries(platform, full, covered), within=within, reclaim="Any")
    return docs


def priority_class(online: bool, dev: bool = False) -> str:
    """The WorkloadPriorityClass of a workload: online steps, scheduled steps, development instances."""
    return DEV if dev else ONLINE if online else SCHEDULED


def queue_labels(dev: bool, priority: str) -> tuple[tuple[str, str], ...]:
    """The labels that put a workload in its team's queue: LocalQueue ``skiff`` (training) or ``skiff-dev``
    (development instances) and its WorkloadPriorityClass."""
    return ((QUEUE_NAME_LABEL, DEV_LOCAL_QUEUE if dev else LOCAL_QUEUE), (PRIORITY_CLASS_LABEL, priority))


def queue_cells(cluster_queues: list[dict]) -> dict[tuple[str, str, str], dict[str, float]]:
    """Per (ClusterQueue, flavor, resource): ``nominal``, ``used``, ``borrowed`` (used over nominal, from the
    cohort) and ``lent`` (idle nominal quota other queues of the cohort are using). Kueue does not say whose
    quota a borrower uses: per flavor, the cohort's borrowing is spread over the other queues' idle quota in
    proportion. Input: ClusterQueue objects with Kueue's ``status.flavorsUsage`` (``total``, ``borrowed``)."""
    from operators.core.quantity import parse_quantity

    def amount(v) -> float:
        return float(parse_quantity(str(v)))
    cells: dict[tuple[str, str, str], dict[str, float]] = {}      # (queue, flavor, resource) -> figures
    cohort_of: dict[str, str] = {}
    for cq in cluster_queues:
        name = cq["metadata"]["name"]
        cohort_of[name] = (cq.get("spec") or {}).get("cohortName") or f"/{name}"
        for flavor in ((cq.get("spec") or {}).get("resourceGroups") or [{}])[0].get("flavors") or []:
            for r in flavor.get("resources") or []:
                cells[(name, flavor["name"], r["name"])] = {"nominal": amount(r.get("nominalQuota", 0)),
                                                           "used": 0.0, "borrowed": 0.0, "lent": 0.0}
        for flavor in (cq.get("status") or {}).get("flavorsUsage") or []:
            for r in flavor.get("resources") or []:
                cell = cells.setdefault((name, flavor["name"], r["name"]),
                                        {"nominal": 0.0, "used": 0.0, "borrowed": 0.0, "lent": 0.0})
                cell["used"], cell["borrowed"] = amount(r.get("total", 0)), amount(r.get("borrowed", 0))
    for (name, flavor, res), cell in cells.items():
        peers = [c for (n, f, r), c in cells.items() if f == flavor and r == res and cohort_of[n] == cohort_of[name]
                 and n != name]
        free = max(0.0, cell["nominal"] - cell["used"])
        others_borrowed = sum(c["borrowed"] for c in peers)
        idle = free + sum(max(0.0, c["nominal"] - c["used"]) for c in peers)
        cell["lent"] = min(free, others_borrowed * free / idle) if free and others_borrowed else 0.0
    return cells


def queue_shares(cluster_queues: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """``queue_cells`` summed over flavors: per ClusterQueue (a team's ``<team>``, its instances'
    ``<team>-dev``) and resource, ``nominal``, ``used``, ``borrowed`` and ``lent``."""
    rows: dict[str, dict[str, dict[str, float]]] = {}
    for (name, _flavor, res), cell in queue_cells(cluster_queues).items():
        out = rows.setdefault(name, {}).setdefault(res, {"nominal": 0.0, "used": 0.0, "borrowed": 0.0, "lent": 0.0})
        for k, v in cell.items():
            out[k] += v
    return rows


def team_of(cluster_queue: dict) -> str | None:
    """The namespace a Skiff ClusterQueue serves (its ``namespaceSelector``), None for another's queue."""
    return (((cluster_queue.get("spec") or {}).get("namespaceSelector") or {}).get("matchLabels") or {}).get(
        "kubernetes.io/metadata.name")


# ---- the platform file's kueue blocks (the loader reads them through these) ----------------------------------
def _amounts(d: dict) -> tuple[tuple[str, str], ...]:
    return tuple((r, quantity_text(d[r])) for r in ("cpu", "memory", "gpu") if r in d)


def flavor_quotas(spec: dict | None, defaults: dict[str, dict]) -> tuple[FlavorQuota, ...]:
    """The ``kueue.flavors``/``kueue.dev`` mapping as ``FlavorQuota``s (``defaults`` when not given)."""
    return tuple(FlavorQuota(flavor, _amounts(q), _amounts(q.get("borrowing_limit") or {}),
                             _amounts(q.get("lending_limit") or {}))
                 for flavor, q in (defaults if spec is None else spec).items())


def default_flavors(quota: Quota, allow_online: bool) -> dict[str, dict]:
    """Without ``kueue.flavors``: the quota's cpu/memory in each pool the team may use, its GPUs in the gpu pool."""
    both = {"cpu": quota.cpu, "memory": quota.memory}
    out = {"default": both}
    if parse_quantity(quota.gpu) > 0:
        out["gpu"] = {**both, "gpu": quota.gpu}
    if allow_online:
        out["online"] = both
    return out


def check_blocks(data: dict, errors) -> None:
    """The platform file's ``kueue`` blocks (``errors.add(path, message)``: the loader's), with the rules Kueue's admission applies to the ClusterQueues they become, so a
    value Kueue would refuse is refused here, naming file and line, instead of failing ``platform_sync`` with a
    422 that names neither (issue 30, class 4):

    * ``lending_limit`` at most the flavor's nominal quota: Kueue's ClusterQueue webhook,
      ``pkg/webhooks/clusterqueue_webhook.go`` ``validateLendingLimit`` ("must be less than or equal to the
      nominalQuota");
    * at least one flavor in ``kueue.flavors``: the ClusterQueue CRD's ``resourceGroups[].flavors``
      ``minItems: 1`` (``config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml``);
    * no negative quantity (``validateResourceQuantity``) and a DNS-label cohort (``validateNameReference``):
      the schema's ``quantity`` and ``dns_label`` formats already hold them.
    """
    kueue_mode = data.get("queueing") == "kueue"
    for i, t in enumerate(data.get("teams") or []):
        block = t.get("kueue")
        if block is not None and not kueue_mode:
            errors.add(("teams", i, "kueue"), "only with queueing: kueue")
        if (block or {}).get("flavors") == {}:
            errors.add(("teams", i, "kueue", "flavors"), "{} names no flavor: a ClusterQueue needs at least one "
                       "(Kueue's CRD: resourceGroups[].flavors minItems 1); leave it out for the default split")
        for part in ("flavors", "dev"):
            if "online" in ((block or {}).get(part) or {}) and not t.get("allow_online", False):
                errors.add(("teams", i, "kueue", part, "online"), "the online pool needs allow_online: true")
            for flavor, quota in ((block or {}).get(part) or {}).items():
                for resource, lend in (quota.get("lending_limit") or {}).items():
                    nominal = quota.get(resource, 0)
                    if parse_quantity(lend) > parse_quantity(nominal):
                        errors.add(("teams", i, "kueue", part, flavor, "lending_limit", resource),
                                   f"{short_repr(lend)} must be less than or equal to the nominalQuota "
                                   f"({short_repr(nominal)}): Kueue's ClusterQueue webhook refuses more")
