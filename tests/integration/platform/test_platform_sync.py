"""platform_sync against kubesim over HTTP: what it creates, idempotence (kubesim's request counters), orphans,
the quota status window, server-side apply ownership, and pull secrets reaching the pods of Jobs."""

from __future__ import annotations

import json

import pytest
from kubernetes import client

from operators.k8s import Kube
from operators.platform import PlatformError
from operators.platform.sync import sync_cluster
from tests.support.platform.platform_support import PLATFORM, platform

APPLY = "application/apply-patch+yaml"
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def writes(kubesim) -> int:
    return sum(n for verb, n in kubesim.controls.stats()["by_verb"].items() if verb in WRITES)


def test_first_sync_creates_the_teams_and_a_second_writes_nothing(kubesim, k8s):
    report = sync_cluster(Kube(k8s), platform())
    assert report.errors == [] and report.orphaned == []
    core, rbac = client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    quota = core.read_namespaced_resource_quota("skiff-quota", "recsys")
    assert quota.spec.hard == {"limits.cpu": "8", "requests.cpu": "8", "limits.memory": "32Gi",
                               "requests.memory": "32Gi", "requests.nvidia.com/gpu": "2",
                               "requests.storage": "20Gi", "pods": "20", "count/jobs.batch": "4"}
    assert {p.metadata.name for p in core.list_namespaced_persistent_volume_claim("recsys").items} == {
        "alice-home", "bob-home", "datasets", "scratch"}
    assert core.read_namespaced_persistent_volume_claim("datasets", "recsys").spec.access_modes == ["ReadWriteMany"]
    assert [s.name for s in core.read_namespaced_service_account("default", "recsys").image_pull_secrets] == [
        "regcred", "recsys-registry"]
    assert [s.name for s in core.read_namespaced_service_account("default", "nlp").image_pull_secrets] == ["regcred"]
    admins = rbac.read_namespaced_role_binding("skiff-admins", "recsys")
    assert admins.role_ref.name == "skiff-member" and [s.name for s in admins.subjects] == ["alice"]
    members = rbac.read_namespaced_role_binding("skiff-members", "recsys")
    assert members.role_ref.name == "skiff-member" and [s.name for s in members.subjects] == ["bob"]
    limits = core.read_namespaced_limit_range("skiff-defaults", "nlp").spec.limits[0]
    assert limits.default == {"cpu": "1", "memory": "1Gi"}
    assert len(report.applied) == 2 * 6 + 4 + 1    # per team ns, quota, lr, sa, 2 rb; 4 + 1 PVCs

    kubesim.controls.reset_stats()
    again = sync_cluster(Kube(k8s), platform())
    assert again.applied == [] and again.errors == [] and again.unchanged == len(report.applied)
    assert writes(kubesim) == 0
    assert kubesim.controls.stats()["by_verb"] == {"list": 6}


def test_removed_user_and_team_are_orphaned_never_deleted(kubesim, k8s):
    sync_cluster(Kube(k8s), platform())
    text = PLATFORM.replace("      - {user: bob}\n", "")
    text = text[:text.index("  - name: nlp")] + text[text.index("volumes:"):]
    kubesim.controls.reset_stats()
    report = sync_cluster(Kube(k8s), platform(text))
    assert report.orphaned == ["Namespace/nlp", "PersistentVolumeClaim/nlp/carol-home",
                               "PersistentVolumeClaim/recsys/bob-home"]
    assert kubesim.controls.stats()["by_verb"].get("delete", 0) == 0
    core = client.CoreV1Api(k8s)
    core.read_namespace("nlp")
    core.read_namespaced_persistent_volume_claim("bob-home", "recsys")
    # bob lost his access (RoleBinding subjects) but kept his data
    members = client.RbacAuthorizationV1Api(k8s).read_namespaced_role_binding("skiff-members", "recsys")
    assert not members.subjects
    assert "RoleBinding/recsys/skiff-members" in report.applied


