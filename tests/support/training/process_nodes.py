"""The training tests' cluster on real processes: kubesim with the default CPU nodes as process nodes, one per test
module (a module may set ``PROCESS_TIMING``, a kubesim ``Timing``), reset before each test; ``kubesim`` and
``kubeconfig`` replace the scripted ones of tests/conftest.py for the ``k8s``/``kube_conn``/``team`` fixtures.
A module imports the three fixtures by name."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def process_server(request):
    from kubesim.kubelet.nodes import DEFAULT_NODES
    from kubesim.server import KubeSim
    from tests.support.kubesim.procrt_support import as_process_nodes

    nodes = as_process_nodes([n for n in DEFAULT_NODES if n["name"].startswith("cpu-")])
    server = KubeSim(nodes=nodes, timing=getattr(request.module, "PROCESS_TIMING", None)).start()
    yield server
    server.stop()


@pytest.fixture
def kubesim(process_server):
    process_server.reset()
    return process_server


@pytest.fixture
def kubeconfig(process_server, tmp_path):
    return str(process_server.write_kubeconfig(tmp_path / "kubeconfig"))
