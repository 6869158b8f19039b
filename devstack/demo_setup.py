"""What a platform owner sets up before a team's first run: the example platform file applied to the demo
cluster (teams recsys and nlp, quotas, home PVCs, pull secrets, RBAC) and the teams' Airflow pools, plus the
Airflow connection ``skiff_airflow_api`` through which the ``platform_sync`` DAG keeps the pools sized."""

from __future__ import annotations

from pathlib import Path

from operators.k8s import Kube
from operators.platform import example_path, load_platform
from operators.platform.desired import desired_pools
from operators.platform.kueue import LOCAL_QUEUE, QUEUE_NAME_LABEL
from operators.platform.pools import DEFAULT_API_CONN_ID, AirflowPools
from operators.teams import ensure_queues

DEMO_TEAM = "recsys"
KUEUE_DEMO_OWNER, KUEUE_DEMO_TEAM = "carol", "nlp"   # the Kueue demo's borrower (devstack/demo_dags/kueue_demo.py)


def kueue_example_text() -> str:
    """The example platform file switched to ``queueing: kueue`` (``Stack(kueue=True)``, ``make demo KUEUE=1``):
    each team's nominal quota then defaults to its ResourceQuota's (recsys 2 GPUs, nlp 1, in the gpu flavor)."""
    example = example_path().read_text()
    assert "\nqueueing: quota\n" in example, "the example's queueing line moved"
    return example.replace("\nqueueing: quota\n", "\nqueueing: kueue\n")


def setup_demo(stack) -> dict:
    """Apply the example platform file to ``stack`` (a started ``devstack.Stack``); returns what was done."""
    # the stack's own platform file when it has one (Stack(kueue=True) / platform_text), else the example
    platform = load_platform(getattr(stack, "platform_file", None) or example_path())
    report = ensure_queues(Kube(stack.k8s()), platform)
    if report.errors:
        raise RuntimeError(f"the example platform file was refused: {report.errors}")
    stack.api("POST", "/api/v2/connections", {
        "connection_id": DEFAULT_API_CONN_ID, "conn_type": "http", "host": "localhost",
        "port": stack.airflow_port, "login": "admin", "password": stack.admin_password,
    }, ok=(200, 201, 409))
    pools = AirflowPools.login(stack.airflow_url, "admin", stack.admin_password).sync(desired_pools(platform))
    queue = LOCAL_QUEUE if platform.queueing == "kueue" else None
    home = install_demo_home(stack.k8s(), queue=queue)
    if queue:  # the Kueue demo's borrower trains the same model from her own home
        install_demo_home(stack.k8s(), KUEUE_DEMO_OWNER, KUEUE_DEMO_TEAM, queue=queue)
    return {"cluster": report.as_dict(), "pools": pools, "home": home}


# The demo user's development instance, created through dev_instance_create as alice would from the UI's form.
DEMO_INSTANCE_OWNER = "alice"
# It holds a GPU and leaves it idle, the waste the dashboard's usage row exists to show ("GPUs held idle now"),
# beside the pipeline's train step, whose GPU is busy while it runs.
DEMO_INSTANCE = {"name": "notebook", "team": DEMO_TEAM, "image": "tf2-gpu", "cpu": 1, "memory": 2, "gpu": 1}


def demo_instance_lines(kube, owner: str = DEMO_INSTANCE_OWNER) -> list[str]:
    """How to open ``owner``'s instances: state, addresses and the ssh line (never the password)."""
    from operators.devinstances.inventory import list_instances
    from operators.devinstances.settings import Settings

    lines = []
    # the stack's [skiff] devinstance_* settings are the declared defaults (stack.py passes it no AIRFLOW*
    # variable)
    for v in list_instances(kube, owner, Settings(), with_idle=False):
        lines.append(f"{v.owner}'s instance {v.namespace}/{v.name}: {v.state}, image {v.image_name} "
                     f"({v.resources.get('cpu')} CPU, {v.resources.get('memory')})")
        lines += [f"  {svc:<12} {url}" for svc, url in v.urls.items()]
        if v.ssh:
            lines.append(f"  {'ssh':<12} {v.ssh}")
    return lines


# alice's example training scripts (preprocess, train, evaluate: numpy only), what the example pipeline runs from
# her home volume as /root/recsys/*.py. They reach the volume the way they would on any cluster: a ConfigMap and a
# pod that copies them in (k8s_templates/training/home-files.yaml.j2), not a write into kubesim's PV directory.
DEMO_HOME_FILES = Path(__file__).with_name("demo_home") / "recsys"
DEMO_HOME_TARGET = "/root/recsys"


def install_demo_home(api_client, owner: str = DEMO_INSTANCE_OWNER, team: str = DEMO_TEAM,
                      timeout: float = 120, queue: str | None = None) -> str:
    """Copy the demo's training scripts into ``owner``'s home volume; the copy pod's phase (Succeeded).
    ``queue``: with ``queueing: kueue`` the team's LocalQueue: Kueue holds a pod without one in a team
    namespace (``operators.platform.kueue.manager_config``)."""
    from kubernetes import client

    from kubesim.testing import wait_until
    from operators.core.volumes import home_pvc
    from operators.templating import render

    name = f"skiff-demo-files-{owner}"
    configmap, pod = render("training/home-files.yaml.j2", name=name, namespace=team, pvc=home_pvc(owner),
                            image="registry.local/recsys/preprocess:1.4", target=DEMO_HOME_TARGET,
                            labels={"app.kubernetes.io/managed-by": "skiff-demo",
                                    **({QUEUE_NAME_LABEL: queue} if queue else {})},
                            files={f.name: f.read_text() for f in sorted(DEMO_HOME_FILES.glob("*.py"))})
    core = client.CoreV1Api(api_client)
    for delete in (core.delete_namespaced_pod, core.delete_namespaced_config_map):  # a stack started again
        try:
            delete(name, team, grace_period_seconds=0)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    wait_until(lambda: not core.list_namespaced_pod(team, field_selector=f"metadata.name={name}").items,
               timeout, what=f"the old {name} pod gone")
    core.create_namespaced_config_map(team, configmap)
    core.create_namespaced_pod(team, pod)
    phase = wait_until(lambda: core.read_namespaced_pod(name, team).status.phase in ("Succeeded", "Failed")
                       and core.read_namespaced_pod(name, team).status.phase, timeout,
                       what=f"{name} copying the demo's training scripts into {home_pvc(owner)}")
    if phase != "Succeeded":
        log = core.read_namespaced_pod_log(name, team)
        raise RuntimeError(f"copying the demo's training scripts into {home_pvc(owner)} failed: {log[-2000:]}")
    return phase