def test_sync_waits_for_the_quota_status_before_creating_pvcs(kubesim, k8s):
    """With the quota controller lagging, PVCs created right after the quota would be refused ('status
    unknown for quota'); the sync waits for the status and then creates them without an error."""
    kubesim.cluster.quota.status_lag = 0.4
    try:
        report = sync_cluster(Kube(k8s), platform())
    finally:
        kubesim.cluster.quota.status_lag = 0.0
    assert report.errors == []
    assert report.waited_for_quota == ["recsys", "nlp"]
    assert len(client.CoreV1Api(k8s).list_namespaced_persistent_volume_claim("recsys").items) == 4


def test_sync_reports_a_quota_that_never_gets_its_status(kubesim, k8s):
    kubesim.cluster.quota.status_lag = 30
    try:
        report = sync_cluster(Kube(k8s), platform(), quota_timeout=0.3)
    finally:
        kubesim.cluster.quota.status_lag = 0.0
    assert len(report.errors) == 2 and "did not fill in its status within 0.3 s" in report.errors[0]
    assert client.CoreV1Api(k8s).list_namespaced_persistent_volume_claim("recsys").items == []


def test_hand_edits_are_taken_back_and_dropped_fields_removed(kubesim, k8s):
    """Another field manager's apply of a quota value is overwritten (force) and the field moves to skiff;
    a resource the file stops listing disappears from the quota (server-side apply removal)."""
    sync_cluster(Kube(k8s), platform())
    core = client.CoreV1Api(k8s)
    core.patch_namespaced_resource_quota("skiff-quota", "recsys", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "skiff-quota", "namespace": "recsys"},
        "spec": {"hard": {"requests.cpu": "100"}}}, field_manager="kubectl", force=True, _content_type=APPLY)
    report = sync_cluster(Kube(k8s), platform())
    assert report.applied == ["ResourceQuota/recsys/skiff-quota"]
    quota = core.read_namespaced_resource_quota("skiff-quota", "recsys")
    assert quota.spec.hard["requests.cpu"] == "8"
    owners = {e.manager: e.fields_v1 for e in quota.metadata.managed_fields}
    assert "f:requests.cpu" in owners["skiff"]["f:spec"]["f:hard"] and "kubectl" not in owners

    report = sync_cluster(Kube(k8s), platform(PLATFORM.replace(", pods: 20, jobs: 4", ", jobs: 4")))
    assert report.applied == ["ResourceQuota/recsys/skiff-quota"]
    assert "pods" not in core.read_namespaced_resource_quota("skiff-quota", "recsys").spec.hard


def _context(task_id: str) -> dict:
    from types import SimpleNamespace

    ti = SimpleNamespace(dag_id="platform_tests", task_id=task_id, run_id="manual__1", try_number=1, map_index=-1,
                         start_date=None, log_url=None, stats_tags={})
    return {"ti": ti, "task_instance": ti, "task_state_store": None}


def _training(task_id: str, **kwargs):
    from operators import TrainingJobOperator

    values = dict(task_id=task_id, image="registry.example.com/recsys/train:1", owner="alice", namespace="recsys",
                  entry_path="train.py", cpu=1, memory=1, deferrable=False, pod_discovery_timeout=20,
                  pod_annotations={"kubesim.io/duration": "0.2"})
    return TrainingJobOperator(**{**values, **kwargs})


@pytest.fixture
def enforced(kubesim, k8s, kube_conn, tmp_path, monkeypatch):
    """The cluster synced from the test platform file, which is also the configured (enforced) file."""
    path = tmp_path / "platform.yaml"
    sync_cluster(Kube(k8s), platform(path=path))
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(path))
    return path


def busy_recsys(k8s):
    """A running pod holding 7 of recsys's 8 CPUs, once the quota counts it."""
    from kubesim.testing import wait_until

    core = client.CoreV1Api(k8s)
    core.create_namespaced_pod("recsys", {
        "metadata": {"name": "busy", "annotations": {"kubesim.io/duration": "600"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "resources": {
            "requests": {"cpu": "7", "memory": "1Gi"}, "limits": {"cpu": "7", "memory": "1Gi"}}}]}})
    wait_until(lambda: (core.read_namespaced_resource_quota("skiff-quota", "recsys").status.used or {}).get(
        "requests.cpu") == "7", what="the quota counts the busy pod")
    return core


