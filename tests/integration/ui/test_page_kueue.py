"""The page with queueing: kueue: each team's queues with nominal, used, borrowed and lent quota, and a queued
training task's reason in Kueue's words - the pure shaping, then the reads on kubesim with Kueue."""
from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from kubesim.testing import wait_until
from operators.k8s import Kube
from operators.ui import sources, views

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
TI = {"dag_id": "d", "task_id": "t", "run_id": "r", "state": "deferred", "try_number": 1, "map_index": -1,
      "start_date": NOW}


def test_a_suspended_job_waits_for_kueue_with_kueues_words():
    job = {"metadata": {"name": "j", "namespace": "nlp"}, "spec": {"suspend": True}}
    row = views.training_row(TI, job, None, now=NOW, queue_reason="couldn't assign flavors to pod set main")
    assert row["waiting_for"] == "kueue" and row["queue_reason"] == "couldn't assign flavors to pod set main"
    running = views.training_row(TI, {**job, "spec": {}}, None, now=NOW, queue_reason="stale")
    assert running["waiting_for"] == "quota" and running["queue_reason"] is None


def test_queue_figures_are_per_flavor_in_the_pages_units_and_skip_resources_without_quota():
    """Per flavor, as the platform file gives the nominal quota (``kueue.flavors.<flavor>``), never summed
    over flavors (issue 36: "nominal 24 cores" for 8 in each of three flavors); flavors in the order pods try them."""
    gib = 2.0 ** 30
    figures = views.queue_figures({
        ("default", "cpu"): {"nominal": 8.0, "used": 11.0, "borrowed": 3.0, "lent": 0.0},
        ("default", "memory"): {"nominal": 32 * gib, "used": 4 * gib, "borrowed": 0.0, "lent": 0.0},
        ("gpu", "cpu"): {"nominal": 8.0, "used": 0.0, "borrowed": 0.0, "lent": 2.0},
        ("gpu", "nvidia.com/gpu"): {"nominal": 2.0, "used": 0.0, "borrowed": 0.0, "lent": 0.0},
        ("online", "nvidia.com/gpu"): {"nominal": 0.0, "used": 0.0, "borrowed": 0.0, "lent": 0.0}})
    assert figures == [
        {"flavor": "gpu", "resource": "cpu", "unit": "cores", "nominal": 8.0, "used": 0.0, "borrowed": 0.0, "lent": 2.0},
        {"flavor": "gpu", "resource": "gpu", "unit": "GPUs", "nominal": 2.0, "used": 0.0, "borrowed": 0.0, "lent": 0.0},
        {"flavor": "default", "resource": "cpu", "unit": "cores", "nominal": 8.0, "used": 11.0, "borrowed": 3.0,
         "lent": 0.0},
        {"flavor": "default", "resource": "memory", "unit": "GiB", "nominal": 32.0, "used": 4.0, "borrowed": 0.0,
         "lent": 0.0}]


def test_the_reads_show_borrowed_and_lent_quota_and_why_a_job_waits(kueue_teams):
    api = kueue_teams
    batch = client.BatchV1Api(api)

    def job(name: str, cpu: int) -> None:
        batch.create_namespaced_job("nlp", {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "skiff"}},
            "spec": {"template": {"metadata": {"annotations": {"kubesim.io/duration": "600"}}, "spec": {
                "restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "resources": {
                    "requests": {"cpu": str(cpu), "memory": "1Gi"}}}]}}}})

    job("big", 11)                        # nlp's 8 CPUs and 3 of recsys' idle ones
    wait_until(lambda: not batch.read_namespaced_job("big", "nlp").spec.suspend, timeout=30, what="big admitted")
    job("waits", 30)                      # more than the cohort has free
    def cell(q, team, flavor, resource, kind="training"):
        return next((f for f in q[team][kind] if (f["flavor"], f["resource"]) == (flavor, resource)), None)
    shown = wait_until(lambda: (q := sources.queues(Kube(api), ["nlp", "recsys"]))
                       and (cell(q, "nlp", "default", "cpu") or {}).get("borrowed") == 3.0 and q, timeout=30,
                       what="usage in status")
    # per flavor, as the platform file gives it: nlp has 8 CPUs in the default pool and 8 in the GPU pool
    nlp_cpu = cell(shown, "nlp", "default", "cpu")
    assert (nlp_cpu["nominal"], nlp_cpu["used"], nlp_cpu["borrowed"]) == (8.0, 11.0, 3.0)
    assert cell(shown, "nlp", "gpu", "cpu")["nominal"] == 8.0
    recsys_cpu = cell(shown, "recsys", "default", "cpu")
    assert recsys_cpu["lent"] > 0 and recsys_cpu["used"] == 0.0
    assert {f["resource"] for f in shown["nlp"]["dev"]} == {"cpu", "memory"}
    assert set(sources.queues(Kube(api), ["nlp"])) == {"nlp"}            # only the caller's teams
    reasons = wait_until(lambda: (r := sources.queue_reasons(Kube(api))).get(("nlp", "waits"))
                         and "couldn't assign flavors" in r[("nlp", "waits")] and r, timeout=30,
                         what="Kueue's pending message")
    assert "insufficient quota for cpu in flavor default" in reasons[("nlp", "waits")]
