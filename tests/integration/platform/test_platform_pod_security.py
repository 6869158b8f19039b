"""Pod Security in team namespaces: the platform file's per-team levels become the namespace's
`pod-security.kubernetes.io` labels (default: enforce baseline, warn and audit restricted), and the pods Skiff
itself makes pass them, checked by the API server's PodSecurity admission (kubesim's, upstream's words) with a
server-side dry run of each pod template."""

from __future__ import annotations

import json

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from operators.devinstances import desired as dev_desired
from operators.devinstances.spec import build_request
from operators.platform import PlatformError
from operators.platform.admission import AdmissionRequest, decide
from operators.platform.desired import team_objects
from operators.training.manifest import job_manifest
from operators.training.naming import TaskInstanceKey
from operators.training.spec import build_spec
from tests.support.platform.platform_support import PLATFORM, platform

RESTRICTED_TEAM = PLATFORM.replace("  - name: nlp\n", "  - name: nlp\n    pod_security: {enforce: restricted}\n")
KEY = TaskInstanceKey("dag", "train", "manual__2026-12-01T00:00:00+00:00", 1)


def _namespace(p, team: str) -> dict:
    return next(d for d in team_objects(p, p.team(team)).setup if d["kind"] == "Namespace")


def test_team_namespaces_carry_the_levels():
    labels = _namespace(platform(), "recsys")["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("pod-security")} == {
        "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "latest",
        "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest",
        "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/audit-version": "latest"}
    assert _namespace(platform(RESTRICTED_TEAM), "nlp")["metadata"]["labels"][
        "pod-security.kubernetes.io/enforce"] == "restricted"


def test_a_bad_level_names_the_field():
    with pytest.raises(PlatformError) as caught:
        platform(PLATFORM.replace("  - name: nlp\n", "  - name: nlp\n    pod_security: {enforce: strict}\n"))
    assert ("platform.yaml:15: teams[1].pod_security.enforce: 'strict' is not one of "
            "['privileged', 'baseline', 'restricted']") in str(caught.value)


def test_restricted_teams_get_restricted_steps_and_no_instances():
    p = platform(RESTRICTED_TEAM)
    step = decide(p, AdmissionRequest("nlp", "carol", "1", "1Gi"), None)
    assert step.restricted and not decide(p, AdmissionRequest("recsys", "alice", "1", "1Gi"), None).restricted
    instance = decide(p, AdmissionRequest("nlp", "carol", "1", "1Gi", instance=True), None)
    assert instance.refused and "enforces Pod Security 'restricted'" in instance.reason


def _training_pod(restricted: bool) -> dict:
    spec = build_spec(image="registry/train:1", namespace="team", work_dir="/root/w", exec_command="python",
                      entry_path="train.py", run_args=[], env={}, cpu=1, memory=1, gpu=0, pvc="carol-home",
                      volumes_=None, online=False, pool_key="pool", pool_value="online")
    return job_manifest(spec, KEY, restricted=restricted)["spec"]["template"]


def _instance_pod() -> dict:
    req = build_request(owner="carol", name="nb", team="team", image="tf2-cpu", cpu="1", memory="2",
                        gpu=0, catalogue=platform().images, default_image="tf2-cpu", home_pvc="carol-home",
                        access=lambda pvc: "rw")
    return dev_desired.statefulset(req, {8888: 20000, 8080: 20001, 22: 20002, 6006: 20003}, replicas=1,
                                   started=None)["spec"]["template"]


def _admitted(core, ns: str, template: dict) -> list[str]:
    """Create the template as a pod with dryRun=All (nothing stored): its warnings, or ApiException."""
    pod = {"metadata": {"name": "probe", **{k: v for k, v in (template.get("metadata") or {}).items()
                                           if k in ("labels", "annotations")}}, "spec": template["spec"]}
    _, _, headers = core.create_namespaced_pod_with_http_info(ns, pod, dry_run="All")
    return headers.getlist("Warning")


def test_skiffs_pods_pass_their_team_namespaces_level(k8s):
    """Under the default levels (enforce baseline, warn restricted) a training step and a development
    instance are admitted (the instance's sshd needs no added capability, its time zone is TZ, not a hostPath);
    a step warns it is not restricted. In a team that enforces restricted, the step Skiff renders for it is
    admitted without a warning; the unrestricted one is refused in the standard's words."""
    core = kubernetes.client.CoreV1Api(k8s)
    default_ns = _namespace(platform(), "recsys")
    core.create_namespace({"metadata": {"name": "team", "labels": default_ns["metadata"]["labels"]}})
    warned = _admitted(core, "team", _training_pod(False))
    assert len(warned) == 1 and 'would violate PodSecurity \\"restricted:latest\\"' in warned[0]
    instance_warnings = _admitted(core, "team", _instance_pod())   # admitted; warned: sshd runs as root
    assert len(instance_warnings) == 1 and "restricted:latest" in instance_warnings[0]
    strict = _namespace(platform(RESTRICTED_TEAM), "nlp")["metadata"]["labels"]
    core.create_namespace({"metadata": {"name": "strict", "labels": strict}})
    assert _admitted(core, "strict", _training_pod(True)) == []
    with pytest.raises(ApiException) as info:
        _admitted(core, "strict", _training_pod(False))
    assert json.loads(info.value.body)["message"].startswith(
        'pods "probe" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false')