def test_training_pods_pull_with_the_team_service_account_secrets(enforced, k8s):
    """Jobs' pods run as the team's ServiceAccount ``default``; the API server copies its pull secrets in."""
    _training("prep").execute(_context("prep"))
    (pod,) = client.CoreV1Api(k8s).list_namespaced_pod("recsys").items
    assert pod.spec.service_account_name == "default"
    assert [s.name for s in pod.spec.image_pull_secrets] == ["regcred", "recsys-registry"]


def test_instances_run_as_the_team_service_account_with_its_pull_secrets(enforced, k8s):
    """A development instance created as dev_instance_create does (request from the platform file, admission)
    runs as the team's ServiceAccount with the team's pull secrets."""
    from kubesim.testing import wait_until
    from operators.devinstances import lifecycle
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.platform import load_platform

    the_platform = load_platform(enforced)
    req = request_from_params(the_platform, "bob", {"team": "recsys", "name": "nb", "cpu": 1, "memory": 1})
    lifecycle.create(Kube(k8s), req, Settings(host="dev.example.com"), platform=the_platform)
    core = client.CoreV1Api(k8s)
    pods = wait_until(lambda: core.list_namespaced_pod("recsys", label_selector="skiff.io/instance=nb").items,
                      what="the instance's pod")
    assert pods[0].spec.service_account_name == "default"
    assert [s.name for s in pods[0].spec.image_pull_secrets] == ["regcred", "recsys-registry"]


NODE_POOLS = """\
node_pools:
  gpu: {taint_key: example.com/gpu-node, taint_value: "yes", taint_effect: NoExecute}
  online: {key: pool.example.com/tier, value: prod, taint_effect: PreferNoSchedule}
"""


def test_jobs_and_instances_take_the_gpu_and_online_pools_from_the_file(kubesim, k8s, kube_conn, tmp_path,
                                                                        monkeypatch):
    from operators.devinstances import desired
    from operators.devinstances.operator import request_from_params
    from operators.platform import load_platform

    path = tmp_path / "platform.yaml"
    sync_cluster(Kube(k8s), platform(PLATFORM + NODE_POOLS, path))
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(path))
    monkeypatch.setenv("AIRFLOW__SKIFF__ONLINE_POOL_KEY", "ignored.example.com/pool")   # the file wins
    _training("online", online=True).execute(_context("online"))
    (job,) = client.BatchV1Api(k8s).list_namespaced_job("recsys").items
    pod = job.spec.template.spec
    assert [(t.key, t.value, t.effect) for t in pod.tolerations] == [
        ("pool.example.com/tier", "prod", "PreferNoSchedule")]
    (pref,) = pod.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    assert [(e.key, e.values) for e in pref.preference.match_expressions] == [("pool.example.com/tier", ["prod"])]

    req = request_from_params(load_platform(path), "bob", {"team": "recsys", "name": "nb", "image": "tf2-gpu",
                                                           "cpu": 1, "memory": 1, "gpu": 1})
    sts = desired.statefulset(req, {}, replicas=1, started=None)["spec"]["template"]["spec"]
    assert sts["tolerations"] == [{"key": "example.com/gpu-node", "operator": "Equal", "value": "yes",
                                   "effect": "NoExecute"}]


def test_training_that_can_never_fit_fails_before_creating_anything(enforced, kubesim):
    from operators.platform.admission import AdmissionError

    kubesim.controls.reset_stats()
    with pytest.raises(AdmissionError, match="^team recsys asks 4 GPU, quota 2$"):
        _training("big", gpu=4).execute(_context("big"))
    with pytest.raises(AdmissionError, match="online=True: team nlp may not use the online pool"):
        _training("online", owner="carol", namespace="nlp", online=True).execute(_context("online"))
    with pytest.raises(AdmissionError, match=r"^pvc='alice-home': bob may not mount it at /root: it is alice's"):
        _training("steal", owner="bob", pvc="alice-home").execute(_context("steal"))
    assert writes(kubesim) == 0


