"""Skiff's endpoint with ``queueing: kueue``: ClusterQueue and Workload gauges, and the team gauges the quota
panels, the ``$team`` variable and SkiffTeamGpuAtQuota read, first from plain objects, then from kubesim with
Kueue (Skiff's own ClusterQueues, Jobs admitted and queued by kubesim's Kueue) through a real Prometheus
loaded with the shipped rules and the dashboard's queries. No Airflow stack: the endpoint's read
(``read_cluster``) is served as Prometheus text by a small HTTP server in this test (the api-server route
around it is test_metrics_e2e.py's)."""

from __future__ import annotations

import json

import httpx
import pytest
from kubernetes import client

from kubesim.testing import wait_until
from operators.exporter import cluster
from operators.k8s import Kube
from tests.support.metrics.prometheus_support import MONITORING, SkiffEndpoint, running_prometheus
from tests.support.training.kueue_support import kueue_teams  # noqa: F401 - the fixture

GPU = "nvidia.com/gpu"


def _values(samples) -> dict:
    return {(s.metric.prom, s.labels): s.value for s in samples}


def _cq(name, team, nominal_gpu, used_gpu, borrowed_gpu=0, cohort="skiff"):
    return {"metadata": {"name": name},
            "spec": {"cohortName": cohort, "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}},
                     "resourceGroups": [{"flavors": [{"name": "gpu", "resources": [
                         {"name": GPU, "nominalQuota": str(nominal_gpu)}, {"name": "cpu", "nominalQuota": "8"}]}]}]},
            "status": {"flavorsUsage": [{"name": "gpu", "resources": [
                {"name": GPU, "total": str(used_gpu), "borrowed": str(borrowed_gpu)},
                {"name": "cpu", "total": "1500m", "borrowed": "0"}]}]}}


def test_cluster_queue_cells_and_team_gauges_from_the_queues():
    """recsys borrows 2 of nlp's idle GPUs: usage 6 over nominal 4; nlp lends 2 (its idle 4, the only lender)."""
    samples = cluster.kueue_samples([_cq("recsys", "recsys", 4, 6, 2), _cq("nlp", "nlp", 4, 0)], [])
    v = _values(samples)
    cell = (("team", "recsys"), ("cluster_queue", "recsys"), ("flavor", "gpu"), ("resource", GPU))
    assert [v[(m, cell)] for m in ("skiff_kueue_nominal_quota", "skiff_kueue_usage", "skiff_kueue_borrowed",
                                   "skiff_kueue_lent")] == [4, 6, 2, 0]
    nlp = (("team", "nlp"), ("cluster_queue", "nlp"), ("flavor", "gpu"), ("resource", GPU))
    assert v[("skiff_kueue_lent", nlp)] == 2 and v[("skiff_kueue_usage", nlp)] == 0
    assert v[("skiff_team_gpu_quota", (("team", "recsys"),))] == 4
    assert v[("skiff_team_gpu_requests", (("team", "recsys"),))] == 6
    assert v[("skiff_team_cpu_requests_cores", (("team", "recsys"),))] == 1.5


def test_workloads_by_local_queue_priority_and_state_finished_left_out():
    def wl(ns, queue, prio, admitted=False, finished=False):
        status = {"admission": {"clusterQueue": ns}} if admitted else {}
        if finished:
            status["conditions"] = [{"type": "Finished", "status": "True"}]
        return {"metadata": {"namespace": ns}, "spec": {"queueName": queue, "priorityClassRef": {"name": prio}},
                "status": status}
    wls = [wl("recsys", "skiff", "skiff-online", admitted=True), wl("recsys", "skiff", "skiff-scheduled"),
           wl("recsys", "skiff", "skiff-scheduled"), wl("recsys", "skiff", "skiff-online", True, finished=True),
           wl("nlp", "skiff-dev", "skiff-dev", admitted=True)]
    v = _values(cluster.kueue_samples([], wls))
    key = lambda t, q, p, s: ("skiff_kueue_workloads", (("team", t), ("local_queue", q), ("priority_class", p),  # noqa: E731
                                                        ("state", s)))
    assert v == {key("recsys", "skiff", "skiff-online", "admitted"): 1,
                 key("recsys", "skiff", "skiff-scheduled", "pending"): 2,
                 key("nlp", "skiff-dev", "skiff-dev", "admitted"): 1}


def test_in_kueue_mode_a_team_quota_gauge_comes_from_its_clusterqueues_not_the_ceiling_resourcequota():
    """In Kueue mode the ResourceQuota's pod limits are the team's ceiling (issue 30 class 2: nominal + what it may
    borrow), so the quota gauges come from the ClusterQueues' nominal quota, once; a team without queues (not
    migrated) keeps its ResourceQuota's figures."""
    ceiling = {"metadata": {"namespace": "recsys"},
               "status": {"hard": {"requests.nvidia.com/gpu": "12"}, "used": {"requests.nvidia.com/gpu": "1"}}}
    storage_only = {"metadata": {"namespace": "nlp"}, "status": {"hard": {"requests.storage": "20Gi"}, "used": {}}}
    unmigrated = {"metadata": {"namespace": "cv"},
                  "status": {"hard": {"requests.nvidia.com/gpu": "2"}, "used": {"requests.nvidia.com/gpu": "0"}}}
    kueue = cluster.kueue_samples([_cq("recsys", "recsys", 8, 3), _cq("nlp", "nlp", 4, 4)], [])
    samples = cluster.gauges([ceiling, storage_only, unmigrated], [], [], {}, GPU, kueue)
    gpu_quota = [(s.labels, s.value) for s in samples if s.metric.prom == "skiff_team_gpu_quota"]
    assert sorted(gpu_quota) == [((("team", "cv"),), 2.0), ((("team", "nlp"),), 4.0), ((("team", "recsys"),), 8.0)]
    jobs = {s.labels for s in samples if s.metric.prom == "skiff_training_jobs"}
    assert (("team", "nlp"), ("state", "queued")) in jobs       # the team's zero lines exist


