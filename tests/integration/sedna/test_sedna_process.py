"""A Sedna FL train worker reaches its aggregation Service on kubesim's process nodes (pod-to-Service
traffic, kubesim/kubelet/procrt/podnet.py): the Service and the `AGG_IP`/`AGG_PORT` env come from Skiff's own FL
reconcile; the worker processes stand in for the Sedna images (which are not pulled on process nodes, and
whose plain-path Model/Dataset volumes are writable hostPaths a process node refuses), carrying the
reconciled pods' labels and env."""
from __future__ import annotations

import pytest

from kubesim import KubeSim
from kubesim.testing import sync_api_client, wait_until
from operators.sedna.kube import PODS, SERVICES, Kube
from operators.sedna.reconcile import reconcile_federated_learning
from tests.support.kubesim.procrt_support import PROCESS_NODES
from tests.support.sedna.sedna_helpers import JOB, env_of, new_fl, pods_of

# accepts one participant per connection: reads its name, answers, prints who joined (the readiness
# probe's connections send nothing)
AGGREGATOR = ("import os, socket\n"
              "s = socket.create_server(('0.0.0.0', int(os.environ['AGG_BIND_PORT'])))\n"
              "while True:\n"
              "    c, _ = s.accept(); name = c.recv(100).decode()\n"
              "    if name:\n"
              "        print('joined', name, flush=True); c.sendall(('welcome ' + name).encode())\n"
              "    c.close()\n")
TRAINER = ("import os, socket\n"
           "c = socket.create_connection((os.environ['AGG_IP'], int(os.environ['AGG_PORT'])), timeout=30)\n"
           "c.sendall(os.environ['WORKER_NAME'].encode()); print(c.recv(100).decode(), flush=True)\n")


@pytest.fixture(scope="module")
def process_sim():
    sim = KubeSim(nodes=PROCESS_NODES).start()
    yield sim
    sim.stop()


@pytest.fixture
def k8s(process_sim):
    """The Sedna fixtures' client, on a fresh process-node cluster."""
    process_sim.reset()
    api = sync_api_client(process_sim.url)
    yield api
    api.close()


def _stand_in(pod: dict, node: str, script: str, env_names: tuple[str, ...], probe_port: str | None = None) -> dict:
    env = env_of(pod)
    probe = {"readinessProbe": {"tcpSocket": {"port": int(env[probe_port])}, "periodSeconds": 1}} if probe_port else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod["metadata"]["name"] + "-proc", "labels": pod["metadata"]["labels"]},
            "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "worker", "image": "debian:12", "command": ["python3", "-c", script],
                                     "env": [{"name": k, "value": env[k]} for k in env_names], **probe}]}}


def test_fl_train_worker_reaches_the_aggregation_service_on_process_nodes(k8s, kube):
    new_fl(kube)
    assert not reconcile_federated_learning(Kube(k8s))["errors"]
    pods = pods_of(kube)          # the sample's pods name nodes kubesim lacks: they stay Pending
    agg = next(p for n, p in pods.items() if "-aggregation-" in n)
    train = next(p for n, p in sorted(pods.items()) if "-train-" in n)
    assert env_of(train)["AGG_IP"] == f"{JOB}-aggregation.default" and env_of(train)["AGG_PORT"] == "7363"
    assert kube.get(SERVICES, "default", f"{JOB}-aggregation")["spec"]["clusterIP"]
    kube.create(PODS, "default", _stand_in(agg, "proc-1", AGGREGATOR, ("AGG_BIND_PORT",), "AGG_BIND_PORT"))
    agg_name = agg["metadata"]["name"] + "-proc"

    def ready():
        conditions = (kube.get(PODS, "default", agg_name).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    wait_until(ready, 20, what="the aggregation stand-in Ready (listening)")
    kube.create(PODS, "default", _stand_in(train, "proc-2", TRAINER, ("AGG_IP", "AGG_PORT", "WORKER_NAME")))
    train_name = train["metadata"]["name"] + "-proc"
    wait_until(lambda: (kube.get(PODS, "default", train_name).get("status") or {}).get("phase") in
               ("Succeeded", "Failed"), 60, what="the train stand-in done")
    worker = env_of(train)["WORKER_NAME"]
    assert _log(k8s, train_name) == [f"welcome {worker}"]
    assert _log(k8s, agg_name) == [f"joined {worker}"]


def _log(api, name: str) -> list[str]:
    from kubernetes.client import CoreV1Api
    return CoreV1Api(api).read_namespaced_pod_log(name, "default", _preload_content=False).data.decode().splitlines()