def test_training_that_fits_the_quota_but_not_the_free_part_says_what_it_waits_for(enforced, k8s, capfd):
    """7 of recsys's 8 CPUs are in use: a 2-CPU step is admitted, logs what it waits for, waits at the quota
    (quota_wait=None) and runs once the busy pod is gone."""
    import threading

    from kubesim.testing import wait_until

    core = busy_recsys(k8s)

    def free_the_quota_once_refused():
        wait_until(lambda: any(e.reason == "FailedCreate" for e in core.list_namespaced_event("recsys").items),
                   timeout=30, what="the Job's pod refused by the quota")
        core.delete_namespaced_pod("busy", "recsys", grace_period_seconds=0)

    freer = threading.Thread(target=free_the_quota_once_refused)
    freer.start()
    try:
        _training("wait", cpu=2, quota_wait=None).execute(_context("wait"))
    finally:
        freer.join()
    assert ("team recsys waits for 2 CPU (7 of 8 in use); the Job waits at the quota until it fits "
            "(quota_wait=None)") in capfd.readouterr().out
    (job,) = client.BatchV1Api(k8s).list_namespaced_job("recsys").items
    assert job.status.succeeded == 1


def test_an_instance_that_would_wait_for_quota_is_refused_saying_what_is_in_use(enforced, kubesim, k8s):
    """Development instances apply the same admission decision as training steps; an instance is interactive, so
    one that fits the quota but not what is free now is refused (not queued), and one that never fits too:
    before anything is written."""
    from dataclasses import replace

    from operators.devinstances import lifecycle, naming
    from operators.devinstances.operator import request_from_params
    from operators.devinstances.settings import Settings
    from operators.platform import load_platform
    from operators.platform.admission import AdmissionError

    busy_recsys(k8s)
    the_platform = load_platform(enforced)
    req = request_from_params(the_platform, "bob", {"team": "recsys", "name": "nb", "cpu": 2, "memory": 1})
    settings = Settings(host="dev.example.com")
    kubesim.controls.reset_stats()
    with pytest.raises(lifecycle.InstanceError, match=r"^not enough free quota to start it now: team recsys waits "
                                                      r"for 2 CPU \(7 of 8 in use\)$"):
        lifecycle.create(Kube(k8s), req, settings, platform=the_platform)
    with pytest.raises(AdmissionError, match="^team recsys asks 9 CPU, quota 8$"):
        lifecycle.create(Kube(k8s), replace(req, cpu="9"), settings, platform=the_platform)
    assert writes(kubesim) == 0
    lifecycle.create(Kube(k8s), replace(req, cpu="1"), settings, platform=the_platform)  # 1 CPU is free: admitted
    assert [p.metadata.name for p in client.AppsV1Api(k8s).list_namespaced_stateful_set("recsys").items] == [
        naming.statefulset_name("bob", "nb")]


def test_read_only_share_is_mounted_read_only_whatever_was_asked(enforced, k8s):
    from operators import Volume

    _training("read", owner="bob", volumes=[Volume("datasets", "/data", read_only=False)]).execute(_context("read"))
    (job,) = client.BatchV1Api(k8s).list_namespaced_job("recsys").items
    pod = job.spec.template.spec
    assert [v.persistent_volume_claim.read_only for v in pod.volumes if v.name != "root-dir"] == [True]
    assert [m.read_only for m in pod.containers[0].volume_mounts if m.mount_path == "/data"] == [True]


