"""Pod-to-Service traffic on process nodes (kubesim/kubelet/procrt/podnet.py): a process pod reaches a Service by the
names cluster DNS would answer (its /etc/hosts, as the kubelet manages it), through the Service's loopback
twin inside its own network namespace, to a ready endpoint in another pod's namespace; Services created
later become reachable, a Service without a ready endpoint ends the connection at once. Real processes,
the `kubernetes` client over HTTP."""
from __future__ import annotations

from kubesim.kubelet.procrt.podnet import hosts_file, listeners, service_env
from kubesim.testing import wait_until
from tests.support.kubesim.procrt_support import log, phase_is, pod

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


def test_a_service_created_after_the_pod_started_becomes_reachable_and_its_name_goes_with_it(pcore):
    """The hosts file and the agent's listeners follow Services created and deleted after the pod started."""
    _server(pcore, "srv-late")
    _ready(pcore, "srv-late")
    script = ("until getent hosts late >/dev/null; do sleep 0.05; done; echo seen; python3 -c \"$0\" late:8888; "
              "while getent hosts late >/dev/null; do sleep 0.05; done; echo gone")
    pcore.create_namespaced_pod("default", pod("waiter", ["bash", "-c", script, CLIENT]))
    phase_is(pcore, "waiter", "Running")
    assert log(pcore, "waiter") == ""
    _service(pcore, "late", "srv-late")
    wait_until(lambda: "seen" in log(pcore, "waiter"), 20, what="the late Service's name in the pod")
    wait_until(lambda: "late:8888" in log(pcore, "waiter"), 40, what="the client reaching the late Service")
    assert log(pcore, "waiter").splitlines() == ["seen", "late:8888 srv-late"]
    pcore.delete_namespaced_service("late", "default")
    phase_is(pcore, "waiter", "Succeeded", "Failed", timeout=20)
    assert log(pcore, "waiter").splitlines() == ["seen", "late:8888 srv-late", "gone"]


def test_no_ready_endpoint_ends_the_connection_and_other_namespaces_need_their_name(pcore):
    """A Service selecting no ready pod: the connection is closed at once (kube-proxy's REJECT), no hang. A
    Service of another namespace answers as `svc.ns` but not by its bare name (that is the pod's own
    namespace's); a headless Service has no name here (no pod address to give)."""
    from kubernetes.client import V1Namespace
    pcore.create_namespace(V1Namespace(metadata={"name": "other"}))
    _server(pcore, "srv-o", ns="other")
    _service(pcore, "far", "srv-o", ns="other")
    _service(pcore, "empty", "nobody")
    pcore.create_namespaced_service("default", {"metadata": {"name": "headless"}, "spec": {
        "clusterIP": "None", "selector": {"app": "srv-o"}, "ports": [{"port": 8888}]}})
    _ready(pcore, "srv-o", ns="other")
    pcore.create_namespaced_pod("default", pod("probe", ["python3", "-c", CLIENT, "empty:8888", "far.other:8888",
                                                         "far:8888", "headless:8888"]))
    phase_is(pcore, "probe", "Succeeded", "Failed", timeout=60)
    assert log(pcore, "probe").splitlines() == ["empty:8888 closed", "far.other:8888 srv-o", "far:8888 gaierror",
                                                "headless:8888 gaierror"]


SVCS = [{"metadata": {"namespace": "ns1", "name": "agg"},
         "spec": {"clusterIP": "10.96.0.20", "selector": {"app": "agg"}, "ports": [{"port": 7363}]}},
        {"metadata": {"namespace": "ns2", "name": "web"},
         "spec": {"clusterIP": "10.96.1.2", "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                                                       {"port": 53, "protocol": "UDP"}]}},
        {"metadata": {"namespace": "ns1", "name": "hl"}, "spec": {"clusterIP": "None", "ports": [{"port": 1}]}}]


def test_hosts_file_listeners_and_service_links_of_a_pod():
    """Pure: the kubelet's managed hosts file (managedHostsFileContent: localhost lines, `<podIP> <hostname>`
    with the subdomain's FQDN, hostAliases) plus Service names; the listeners skip the ports the pod serves
    itself and UDP; service links (envvars.FromServices) for the pod's namespace only, with the twin."""
    worker = {"metadata": {"namespace": "ns1", "name": "w-0", "labels": {"app": "w"}},
              "spec": {"hostname": "w", "subdomain": "sub", "hostAliases": [{"ip": "1.2.3.4", "hostnames": ["a", "b"]}],
                       "containers": [{"name": "c"}]}}
    text = hosts_file(worker, "10.244.0.7", SVCS)
    assert text.splitlines()[0] == "# Kubernetes-managed hosts file."
    assert "127.244.0.7\tw.sub.ns1.svc.cluster.local\tw\n\n# Entries added by HostAliases.\n1.2.3.4\ta\n1.2.3.4\tb\n" in text
    assert text.endswith("127.96.0.20\tagg.ns1.svc.cluster.local agg.ns1.svc agg.ns1 agg\n"
                         "127.96.1.2\tweb.ns2.svc.cluster.local web.ns2.svc web.ns2\n")
    assert listeners(worker, SVCS) == [("127.96.0.20", 7363), ("127.96.1.2", 80)]
    agg = {"metadata": {"namespace": "ns1", "name": "agg-0", "labels": {"app": "agg"}},
           "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}
    assert listeners(agg, SVCS) == []          # 7363: its own Service's target; 80: its containerPort
    assert service_env(worker, SVCS) == {
        "AGG_SERVICE_HOST": "127.96.0.20", "AGG_SERVICE_PORT": "7363", "AGG_PORT": "tcp://127.96.0.20:7363",
        "AGG_PORT_7363_TCP": "tcp://127.96.0.20:7363", "AGG_PORT_7363_TCP_PROTO": "tcp",
        "AGG_PORT_7363_TCP_PORT": "7363", "AGG_PORT_7363_TCP_ADDR": "127.96.0.20"}
    assert service_env({**worker, "spec": {**worker["spec"], "enableServiceLinks": False}}, SVCS) == {}
