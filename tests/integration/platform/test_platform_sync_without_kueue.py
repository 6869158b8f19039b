"""``queueing: kueue`` on a cluster without Kueue (issue 28 part 5, the platform_sync side): the sync says so and
how to fix it, and writes nothing (the teams' ResourceQuotas would otherwise lose their CPU/GPU limits to queues
that do not exist)."""

from __future__ import annotations

from kubernetes import client

from operators.k8s import Kube
from operators.platform import parse_platform
from operators.platform.sync import sync_cluster
from tests.support.training.kueue_support import PLATFORM


def test_kueue_mode_without_kueues_api_fails_with_the_fix_and_applies_nothing(k8s, tmp_path):
    before = {ns.metadata.name for ns in client.CoreV1Api(k8s).list_namespace().items}
    report = sync_cluster(Kube(k8s), parse_platform(PLATFORM, str(tmp_path / "platform.yaml")))
    assert report.applied == []
    assert report.errors == [
        "queueing: kueue, but this cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2 ResourceFlavor: 404 "
        "Not Found): nothing was applied. Install Kueue v0.19 (helm install kueue oci://registry.k8s.io/kueue/charts/"
        "kueue --version 0.19.2 -n kueue-system --create-namespace), have a cluster admin apply its cluster-wide "
        "objects (python -m operators.rbac teams --platform FILE | kubectl apply -f -), or set queueing: quota in "
        "the platform file"]
    assert {ns.metadata.name for ns in client.CoreV1Api(k8s).list_namespace().items} == before
