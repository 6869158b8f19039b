"""kubesim's Kueue reads its manager Configuration (config.kueue.x-k8s.io/v1beta2, ConfigMap
kueue-system/kueue-manager-config, as the Helm chart installs it): with `manageJobsWithoutQueueName` a Job
without the queue-name label in a namespace `managedJobsNamespaceSelector` matches is suspended and gets a
Workload that names no LocalQueue, so it is never admitted (jobframework/defaults.go WorkloadShouldBeSuspended,
core/workload_controller.go "LocalQueue %s doesn't exist"); a bare pod there is gated (jobs/pod/pod_webhook.go);
elsewhere, and without the Configuration, such a Job runs at once (Kueue's default)."""
from __future__ import annotations

import kubernetes
import pytest
import yaml

from kubesim.testing import sync_api_client, wait_until
from tests.support.kubesim.kueue_objects import Kueue

CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
          "manageJobsWithoutQueueName": True,
          "managedJobsNamespaceSelector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]}}


@pytest.fixture
def kq(kubesim_kueue):
    api = sync_api_client(kubesim_kueue.url)
    kq = Kueue(api)
    kq.core.create_namespace({"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    kq.core.create_namespace({"metadata": {"name": "other"}})
    yield kq
    api.close()


def _job(kq, ns: str, name: str) -> kubernetes.client.V1Job:
    pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                     "resources": {"requests": {"cpu": "1"}}}]}
    return kq.batch.create_namespaced_job(ns, {"metadata": {"name": name},
                                               "spec": {"template": {"spec": pod}}})


def _configure(kq, config: dict) -> None:
    kq.core.create_namespaced_config_map("kueue-system", {
        "metadata": {"name": "kueue-manager-config"},
        "data": {"controller_manager_config.yaml": yaml.safe_dump(config)}})


def test_without_the_configuration_a_job_without_queue_runs(kq):
    assert not _job(kq, "team-a", "free").spec.suspend


def test_managed_namespaces_hold_jobs_and_bare_pods_without_a_queue(kq):
    _configure(kq, CONFIG)
    job = _job(kq, "team-a", "sneaky")
    assert job.spec.suspend is True                          # defaulted by the webhook, in the create answer
    wait_until(lambda: kq.pending_message("team-a", "sneaky") == "LocalQueue  doesn't exist",
               what="the Workload pending without a LocalQueue")
    assert "queueName" not in kq.workload_of("team-a", "sneaky")["spec"]     # omitempty
    assert not kq.core.list_namespaced_pod("team-a").items
    pod = kq.core.create_namespaced_pod("team-a", {"metadata": {"name": "bare"}, "spec": {"containers": [
        {"name": "c", "image": "busybox"}]}})
    assert [g.name for g in pod.spec.scheduling_gates] == ["kueue.x-k8s.io/admission"]
    assert pod.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    # a namespace the selector does not match: Kueue's default, the Job runs
    assert not _job(kq, "other", "elsewhere").spec.suspend