def test_dag_task_rejects_a_bad_file_before_writing(kubesim, kube_conn, tmp_path, monkeypatch):
    from operators.platform.dags import run_platform_sync

    bad = tmp_path / "platform.yaml"
    bad.write_text(PLATFORM.replace("gpu: 2,", "gpu: 2x,"))
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(bad))
    kubesim.controls.reset_stats()
    with pytest.raises(PlatformError, match=rf"{bad}:10: teams\[0\].quota.gpu: '2x' is not a quantity"):
        run_platform_sync()
    assert kubesim.controls.stats()["total"] == 0


def test_dag_task_applies_the_file_and_reports(kubesim, kube_conn, tmp_path, monkeypatch):
    good = tmp_path / "platform.yaml"
    platform(path=good)
    monkeypatch.setenv("AIRFLOW__SKIFF__PLATFORM_FILE", str(good))
    monkeypatch.delenv("AIRFLOW_CONN_SKIFF_AIRFLOW_API", raising=False)   # no Airflow API: pools are skipped
    from operators.platform.dags import run_platform_sync

    report = run_platform_sync()
    assert len(report["applied"]) == 17 and "skipped" in report["pools"]
    json.dumps(report)   # an XCom: plain JSON


def test_usage_reads_finished_jobs_and_quota_from_the_cluster(enforced, k8s, tmp_path):
    from operators.platform import load_platform
    from operators.platform.usage import read_report, usage, write_report

    _training("train", cpu=2, gpu=1).execute(_context("train"))
    (job,) = client.BatchV1Api(k8s).list_namespaced_job("recsys").items
    seconds = (job.status.completion_time - job.status.start_time).total_seconds()
    report = usage(Kube(k8s), load_platform(enforced))
    (alice,) = report["by_user"]
    assert (alice["user"], alice["team"], alice["jobs"]) == ("alice", "recsys", 1)
    assert alice["gpu_hours"] == round(seconds / 3600, 4) and alice["cpu_hours"] == round(2 * seconds / 3600, 4)
    assert report["by_dag"][0]["dag_id"] == "platform_tests"
    recsys = next(t for t in report["teams"] if t["team"] == "recsys")
    assert recsys["quota"]["storage"] == {"hard": "20Gi", "used": "10Gi"}   # 2 homes x 2Gi + 5Gi + 1Gi
    # no [skiff] prometheus_url: the GPU efficiency is not known and the report says why, no number
    assert report["gpu"]["source"] is None and report["gpu"]["problem"].startswith("no Prometheus configured")
    assert report["gpu"]["by_user"] == report["gpu"]["by_team"] == []
    write_report(report, tmp_path / "usage.json")
    assert read_report(tmp_path / "usage.json") == json.loads(json.dumps(report))


def test_the_usage_dag_still_counts_a_job_kubernetes_deleted_since_its_last_run(enforced, k8s, tmp_path, monkeypatch):
    """A finished Job goes after its ttlSecondsAfterFinished (a day by default) while the report covers 30 days:
    the DAG's task keeps each Job it saw in a ledger beside the report, and the page's report never holds it."""
    from kubesim.testing import wait_until
    from operators.platform.usage import ledger_file, read_report, run_usage_report

    monkeypatch.setenv("AIRFLOW__SKIFF__USAGE_FILE", str(tmp_path / "usage.json"))
    _training("train", cpu=2, gpu=1).execute(_context("train"))
    assert run_usage_report()["users"] == 1
    first = read_report(tmp_path / "usage.json")
    batch = client.BatchV1Api(k8s)
    (job,) = batch.list_namespaced_job("recsys").items
    batch.delete_namespaced_job(job.metadata.name, "recsys", propagation_policy="Foreground")
    wait_until(lambda: not batch.list_namespaced_job("recsys").items, 30, what="the Job deleted (its TTL, sooner)")
    run_usage_report()
    report = read_report(tmp_path / "usage.json")
    assert report["by_user"] == first["by_user"] and report["by_user"][0]["jobs"] == 1
    assert "ledger" not in report and "alice" not in json.dumps({k: v for k, v in report.items() if k != "by_user"
                                                                  and k != "gpu"})
    assert [line["uid"] for line in json.loads(ledger_file(tmp_path / "usage.json").read_text())] == [job.metadata.uid]
