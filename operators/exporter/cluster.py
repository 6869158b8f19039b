"""Cluster-state gauges per team, computed from plain object lists (pure: no I/O, tested on dicts).

Input: what ``endpoint`` lists cluster-wide, one request per kind: the teams' ResourceQuotas
(``skiff-quota``), Skiff's training Jobs, development-instance StatefulSets and the Sedna CRs. Output: the
samples of ``catalogue``'s gauges. A team's label is its namespace (the name the cluster knows).

* GPU/CPU/memory requested and allowed: the quota's ``status.used`` and ``status.hard`` (what the quota
  controller counts, so the numbers are Kubernetes' own, the same ``kubectl describe quota`` shows);
* training Jobs not finished: ``running`` when a pod is ready (``status.ready``), else ``queued``
  (suspended by Kueue, pods pending, refused by the quota);
* instances: ``stopped`` (scaled to 0), ``running`` (a ready replica), else ``starting``. Idle ones are
  not a state here: telling idle from busy costs one request per instance (the culler's read), so the
  culler's stops are counted instead (``skiff_instances_culled_total``);
* Sedna CRs by ``status.phase`` (FederatedLearningJob), else by their Failed/Running conditions;
* with ``queueing: kueue``: Skiff's ClusterQueues per flavor and resource (nominal, usage, borrowed, lent:
  ``operators.platform.kueue.queue_cells``) and the unfinished Workloads per LocalQueue, priority class and
  state; the team gauges then come from the team's ClusterQueues, since its ResourceQuota holds storage only;
* ``skiff_pod_info``: one series per pending or running pod Skiff made (``pod_info_samples``), the names that
  usage series are joined on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from operators.core.nodepools import GPU_RESOURCE
from operators.core.quantity import parse_quantity
from operators.devinstances.naming import KIND as INSTANCE_KIND
from operators.devinstances.naming import LABEL_KIND, LABEL_OWNER
from operators.metrics import catalogue as c
from operators.sedna.desired import FL_LABEL_PREFIX, JI_LABEL_PREFIX
from operators.training.failure import job_state
from operators.training.naming import APP_NAME as TRAINING_APP


@dataclass(frozen=True)
class Sample:
    metric: c.Metric
    labels: tuple[tuple[str, str], ...]
    value: float


def _ns(obj: Mapping) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def _amount(values: Mapping, *keys: str) -> float | None:
    for key in keys:
        if key in values:
            try:
                return float(parse_quantity(values[key]))
            except (ValueError, ArithmeticError):
                return None
    return None


def quota_samples(quotas: Iterable[Mapping], gpu_resource: str = GPU_RESOURCE) -> list[Sample]:
    out = []
    pairs = ((c.TEAM_GPU_REQUESTS, c.TEAM_GPU_QUOTA, (f"requests.{gpu_resource}",)),
             (c.TEAM_CPU_REQUESTS, c.TEAM_CPU_QUOTA, ("requests.cpu", "cpu")),
             (c.TEAM_MEMORY_REQUESTS, c.TEAM_MEMORY_QUOTA, ("requests.memory", "memory")))
    for q in quotas:
        status, team = q.get("status") or {}, (("team", _ns(q)),)
        for used_metric, hard_metric, keys in pairs:
            hard = _amount(status.get("hard") or {}, *keys)
            if hard is None:  # the quota does not limit it: no quota, no "at quota"
                continue
            out.append(Sample(hard_metric, team, hard))
            out.append(Sample(used_metric, team, _amount(status.get("used") or {}, *keys) or 0.0))
    return out


def _count(metric: c.Metric, states: tuple[str, ...], teams: Iterable[str], found: Mapping) -> list[Sample]:
    return [Sample(metric, (("team", t), ("state", s)), found.get((t, s), 0)) for t in sorted(teams) for s in states]


def training_samples(jobs: Iterable[Mapping], teams: set[str]) -> list[Sample]:
    found: dict[tuple[str, str], int] = {}
    for job in jobs:
        if job_state(dict(job)) != "active":
            continue
        state = "running" if ((job.get("status") or {}).get("ready") or 0) > 0 else "queued"
        found[(_ns(job), state)] = found.get((_ns(job), state), 0) + 1
    return _count(c.TRAINING_JOBS, c.TRAINING_STATES, teams | {t for t, _ in found}, found)


def instance_samples(statefulsets: Iterable[Mapping], teams: set[str]) -> list[Sample]:
    found: dict[tuple[str, str], int] = {}
    for sts in statefulsets:
        if not ((sts.get("spec") or {}).get("replicas") or 0):
            state = "stopped"
        else:
            state = "running" if ((sts.get("status") or {}).get("readyReplicas") or 0) > 0 else "starting"
        found[(_ns(sts), state)] = found.get((_ns(sts), state), 0) + 1
    return _count(c.INSTANCES, c.INSTANCE_STATES, teams | {t for t, _ in found}, found)


def sedna_phase(cr: Mapping) -> str:
    status = cr.get("status") or {}
    if status.get("phase"):
        return str(status["phase"])
    true = {x.get("type") for x in status.get("conditions") or [] if str(x.get("status")) == "True"}
    return "Failed" if "Failed" in true else "Running" if "Running" in true else "Pending"


def sedna_samples(crs_by_kind: Mapping[str, Iterable[Mapping]]) -> list[Sample]:
    found: dict[tuple[str, str, str], int] = {}
    for kind, crs in crs_by_kind.items():
        for cr in crs:
            key = (_ns(cr), kind, sedna_phase(cr))
            found[key] = found.get(key, 0) + 1
    return [Sample(c.SEDNA_CRS, (("team", t), ("kind", k), ("phase", p)), n) for (t, k, p), n in sorted(found.items())]


def pod_kind(labels: Mapping[str, str]) -> str | None:
    """training | instance | sedna from the labels Skiff's templates set; None: not a pod of Skiff's."""
    if labels.get("app.kubernetes.io/name") == TRAINING_APP:
        return "training"
    if labels.get(LABEL_KIND) == INSTANCE_KIND:
        return "instance"
    if any(k.startswith((FL_LABEL_PREFIX, JI_LABEL_PREFIX)) for k in labels):
        return "sedna"
    return None


def pod_user(pod: Mapping, owners: Mapping[str, str]) -> str:
    """The owner of the home volume it mounts (``owners``: claim name -> user, the platform's home PVCs): a
    step's user and an instance's; else an instance's owner label (its slug); else "" (a Sedna worker)."""
    for volume in ((pod.get("spec") or {}).get("volumes") or []):
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim in owners:
            return owners[claim]
    return ((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_OWNER, "")


def pod_requests(pod: Mapping, gpu_resource: str) -> dict[str, float]:
    """cpu (cores), memory (bytes), gpu: the pod's containers' requests summed (init containers left out: they
    have finished before the containers run, so they hold nothing while usage is measured)."""
    total = {"cpu": 0.0, "memory": 0.0, "gpu": 0.0}
    for container in ((pod.get("spec") or {}).get("containers") or []):
        requests = (container.get("resources") or {}).get("requests") or {}
        for name, key in (("cpu", "cpu"), ("memory", "memory"), ("gpu", gpu_resource)):
            total[name] += _amount(requests, key) or 0.0
    return total


def pod_info_samples(pods: Iterable[Mapping], owners: Mapping[str, str],
                     gpu_resource: str = GPU_RESOURCE) -> list[Sample]:
    """``skiff_pod_info`` (value 1) for every pending or running pod of Skiff's: kube-state-metrics'
    ``kube_pod_labels`` pattern, Skiff's names as labels (a step's raw ids from its pod's annotations, as
    ``operators.training.naming.job_annotations`` writes them, not the sanitised label values); and its
    ``skiff_pod_requests`` per resource."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        kind = pod_kind(meta.get("labels") or {})
        if kind is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        ann = (meta.get("annotations") or {}) if kind == "training" else {}
        labels = (("namespace", _ns(pod)), ("pod", meta.get("name") or ""), ("team", _ns(pod)),
                  ("user", pod_user(pod, owners)), ("dag", ann.get("skiff.io/dag-id", "")),
                  ("task", ann.get("skiff.io/task-id", "")), ("run", ann.get("skiff.io/run-id", "")),
                  ("try", ann.get("skiff.io/try-number", "")), ("kind", kind))
        out.append(Sample(c.POD_INFO, labels, 1.0))
        out += [Sample(c.POD_REQUESTS, labels[:2] + (("resource", r),), v)
                for r, v in pod_requests(pod, gpu_resource).items()]
    return sorted(out, key=lambda s: (s.metric.prom, s.labels))


_CELL_GAUGES = (("nominal", c.KUEUE_NOMINAL), ("used", c.KUEUE_USAGE), ("borrowed", c.KUEUE_BORROWED),
                ("lent", c.KUEUE_LENT))


def kueue_samples(cluster_queues: Iterable[Mapping], workloads: Iterable[Mapping],
                  gpu_resource: str = GPU_RESOURCE) -> list[Sample]:
    """Skiff's ClusterQueues per flavor and resource (nominal, usage, borrowed, lent) and the unfinished
    Workloads per LocalQueue and priority class; also each team's quota gauges from its ClusterQueues (summed
    over flavors and its two queues), which ``gauges`` uses where the ResourceQuota no longer limits pods."""
    from operators.platform.kueue import queue_cells, team_of

    cqs = [dict(q) for q in cluster_queues]
    teams = {q["metadata"]["name"]: team_of(q) for q in cqs}
    out, per_team = [], {}
    for (name, flavor, res), cell in sorted(queue_cells(cqs).items()):
        team = teams.get(name)
        if team is None:
            continue
        labels = (("team", team), ("cluster_queue", name), ("flavor", flavor), ("resource", res))
        out += [Sample(metric, labels, cell[k]) for k, metric in _CELL_GAUGES]
        tot = per_team.setdefault((team, res), [0.0, 0.0])
        tot[0], tot[1] = tot[0] + cell["nominal"], tot[1] + cell["used"]
    for (team, res), (nominal, used) in sorted(per_team.items()):
        pair = {gpu_resource: (c.TEAM_GPU_QUOTA, c.TEAM_GPU_REQUESTS), "cpu": (c.TEAM_CPU_QUOTA, c.TEAM_CPU_REQUESTS),
                "memory": (c.TEAM_MEMORY_QUOTA, c.TEAM_MEMORY_REQUESTS)}.get(res)
        if pair:
            out += [Sample(pair[0], (("team", team),), nominal), Sample(pair[1], (("team", team),), used)]
    found: dict[tuple[str, str, str, str], int] = {}
    for wl in workloads:
        status, spec = wl.get("status") or {}, wl.get("spec") or {}
        if any(x.get("type") == "Finished" and x.get("status") == "True" for x in status.get("conditions") or []):
            continue
        key = (_ns(wl), spec.get("queueName") or "", (spec.get("priorityClassRef") or {}).get("name") or "",
               "admitted" if status.get("admission") else "pending")
        found[key] = found.get(key, 0) + 1
    out += [Sample(c.KUEUE_WORKLOADS, (("team", t), ("local_queue", q), ("priority_class", p), ("state", s)), n)
            for (t, q, p, s), n in sorted(found.items())]
    return out


def gauges(quotas: list[Mapping], jobs: list[Mapping], statefulsets: list[Mapping],
           crs_by_kind: Mapping[str, list[Mapping]], gpu_resource: str = GPU_RESOURCE,
           kueue: list[Sample] = (), pods: list[Mapping] = (), owners: Mapping[str, str] | None = None
           ) -> list[Sample]:
    """Every cluster-state sample; every team with a quota gets its training and instance counts (zeros
    included), so a dashboard shows "0 queued" rather than no line. ``kueue``: ``kueue_samples`` (with
    ``queueing: kueue``); a team gauge the ResourceQuota (storage only, then) does not give comes from there,
    so the quota panels, the ``$team`` variable and SkiffTeamGpuAtQuota work in both modes. In Kueue mode the
    ResourceQuota's pod limits are the team's ceiling (nominal + what it may borrow, a hard cap against pods that
    bypass Kueue), not its quota: a team gauge the ClusterQueues give wins over the ResourceQuota's. ``pods``:
    Skiff's pods (``skiff_pod_info``), ``owners`` the home claims' users."""
    teams = {_ns(q) for q in quotas}
    from_queues = list(kueue)
    queue_team = {(s.metric, s.labels) for s in from_queues if s.metric in _TEAM_GAUGES}
    from_quota = [s for s in quota_samples(quotas, gpu_resource) if (s.metric, s.labels) not in queue_team]
    teams |= {dict(s.labels)["team"] for s in from_queues if s.metric in _TEAM_GAUGES}
    return (from_quota + from_queues + training_samples(jobs, teams)
            + instance_samples(statefulsets, teams) + sedna_samples(crs_by_kind)
            + pod_info_samples(pods, owners or {}, gpu_resource))


_TEAM_GAUGES = frozenset({c.TEAM_GPU_QUOTA, c.TEAM_GPU_REQUESTS, c.TEAM_CPU_QUOTA, c.TEAM_CPU_REQUESTS,
                          c.TEAM_MEMORY_QUOTA, c.TEAM_MEMORY_REQUESTS})