# ---- kubesim with Kueue, a real Prometheus --------------------------------------------------------------
@pytest.fixture
def prometheus(kueue_teams, tmp_path):  # noqa: F811 - the imported fixture
    endpoint = SkiffEndpoint(Kube(kueue_teams))
    job = {"job_name": "skiff", "scrape_interval": "2s", "scrape_timeout": "2s", "metrics_path": "/metrics",
           "static_configs": [{"targets": [endpoint.url]}]}
    try:
        with running_prometheus(tmp_path, job, "1s") as prom:
            yield prom
    finally:
        endpoint.server.shutdown()


def _gpu_job(name: str, gpus: int) -> dict:
    res = {"cpu": "250m", "memory": "128Mi", GPU: str(gpus)}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "skiff",
                                                  "kueue.x-k8s.io/priority-class": "skiff-scheduled"}},
            "spec": {"template": {"metadata": {"annotations": {"kubesim.io/duration": "3600"}}, "spec": {
                "restartPolicy": "Never", "tolerations": [{"key": GPU, "operator": "Exists"}],
                "containers": [{"name": "c", "image": "x", "resources": {"requests": res, "limits": res}}]}}}}


def _dashboard_exprs() -> dict[str, list[str]]:
    board = json.loads((MONITORING / "dashboard.json").read_text())
    out = {p["title"]: [t["expr"] for t in p.get("targets", [])] for p in board["panels"]}
    team = next(v for v in board["templating"]["list"] if v["name"] == "team")
    out["$team"] = [team["definition"]]
    return out


def test_dashboard_team_variable_quota_panels_and_gpu_alert_have_data_in_kueue_mode(kueue_teams, prometheus):  # noqa: F811
    """recsys takes its 4 GPUs and borrows nlp's 4 (nlp idle), then a ninth GPU waits: the quota panels show
    recsys at 8 of nominal 4, the $team variable lists both teams, SkiffTeamGpuAtQuota is pending for recsys
    (value: its quota, 4) and not for nlp; the Kueue gauges say who borrows and who lends."""
    batch = client.BatchV1Api(kueue_teams)
    for i in range(4):
        batch.create_namespaced_job("recsys", _gpu_job(f"g{i}", 2))
    batch.create_namespaced_job("recsys", _gpu_job("waits", 1))
    exprs = _dashboard_exprs()
    # Grafana's label_values(metric, team) is the team label of the metric's series
    variable = exprs["$team"][0].removeprefix("label_values(").split(",")[0]

    def teams_listed() -> set[str]:
        return {s["metric"]["team"] for s in prometheus.query(variable)}

    wait_until(lambda: teams_listed() == {"recsys", "nlp"}, timeout=60, interval=0.5, what="$team from Kueue")

    def panel(title: str) -> dict[tuple[str, str], float]:
        return {(s["metric"]["__name__"], s["metric"]["team"]): float(s["value"][1])
                for e in exprs[title] for s in prometheus.query(e.replace("$team", ".*"))}

    want = {("skiff_team_gpu_requests", "recsys"): 8.0, ("skiff_team_gpu_quota", "recsys"): 4.0,
            ("skiff_team_gpu_requests", "nlp"): 0.0, ("skiff_team_gpu_quota", "nlp"): 4.0}
    wait_until(lambda: panel("GPUs requested vs quota") == want, timeout=60, interval=0.5, what="the GPU panel")
    cpu = panel("CPU cores requested vs quota")
    assert cpu[("skiff_team_cpu_requests_cores", "recsys")] == 1.0 and cpu[("skiff_team_cpu_quota_cores", "nlp")] > 0

    def alert() -> list[dict]:
        return prometheus.query('ALERTS{alertname="SkiffTeamGpuAtQuota"}')

    fired = wait_until(alert, timeout=60, interval=0.5, what="SkiffTeamGpuAtQuota evaluated")
    assert [(a["metric"]["team"], a["metric"]["alertstate"]) for a in fired] == [("recsys", "pending")]
    value = prometheus.query('ALERTS_FOR_STATE{alertname="SkiffTeamGpuAtQuota"}')  # exists while pending
    assert value and value[0]["metric"]["team"] == "recsys"
    rules = httpx.get(f"{prometheus.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
    assert [float(a["value"]) for a in rules if a["labels"]["alertname"] == "SkiffTeamGpuAtQuota"] == [4.0]

    lent = {(s["metric"]["cluster_queue"], s["metric"]["flavor"]): float(s["value"][1])
            for s in prometheus.query(f'skiff_kueue_lent{{resource="{GPU}"}} > 0')}
    assert lent == {("nlp", "gpu"): 4.0}
    borrowed = prometheus.query(f'skiff_kueue_borrowed{{resource="{GPU}", cluster_queue="recsys", flavor="gpu"}}')
    assert [float(s["value"][1]) for s in borrowed] == [4.0]
    queued = prometheus.query('skiff_kueue_workloads{team="recsys", local_queue="skiff", state="pending"}')
    assert [(s["metric"]["priority_class"], float(s["value"][1])) for s in queued] == [("skiff-scheduled", 1.0)]
