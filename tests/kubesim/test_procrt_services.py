"""Pod-to-Service traffic on process nodes (kubesim/procrt/podnet.py): a process pod reaches a Service by the
names cluster DNS would answer (its /etc/hosts, as the kubelet manages it), through the Service's loopback
twin inside its own network namespace, to a ready endpoint in another pod's namespace; Services created
later become reachable, a Service without a ready endpoint ends the connection at once. Real processes,
the `kubernetes` client over HTTP."""
from __future__ import annotations

from kubesim.procrt.podnet import hosts_file, listeners, service_env
from kubesim.testing import wait_until
from tests.kubesim.procrt_support import log, phase_is, pod

# answers every connection with its pod's name, then closes it
SERVER = ("import os, socket\n"
          "s = socket.create_server(('0.0.0.0', 8888))\n"
          "while True:\n"
          "    c, _ = s.accept(); c.sendall(os.environ['HOSTNAME'].encode()); c.close()\n")
# connects to each `name:port` argument once, prints `<name>:<port> <answer>` ("closed" for an empty answer)
CLIENT = ("import socket, sys\n"
          "for arg in sys.argv[1:]:\n"
          "    host, port = arg.rsplit(':', 1)\n"
          "    try:\n"
          "        s = socket.create_connection((host, int(port)), timeout=30)\n"
          "        print(arg, s.recv(100).decode() or 'closed', flush=True)\n"
          "    except OSError as e:\n"
          "        print(arg, type(e).__name__, flush=True)\n")


def _server(core, name: str, ns: str = "default"):
    body = pod(name, ["python3", "-c", SERVER], restart="Always", terminationGracePeriodSeconds=0,
               container={"ports": [{"containerPort": 8888}],
                          "readinessProbe": {"tcpSocket": {"port": 8888}, "periodSeconds": 1}})
    body["metadata"]["labels"] = {"app": name}
    core.create_namespaced_pod(ns, body)


def _service(core, name: str, app: str, port: int = 8888, ns: str = "default", port_name: str | None = None):
    sp = {"port": port, "targetPort": 8888, **({"name": port_name} if port_name else {})}
    core.create_namespaced_service(ns, {"metadata": {"name": name}, "spec": {"selector": {"app": app},
                                                                            "ports": [sp]}})
    return core.read_namespaced_service(name, ns).spec.cluster_ip


def _ready(core, name: str, ns: str = "default"):
    def check():
        p = core.read_namespaced_pod(name, ns)
        return any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
    wait_until(check, 20, what=f"pod {name} Ready")


def _twin(ip: str) -> str:
    return "127." + ".".join(ip.split(".")[1:])


def test_a_pod_reaches_services_by_name_and_two_pods_on_one_port_are_told_apart(pcore):
    """`svc`, `svc.ns`, `svc.ns.svc` and `svc.ns.svc.cluster.local` resolve in the pod (getaddrinfo over
    /etc/hosts: no DNS server) to the Service's loopback twin, which answers inside the pod's namespace; two
    servers both on 8888 behind two Services (one mapping port 9000 to 8888) each answer for their own."""
    _server(pcore, "srv-a")
    _server(pcore, "srv-b")
    ip_a = _service(pcore, "svc-a", "srv-a")
    _service(pcore, "svc-b", "srv-b", port=9000, port_name="web")
    _ready(pcore, "srv-a")
    _ready(pcore, "srv-b")
    targets = ["svc-a:8888", "svc-a.default:8888", "svc-a.default.svc:8888", "svc-a.default.svc.cluster.local:8888",
               "svc-b:9000", "svc-b.default.svc.cluster.local:9000"]
    pcore.create_namespaced_pod("default", pod("client", ["python3", "-c", CLIENT, *targets]))
    phase_is(pcore, "client", "Succeeded", "Failed", timeout=60)
    assert log(pcore, "client").splitlines() == [
        "svc-a:8888 srv-a", "svc-a.default:8888 srv-a", "svc-a.default.svc:8888 srv-a",
        "svc-a.default.svc.cluster.local:8888 srv-a", "svc-b:9000 srv-b", "svc-b.default.svc.cluster.local:9000 srv-b"]
    script = ('getent hosts svc-a | tr -s " "; echo "$SVC_A_SERVICE_HOST $SVC_A_SERVICE_PORT $SVC_B_SERVICE_PORT_WEB"; '
              'grep -c "^127.0.0.1.localhost$" /etc/hosts; grep "[[:space:]]envpod$" /etc/hosts | cut -f2')
    pcore.create_namespaced_pod("default", pod("envpod", ["bash", "-c", script]))
    phase_is(pcore, "envpod", "Succeeded", "Failed", timeout=30)
    assert log(pcore, "envpod").splitlines() == [
        f"{_twin(ip_a)} svc-a.default.svc.cluster.local svc-a.default.svc svc-a.default svc-a",
        f"{_twin(ip_a)} 8888 9000", "1", "envpod"]
