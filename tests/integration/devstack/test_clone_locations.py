"""`make demo` from a fresh clone under /root, /home or /tmp (issue 38): the part that once broke there, on real
processes. A clone under /root had every step exit 127 (its `.venv`, the demo nodes' image, lay under /root, and
alice's home volume is mounted at /root over it); under /tmp and /home the image lay in the container's own
writable /tmp or /home, and the demo's set-up copy pod failed with an empty log.

For each place: the checkout cloned there (`git clone`, as a newcomer does), its `.venv` (this run's virtualenv
hard-linked into the clone: the same files at the clone's path, without a network install), kubesim on the
clone's `devstack/demo_nodes.yaml` (process nodes whose image is `../.venv`, i.e. the clone's), the example
platform file applied, the demo's set-up pod copying alice's scripts into her home volume, and the example
pipeline's first step (`preprocess`, numpy, from /root/recsys on her home volume) built by TrainingJobOperator
run to Complete. The whole `make demo` runs in tests/e2e/devstack/test_demo_e2e.py (from the checkout).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from devstack.airflow_env import REPO

pytestmark = pytest.mark.skipif(not (shutil.which("bwrap") and os.geteuid() == 0),
                                reason="process nodes with a user namespace per pod need bwrap and root")


def _clone(parent: str) -> str:
    """A clone of this checkout's HEAD under `parent`, with the running virtualenv as its `.venv`."""
    dest = os.path.join(parent, f"skiff-clone-{uuid.uuid4().hex[:8]}")
    subprocess.run(["git", "clone", "-q", "--local", "--no-checkout", str(REPO), dest], check=True, timeout=120)
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    subprocess.run(["git", "-C", dest, "checkout", "-q", head], check=True, timeout=120)
    linked = subprocess.run(["cp", "-al", sys.prefix, os.path.join(dest, ".venv")], capture_output=True)
    if linked.returncode:          # another file system: a real copy
        subprocess.run(["cp", "-a", sys.prefix, os.path.join(dest, ".venv")], check=True, timeout=600)
    return dest


@pytest.mark.parametrize("parent", ["/root", "/home", "/tmp"])
def test_the_demos_setup_pod_and_first_step_run_from_a_clone_under(parent):
    from kubernetes import client

    from devstack.demo_setup import install_demo_home
    from kubesim import KubeSim
    from kubesim.testing import sync_api_client, wait_until
    from operators import TrainingJobOperator
    from operators.k8s import Kube
    from operators.platform import example_path, load_platform
    from operators.teams import ensure_queues
    from operators.training.naming import TaskInstanceKey

    clone = _clone(parent)
    sim = None
    try:
        nodes = os.path.join(clone, "devstack", "demo_nodes.yaml")
        sim = KubeSim(nodes=nodes).start()
        api = sync_api_client(sim.url)
        images = {n.metadata.annotations["kubesim.io/images"] for n in client.CoreV1Api(api).list_node().items}
        assert images == {'{"*": "' + os.path.join(clone, ".venv") + '"}'}      # the clone's own virtualenv
        report = ensure_queues(Kube(api), load_platform(example_path()))
        assert not report.errors
        assert install_demo_home(api, timeout=60) == "Succeeded"
        step = TrainingJobOperator(task_id="preprocess", image="registry.local/recsys/preprocess:1.4", owner="alice",
                                   namespace="recsys", work_dir="/root/recsys", exec_command="python -u",
                                   entry_path="recsys/preprocess.py",
                                   run_args=["--date", "2026-12-05", "--out", "/root/features/2026-12-05",
                                             "--samples", "2000"], cpu=1, memory=1, deferrable=False)
        manifest = step.build_manifest(TaskInstanceKey("clone_test", "preprocess", "r1", 1))
        batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
        job = batch.create_namespaced_job("recsys", manifest).metadata.name

        def finished():
            conds = batch.read_namespaced_job(job, "recsys").status.conditions or []
            return next((c.type for c in conds if c.type in ("Complete", "Failed") and c.status == "True"), None)
        outcome = wait_until(finished, 60, what=f"Job {job} finished")
        pods = core.list_namespaced_pod("recsys", label_selector=f"job-name={job}").items
        log = core.read_namespaced_pod_log(pods[0].metadata.name, "recsys")
        assert outcome == "Complete", log
        assert "preprocess 2026-12-05: generating 2000 rows" in log
    finally:
        if sim is not None:
            sim.stop()
        shutil.rmtree(clone, ignore_errors=True)
