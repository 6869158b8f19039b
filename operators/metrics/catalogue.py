"""Every metric Skiff exports, named once: StatsD/OTel name, Prometheus name, type, labels, meaning.

Two kinds of metric, two ways out:

* **Events** (counters and timings) happen in many processes (workers, the triggerer): they go through
  Airflow's own metrics facade (``operators.metrics.emit``), so they reach whatever Airflow's metrics reach:
  StatsD (with ``[metrics] statsd_influxdb_enabled`` the tags travel as ``name,team=x:1|c`` and the Airflow
  chart's statsd-exporter turns them into labels) or OpenTelemetry (tags become attributes). Sent as
  ``<[metrics] statsd_prefix>.skiff.<area>.<event>``; ``deploy/monitoring/helm-values.yaml`` maps them to
  the Prometheus names below (counters ``_total``, timings in ``_seconds``).
* **Cluster state** (gauges) is read from the cluster by Skiff's own endpoint (``operators.exporter.endpoint``).

Label rules (Prometheus' conventions): ``skiff_`` prefix, base units (seconds, cores, bytes), ``_total``
counters; labels are low-cardinality only: ``team`` (the team's namespace), ``reason`` (a closed set, below),
``kind`` (a Sedna CR kind), ``state``/``phase``/``result`` (closed sets). Never a run, task, pod or Job name,
with one exception: ``skiff_pod_info`` and its sibling ``skiff_pod_requests``: ``skiff_pod_info`` (kube-state-metrics' ``kube_pod_labels`` pattern), one series of value 1
per live pod Skiff made, which carries its pod's names so that the kubelet's and dcgm-exporter's usage series
(which have ``namespace`` and ``pod``) are grouped by team, user, DAG and step in PromQL with
``* on (namespace, pod) group_left (team, user, dag, task) skiff_pod_info``. Its series count is the number of
running and pending pods, as for kube-state-metrics; a finished pod's series ends with it.
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTER, TIMING, GAUGE = "counter", "timing", "gauge"


@dataclass(frozen=True)
class Metric:
    stat: str  # the name given to Airflow's facade (gauges: "" - they are never sent through it)
    prom: str  # the Prometheus name
    type: str
    labels: tuple[str, ...]
    help: str


def _event(stat: str, type_: str, labels: tuple[str, ...], help_: str) -> Metric:
    base = "skiff_" + stat.replace(".", "_")
    return Metric(f"skiff.{stat}", base + ("_total" if type_ == COUNTER else "_seconds"), type_, labels, help_)


# ---------------------------------------------------------------- events (Airflow's facade)
TRAINING_STARTED = _event("training.started", COUNTER, ("team",), "training Jobs created (one per try that creates)")
TRAINING_SUCCEEDED = _event("training.succeeded", COUNTER, ("team",), "training steps whose Job completed")
TRAINING_FAILED = _event("training.failed", COUNTER, ("team", "reason"), "training steps that failed, by reason")
TRAINING_REATTACHED = _event("training.reattached", COUNTER, ("team",),
                             "retries that reattached to an earlier try's Job instead of creating one")
TRAINING_QUEUE_WAIT = _event("training.queue_wait", TIMING, ("team",),
                             "Job created -> its first container running (quota, Kueue, scheduling, image pull)")
TRAINING_COMPLETE_TO_SUCCESS = _event("training.complete_to_success", TIMING, ("team",),
                                      "Job Complete -> the task reports success (Skiff's own overhead)")
SEDNA_CREATED = _event("sedna.children_created", COUNTER, ("team", "kind"), "children of a new Sedna CR created")
SEDNA_HEALED = _event("sedna.children_healed", COUNTER, ("team", "kind"),
                      "children recreated, drift reverted or owner repaired by the reconcile")
SEDNA_ROLLED_OUT = _event("sedna.children_rolled_out", COUNTER, ("team", "kind"),
                          "children replaced or updated after a spec change")
SEDNA_FAILED = _event("sedna.failures", COUNTER, ("kind",), "CRs whose reconcile failed in a pass (errors)")
SEDNA_PASSES = _event("sedna.reconcile_passes", COUNTER, ("kind", "result"),
                      "reconcile passes, result ok | failed (any CR's error)")
SEDNA_PASS_DURATION = _event("sedna.reconcile_pass", TIMING, ("kind",), "duration of one reconcile pass")
INSTANCE_ACTIONS = {a: _event(f"instances.{a}", COUNTER, ("team",), f"development instances {a}")
                    for a in ("created", "started", "stopped", "deleted")}
INSTANCES_CULLED = _event("instances.culled", COUNTER, ("team",), "idle development instances stopped by the culler")
SYNC_WRITES = _event("platform_sync.writes", COUNTER, (), "objects platform_sync applied (server-side apply)")
SYNC_REFUSALS = _event("platform_sync.refusals", COUNTER, (), "objects the API server refused to platform_sync")
SYNC_RUNS = _event("platform_sync.runs", COUNTER, ("result",), "platform_sync runs, result ok | failed")

# A failed training step's reason label: the first matching rule (``operators.training.metrics.failure_class``); closed set.
FAILURE_REASONS = ("OOMKilled", "Unschedulable", "QuotaWaitTimeout", "ExitCode", "Preempted", "Evicted",
                   "DeadlineExceeded", "ImagePull", "ContainerConfig", "NoPod", "JobDeleted", "Other")

# ---------------------------------------------------------------- gauges (Skiff's endpoint)
def _gauge(prom: str, labels: tuple[str, ...], help_: str) -> Metric:
    return Metric("", prom, GAUGE, labels, help_)


TEAM_GPU_REQUESTS = _gauge("skiff_team_gpu_requests", ("team",), "GPUs requested by the team's pods "
                           "(its ResourceQuota's status.used; with Kueue: its ClusterQueues' usage)")
TEAM_GPU_QUOTA = _gauge("skiff_team_gpu_quota", ("team",), "GPUs the team may request (status.hard; with "
                        "Kueue: its ClusterQueues' nominal quota)")
TEAM_CPU_REQUESTS = _gauge("skiff_team_cpu_requests_cores", ("team",), "CPU cores requested (status.used)")
TEAM_CPU_QUOTA = _gauge("skiff_team_cpu_quota_cores", ("team",), "CPU cores the team may request (status.hard)")
TEAM_MEMORY_REQUESTS = _gauge("skiff_team_memory_requests_bytes", ("team",), "memory requested (status.used)")
TEAM_MEMORY_QUOTA = _gauge("skiff_team_memory_quota_bytes", ("team",), "memory the team may request")
TRAINING_JOBS = _gauge("skiff_training_jobs", ("team", "state"),
                       "unfinished training Jobs: running (a pod ready) | queued (suspended, pending, refused)")
INSTANCES = _gauge("skiff_instances", ("team", "state"),
                   "development instances: running (ready) | starting | stopped")
SEDNA_CRS = _gauge("skiff_sedna_crs", ("team", "kind", "phase"), "Sedna CRs by phase")
# queueing: kueue - Skiff's ClusterQueues (status.flavorsUsage) and Workloads, per flavor and resource
_CQ = ("team", "cluster_queue", "flavor", "resource")
KUEUE_NOMINAL = _gauge("skiff_kueue_nominal_quota", _CQ, "a ClusterQueue's nominal quota (spec), base units")
KUEUE_USAGE = _gauge("skiff_kueue_usage", _CQ, "quota its admitted Workloads use (status.flavorsUsage total)")
KUEUE_BORROWED = _gauge("skiff_kueue_borrowed", _CQ, "usage over its nominal quota, from the cohort (borrowed)")
KUEUE_LENT = _gauge("skiff_kueue_lent", _CQ, "its idle nominal quota other queues of the cohort use (their "
                    "borrowing spread over the lenders' idle quota in proportion)")
KUEUE_WORKLOADS = _gauge("skiff_kueue_workloads", ("team", "local_queue", "priority_class", "state"),
                         "unfinished Workloads: pending (no quota reserved) | admitted")
POD_INFO = _gauge("skiff_pod_info", ("namespace", "pod", "team", "user", "dag", "task", "run", "try", "kind"),
                  "1 per live pod Skiff made (pending or running): its team (namespace), user (the owner of its "
                  "home volume; an instance's owner), DAG, task, run and try (training steps) and kind (training "
                  "| instance | sedna); join usage series on (namespace, pod)")
POD_REQUESTS = _gauge("skiff_pod_requests", ("namespace", "pod", "resource"),
                      "what a live pod of Skiff's holds: its containers' requests summed, resource cpu (cores) | "
                      "memory (bytes) | gpu (the platform's GPU resource, devices); beside skiff_pod_info, as "
                      "kube-state-metrics' kube_pod_container_resource_requests")
POD_KINDS = ("training", "instance", "sedna")
EXPORTER_LAST_REFRESH = _gauge("skiff_exporter_last_refresh_timestamp_seconds", (),
                               "when the endpoint's cache was last read from the cluster (unix time)")
EXPORTER_REFRESH_SECONDS = _gauge("skiff_exporter_refresh_duration_seconds", (),
                                  "how long the last cluster read took")
EXPORTER_REFRESH_ERRORS = Metric("", "skiff_exporter_refresh_errors_total", COUNTER, (),
                                 "cluster reads that failed (the endpoint then serves the last good state)")
EXPORTER_REQUESTS = Metric("", "skiff_exporter_cluster_requests_total", COUNTER, (),
                           "requests the endpoint sent to the Kubernetes API")

TRAINING_STATES = ("running", "queued")
WORKLOAD_STATES = ("pending", "admitted")
INSTANCE_STATES = ("running", "starting", "stopped")


def all_metrics() -> list[Metric]:
    return [v for v in globals().values() if isinstance(v, Metric)] + list(INSTANCE_ACTIONS.values())
