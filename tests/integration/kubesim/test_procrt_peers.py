"""Pod to pod by name between process pods (kubesim/kubelet/procrt/podnet.py `peers`, kubesim/kubeproxy/peers.py):
the pods of an Indexed Job under a headless Service find each other as `<job>-<index>.<service>` (cluster
DNS's pod records, from the pod's hostname and subdomain) and exchange data over TCP between their network
namespaces, through loopback twins only. Real processes, the `kubernetes` client over HTTP."""
from __future__ import annotations

import pytest
from kubernetes.client import BatchV1Api

from kubesim.kubelet.procrt.podnet import hosts_file, listeners, peers
from kubesim.testing import wait_until
from tests.support.kubesim.procrt_support import log

# rank r of n: serves on its own address (port 7000), then says hello to every other rank by name (retrying
# until the name resolves and the peer answers), and waits until every other rank said hello to it
WORKER = r"""
import os, socket, sys, threading, time
r, n, job, svc = int(os.environ["JOB_COMPLETION_INDEX"]), int(sys.argv[1]), sys.argv[2], sys.argv[3]
me = socket.gethostbyname(socket.gethostname())
server = socket.create_server((me, 7000))
heard = []
def serve():
    while len(heard) < n - 1:
        c, _ = server.accept()
        line = c.makefile().readline().strip()
        heard.append(line)
        c.sendall(f"rank {r} got {line}\n".encode()); c.close()
t = threading.Thread(target=serve); t.start()
for k in range(n):
    if k == r:
        continue
    deadline = time.time() + 60
    while True:
        try:
            s = socket.create_connection((f"{job}-{k}.{svc}", 7000), timeout=5)
            s.sendall(f"hello from {r}\n".encode())
            answer = s.makefile().readline().strip()
            if answer:
                print(answer, flush=True)
                break
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit(f"rank {k} not reached")
        time.sleep(0.1)
t.join(60)
print("heard", " ".join(sorted(heard)), flush=True)
"""


def _gang(pcore, name: str, n: int):
    pcore.create_namespaced_service("default", {"metadata": {"name": f"{name}-w"}, "spec": {
        "clusterIP": "None", "selector": {"job-name": name}, "ports": [{"port": 7000}]}})
    BatchV1Api(pcore.api_client).create_namespaced_job("default", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"completionMode": "Indexed", "completions": n, "parallelism": n, "backoffLimit": 0,
                 "template": {"spec": {"restartPolicy": "Never", "subdomain": f"{name}-w", "containers": [{
                     "name": "main", "image": "debian:12",
                     "command": ["python3", "-c", WORKER, str(n), name, f"{name}-w"]}]}}}})


@pytest.mark.parametrize("n", [2, 4])
def test_the_ranks_of_an_indexed_job_find_each_other_by_name_and_exchange_data(pcore, n):
    """Every rank reaches every other at `<job>-<k>.<svc>`:7000 in the other pod's namespace and gets its
    answer; the Job completes with every index ("0-<n-1>")."""
    name = f"gang{n}"
    _gang(pcore, name, n)
    batch = BatchV1Api(pcore.api_client)

    def done():
        j = batch.read_namespaced_job(name, "default")
        return j if any(c.type in ("Complete", "Failed") and c.status == "True"
                        for c in j.status.conditions or []) else None
    j = wait_until(done, 120, what=f"the {n}-rank Job to finish")
    assert [c.type for c in j.status.conditions if c.status == "True"][-1] == "Complete", (
        j.status, {p.metadata.name: log(pcore, p.metadata.name) for p in pcore.list_namespaced_pod("default").items})
    pods = {int(p.metadata.labels["batch.kubernetes.io/job-completion-index"]): p.metadata.name
            for p in pcore.list_namespaced_pod("default", label_selector=f"job-name={name}").items}
    logs = {r: log(pcore, pods[r]) for r in range(n)}
    assert [c.type for c in j.status.conditions if c.status == "True"][-1] == "Complete", logs
    assert j.status.completed_indexes == f"0-{n - 1}" if n > 2 else "0,1"
    for r in range(n):
        others = [k for k in range(n) if k != r]
        assert logs[r].splitlines() == [f"rank {k} got hello from {r}" for k in others] + [
            "heard " + " ".join(sorted(f"hello from {k}" for k in others))], logs[r]


def _pod(name, hostname, ip, ready=True, ports=(), uid=None):
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid or name, "labels": {"job-name": "j"}},
            "spec": {"hostname": hostname, "subdomain": "w",
                     "containers": [{"name": "c", "ports": [{"containerPort": p} for p in ports]}]},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": str(ready)}]}}


def test_peer_names_and_listeners_pure():
    """A peer is named once it is ready under a headless Service named as its subdomain selecting it; the
    others listen on its twin for its containerPorts and the Service's ports; a not-ready peer has no
    name (unless publishNotReadyAddresses); a Service with a clusterIP names no pod."""
    svc = {"metadata": {"namespace": "ns", "name": "w"},
           "spec": {"clusterIP": "None", "selector": {"job-name": "j"}, "ports": [{"port": 29500}]}}
    me, peer = _pod("j-0-abc", "j-0", "10.244.0.5"), _pod("j-1-def", "j-1", "10.244.1.9", ports=[2222])
    late = _pod("j-2-ghi", "j-2", "10.244.1.10", ready=False)
    text = hosts_file(me, "10.244.0.5", [svc], [me, peer, late])
    assert "127.244.0.5\tj-0.w.ns.svc.cluster.local\tj-0\n" in text
    assert text.endswith("127.244.1.9\tj-1.w.ns.svc.cluster.local j-1.w.ns.svc j-1.w\n")
    assert listeners(me, [svc], [me, peer, late]) == [("127.244.1.9", 2222), ("127.244.1.9", 29500)]
    assert [p[1] for p in peers(me, [me, peer, late], [{**svc, "spec": {**svc["spec"],
                                                                         "publishNotReadyAddresses": True}}])] == [
        "127.244.0.5", "127.244.1.9", "127.244.1.10"]
    with_ip = {**svc, "spec": {**svc["spec"], "clusterIP": "10.96.0.9"}}
    assert "j-1.w" not in hosts_file(me, "10.244.0.5", [with_ip], [me, peer])


def test_pods_under_another_headless_service_get_no_listener_on_their_ports():
    """Two development instances in one namespace (each a StatefulSet with a headless Service of its own) both
    serve 22 and 8888 on 0.0.0.0: a listener on the other's twin for those ports would take them from this
    pod's own wildcard bind (sshd's "Address already in use" after a stop/start). Its name still resolves."""
    svc = lambda name: {"metadata": {"namespace": "ns", "name": name},  # noqa: E731
                        "spec": {"clusterIP": "None", "selector": {"app": name}, "ports": [{"port": 8888}]}}
    a, b = _pod("a-0", "a-0", "10.244.0.5", ports=[22, 8888]), _pod("b-0", "b-0", "10.244.0.6", ports=[22, 8888])
    for pod, sub in ((a, "a"), (b, "b")):
        pod["spec"]["subdomain"] = sub
        pod["metadata"]["labels"] = {"app": sub}
    assert listeners(a, [svc("a"), svc("b")], [a, b]) == []
    assert "127.244.0.6\tb-0.b.ns.svc.cluster.local" in hosts_file(a, "10.244.0.5", [svc("a"), svc("b")], [a, b])
