"""A Sedna CR in a namespace whose Pod Security level its pod templates break: refused before anything is
created, in the API server's words (kubesim's PodSecurity admission), on the CR's condition and in the
reconcile's summary (the task log); fixed, it gets its children. Sedna's own sample puts its Model and
Datasets on the node (plain paths: hostPath volumes), which baseline forbids."""

from __future__ import annotations

from operators.k8s.resource import Resource
from operators.sedna.kube import DEPLOYMENTS, FL_JOBS, JI_SERVICES, SERVICES, Kube
from operators.sedna.reconcile import reconcile_federated_learning, reconcile_joint_inference
from tests.support.sedna.sedna_helpers import JI, JOB, NS, new_fl, new_ji, pods_of

NAMESPACES = Resource("v1", "namespaces")
LEVEL = "pod-security.kubernetes.io/enforce"


def _enforce(kube, level: str) -> None:
    kube.merge_patch(NAMESPACES, None, NS, {"metadata": {"labels": {LEVEL: level}}})


def _failed(kube, res, name) -> dict:
    return next(c for c in kube.get(res, NS, name)["status"]["conditions"] if c["type"] == "Failed")


def test_fl_job_breaking_baseline_creates_nothing_until_allowed(k8s, kube):
    _enforce(kube, "baseline")
    new_fl(kube)
    summary = reconcile_federated_learning(Kube(k8s))
    assert summary.get("created", 0) == 0 and pods_of(kube) == {}
    assert kube.get(SERVICES, NS, f"{JOB}-aggregation") is None
    failed = _failed(kube, FL_JOBS, JOB)
    assert failed["status"] == "True" and failed["reason"] == "PodSecurity"
    assert 'violates PodSecurity "baseline:latest": hostPath volumes (volume "models-sddz")' in failed["message"]
    assert any("violates PodSecurity" in e for e in summary["errors"])
    _enforce(kube, "privileged")
    assert reconcile_federated_learning(Kube(k8s))["created"] == 4


def test_ji_service_breaking_baseline_gets_no_deployment(k8s, kube):
    """A Deployment would be admitted with a mere warning and its pods refused out of sight: the dry run of
    its pod template refuses the CR instead."""
    _enforce(kube, "baseline")
    new_ji(kube)
    reconcile_joint_inference(Kube(k8s))
    assert kube.list(DEPLOYMENTS, NS) == []
    assert 'violates PodSecurity "baseline:latest"' in _failed(kube, JI_SERVICES, JI)["message"]
