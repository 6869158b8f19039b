"""The demo puts alice's training scripts into her home volume through the API (a ConfigMap and a copy pod,
k8s_templates/training/home-files.yaml.j2): the objects are valid, the target is a positional parameter, and the
pod runs to Succeeded on kubesim (on its process nodes the copy is real)."""

from __future__ import annotations

import kubernetes_validate
from kubernetes import client

from devstack.demo_setup import DEMO_HOME_FILES, DEMO_HOME_TARGET, install_demo_home
from operators.templating import render


def test_the_manifests_carry_every_script_and_never_shell_text():
    files = {f.name: f.read_text() for f in sorted(DEMO_HOME_FILES.glob("*.py"))}
    assert set(files) == {"demo_lib.py", "preprocess.py", "train.py", "evaluate.py", "train_dp.py", "compare.py"}
    configmap, pod = render("training/home-files.yaml.j2", name="n", namespace="recsys", pvc="alice-home",
                            image="img:1", target="/root/x; rm -rf /", labels={}, files=files)
    for obj in (configmap, pod):
        kubernetes_validate.validate(obj, "1.33", strict=True)
    assert configmap["data"] == files
    (container,) = pod["spec"]["containers"]
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["command"][3:] == ["copy", "/root/x; rm -rf /"]
    assert {"name": "home", "persistentVolumeClaim": {"claimName": "alice-home"}} in pod["spec"]["volumes"]


def test_install_runs_the_copy_pod_to_success_and_can_run_again(k8s, team):
    namespace = team
    assert install_demo_home(k8s, owner="alice", team=namespace) == "Succeeded"
    assert install_demo_home(k8s, owner="alice", team=namespace) == "Succeeded"   # a stack started again
    core = client.CoreV1Api(k8s)
    cm = core.read_namespaced_config_map("skiff-demo-files-alice", namespace)
    assert set(cm.data) == {"demo_lib.py", "preprocess.py", "train.py", "evaluate.py", "train_dp.py", "compare.py"}
    pod = core.read_namespaced_pod("skiff-demo-files-alice", namespace)
    assert pod.spec.containers[0].command[-1] == DEMO_HOME_TARGET
