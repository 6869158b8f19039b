"""Which stacks tell the example DAGs to script their pods (SKIFF_KUBESIM_SCRIPTED_NODES): only those with a
scripted node. The demo's nodes are all process nodes, so its pipeline really runs (a stack once read a key the
loaded Node manifests do not have, and the demo's training printed kubesim's scripted "line N" instead)."""

from devstack.airflow_env import REPO
from devstack.stack import Stack


def test_the_demo_nodes_run_real_processes_and_the_default_nodes_are_scripted(tmp_path):
    assert Stack(tmp_path, nodes_file=REPO / "devstack" / "demo_nodes.yaml").scripted_nodes() is False
    assert Stack(tmp_path).scripted_nodes() is True
    mixed = tmp_path / "nodes.yaml"
    mixed.write_text("- {name: a, cpu: 2, memory: 4Gi, runtime: process}\n- {name: b, cpu: 2, memory: 4Gi}\n")
    assert Stack(tmp_path, nodes_file=mixed).scripted_nodes() is True
