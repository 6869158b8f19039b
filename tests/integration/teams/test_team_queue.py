"""Team queues from the platform file (operators.teams): the example file applied to kubesim over HTTP."""

from kubernetes import client

from operators.k8s import Kube
from operators.platform import example_path, load_platform
from operators.teams import default_pvc_name, ensure_queues, team_pool, team_queue


def test_example_platform_file_gives_each_team_its_queue(kubesim, k8s):
    platform = load_platform(example_path())
    report = ensure_queues(Kube(k8s), platform)
    assert report.errors == []
    core = client.CoreV1Api(k8s)
    for team in platform.teams:
        hard = core.read_namespaced_resource_quota("skiff-quota", team.namespace).spec.hard
        assert hard["requests.cpu"] == team.quota.cpu and hard["requests.storage"] == team.quota.storage
        pvcs = {p.metadata.name for p in core.list_namespaced_persistent_volume_claim(team.namespace).items}
        assert {default_pvc_name(u) for u in team.users} <= pvcs
    assert ensure_queues(Kube(k8s), platform).applied == []


def test_team_helpers():
    platform = load_platform(example_path())
    assert team_queue("recsys", platform).allow_online is True
    assert team_pool("nlp", platform) == "skiff-nlp"
    assert default_pvc_name("alice") == "alice-home" and default_pvc_name("Alice") != default_pvc_name("alice")
