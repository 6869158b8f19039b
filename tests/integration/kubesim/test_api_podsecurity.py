"""kube-apiserver's PodSecurity admission (k8s.io/pod-security-admission admission/admission.go and
policy/check_*.go), through the real client: the namespace labels choose enforce/warn/audit levels, a pod
that breaks the enforce level is refused with the standard's words, the warn level comes back as a
`Warning` header, and pod-template workloads are warned about, never refused."""
from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from kubesim.testing import wait_until

PSA = "pod-security.kubernetes.io/"
RESTRICTED_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                 "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def _ns(core, name: str, **labels) -> None:
    core.create_namespace({"metadata": {"name": name, "labels": {PSA + k.replace("_", "-"): v
                                                                 for k, v in labels.items()}}})


def _pod(name: str, sc: dict | None = None, **spec) -> dict:
    c = {"name": "main", "image": "busybox", **({"securityContext": sc} if sc is not None else {})}
    return {"metadata": {"name": name}, "spec": {"containers": [c], **spec}}


def _warnings(headers) -> list[str]:
    return headers.getlist("Warning") if hasattr(headers, "getlist") else \
        [h for h in (headers.get("Warning") or "").split(", 299") if h]


def test_baseline_enforce_refuses_with_the_standards_words(k8s):
    """enforce=baseline: a privileged container, a host namespace, a hostPath volume, a host port and an
    added SYS_ADMIN are refused in one 403 whose message lists each failed check as upstream words it, in
    upstream's order (policy/registry.go); nothing is stored. The same pod in a namespace without labels
    (the default policy, privileged) is admitted."""
    core = kubernetes.client.CoreV1Api(k8s)
    _ns(core, "team-a", enforce="baseline")
    bad = _pod("x", {"privileged": True, "capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}},
               hostNetwork=True, volumes=[{"name": "host", "hostPath": {"path": "/"}}])
    bad["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("team-a", bad)
    body = json.loads(info.value.body)
    assert info.value.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (
        'pods "x" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork), '
        'hostPort (container "main" uses hostPort 8080), privileged (container "main" must not set '
        'securityContext.privileged=true), non-default capabilities (container "main" must not include '
        '"SYS_ADMIN" in securityContext.capabilities.add), hostPath volumes (volume "host")')
    assert core.list_namespaced_pod("team-a").items == []
    core.create_namespace({"metadata": {"name": "open"}})
    assert core.create_namespaced_pod("open", bad).metadata.name == "x"


def test_warn_level_comes_back_as_a_warning_header(k8s):
    """enforce=baseline, warn=restricted (what Skiff sets on a team namespace): a plain pod is admitted with
    the restricted level's `would violate PodSecurity "restricted:latest": ...` warning; a pod that meets
    restricted gets none; a refused pod gets no warning, only its error."""
    core = kubernetes.client.CoreV1Api(k8s)
    _ns(core, "team-b", enforce="baseline", warn="restricted")
    _, status, headers = core.create_namespaced_pod_with_http_info("team-b", _pod("plain"))
    assert status == 201
    assert _warnings(headers) == [
        '299 - "would violate PodSecurity \\"restricted:latest\\": allowPrivilegeEscalation != false '
        '(container \\"main\\" must set securityContext.allowPrivilegeEscalation=false), unrestricted '
        'capabilities (container \\"main\\" must set securityContext.capabilities.drop=[\\"ALL\\"]), '
        'runAsNonRoot != true (pod or container \\"main\\" must set securityContext.runAsNonRoot=true), '
        'seccompProfile (pod or container \\"main\\" must set securityContext.seccompProfile.type to '
        '\\"RuntimeDefault\\" or \\"Localhost\\")"']
    _, _, headers = core.create_namespaced_pod_with_http_info("team-b", _pod("tight", RESTRICTED_SC))
    assert _warnings(headers) == []


def test_restricted_enforce_and_pinned_versions(k8s):
    """enforce=restricted refuses runAsUser 0 and a hostPath volume in restricted's words; pinned to
    v1.21 (before check_capabilities_restricted's 1.22 and check_runAsUser's 1.23) the same namespace no
    longer asks for drop ALL."""
    core = kubernetes.client.CoreV1Api(k8s)
    _ns(core, "strict", enforce="restricted")
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("strict", _pod("root", {**RESTRICTED_SC, "runAsUser": 0},
                                                  volumes=[{"name": "h", "hostPath": {"path": "/tmp"}}]))
    assert json.loads(info.value.body)["message"] == (
        'pods "root" is forbidden: violates PodSecurity "restricted:latest": restricted volume types '
        '(volume "h" uses restricted volume type "hostPath"), runAsUser=0 (container "main" must not set '
        'runAsUser=0)')
    _ns(core, "pinned", enforce="restricted", enforce_version="v1.21")
    sc = {k: v for k, v in RESTRICTED_SC.items() if k != "capabilities"}
    assert core.create_namespaced_pod("pinned", _pod("old", sc)).metadata.name == "old"
    with pytest.raises(ApiException):
        core.create_namespaced_pod("strict", _pod("new", sc))


def test_bad_namespace_labels_are_refused(k8s):
    """A namespace whose PodSecurity label is not a level or version is refused (422) naming the label."""
    core = kubernetes.client.CoreV1Api(k8s)
    with pytest.raises(ApiException) as info:
        _ns(core, "typo", enforce="baselin")
    body = json.loads(info.value.body)
    assert info.value.status == 422
    assert body["message"] == ('Namespace "typo" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: '
                               'Invalid value: "baselin": must be one of privileged, baseline, restricted')


def test_workloads_are_warned_about_and_their_pods_refused(k8s):
    """A Job whose template breaks baseline is created (workloads get warn and audit only, as upstream's
    EvaluatePodController with enforce=false), with the warn level's warning; the Job controller's pods are
    then refused, which it reports as FailedCreate with the plugin's words (the pod named by its
    generateName, as admission sees it)."""
    core, batch = kubernetes.client.CoreV1Api(k8s), kubernetes.client.BatchV1Api(k8s)
    _ns(core, "team-c", enforce="baseline", warn="baseline")
    job = {"metadata": {"name": "j"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "hostPID": True, "containers": [{"name": "c", "image": "busybox"}]}}}}
    _, status, headers = batch.create_namespaced_job_with_http_info("team-c", job)
    assert status == 201
    assert _warnings(headers) == ['299 - "would violate PodSecurity \\"baseline:latest\\": host namespaces (hostPID)"']
    wait_until(lambda: any(e.reason == "FailedCreate" and e.message.startswith('Error creating: pods "j-') and
                           'is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostPID)'
                           in e.message for e in core.list_namespaced_event("team-c").items),
               what="FailedCreate event naming PodSecurity")
    assert core.list_namespaced_pod("team-c").items == []
