"""Real kubectl's `exec` and `port-forward` into process pods (kubesim/kubelet/procrt), once per kubectl found as
test_kubectl.py finds them: Debian's 1.20 speaks SPDY/3.1 for both (streams_spdy.py over a plain HTTP
upgrade); a kubectl >= 1.31 on PATH execs over WebSocket (v5.channel.k8s.io) and port-forwards SPDY tunnelled
in a WebSocket (`SPDY/3.1+portforward.k8s.io`). RBAC is on, over HTTPS, as kubectl needs to send a token.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import threading

import pytest

from kubesim import KubeSim
from kubesim.testing import wait_until
from tests.integration.kubesim.test_kubectl import MEMBER_TOKEN, Kubectl, _binaries, _version
from tests.support.kubesim.procrt_support import PROCESS_NODES, pod

SERVE = ("import http.server, socket, socketserver\n"
         "class H(http.server.BaseHTTPRequestHandler):\n"
         "    def do_GET(self):\n"
         "        body = (socket.gethostname() + ' ' + self.path).encode() * (1 if self.path != '/big' else 20000)\n"
         "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()\n"
         "        self.wfile.write(body)\n"
         "class S(socketserver.ThreadingMixIn, http.server.HTTPServer): pass\n"
         "S(('0.0.0.0', 8888), H).serve_forever()\n")


@pytest.fixture(params=_binaries(), scope="module")
def kubectl_bin(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Process nodes, RBAC, TLS; one web pod serving on 8888 in its own network namespace."""
    sim = KubeSim(nodes=PROCESS_NODES, authz="rbac", tls=True).start()
    tmp = tmp_path_factory.mktemp("kubectl-streams")
    sim.access.add_user_token(MEMBER_TOKEN, "alice", ("team-members",))
    yield sim, sim.write_kubeconfig(tmp / "admin"), sim.write_kubeconfig(tmp / "alice", token=MEMBER_TOKEN,
                                                                         user="alice", namespace="default")
    sim.stop()


@pytest.fixture(scope="module")
def web(cluster):
    """The pod `web` (python's http.server on 8888), Running and Ready (created through the Python client)."""
    from kubernetes.client import CoreV1Api
    from kubernetes.config import new_client_from_config
    api = new_client_from_config(config_file=str(cluster[1]))      # the admin's token, kubesim's CA
    core = CoreV1Api(api)
    spec = pod("web", ["python3", "-c", SERVE], restart="Always", container={"ports": [{"containerPort": 8888}]})
    core.create_namespaced_pod("default", spec)
    wait_until(lambda: (core.read_namespaced_pod("web", "default").status.container_statuses or [None])[0]
               and core.read_namespaced_pod("web", "default").status.container_statuses[0].ready, 20,
               what="pod web ready")
    yield "web"
    api.close()


@pytest.fixture
def admin(cluster, kubectl_bin, tmp_path) -> Kubectl:
    cluster[0].reset_stats()
    return Kubectl(kubectl_bin, cluster[1], tmp_path)


def methods(cluster, verb: str) -> set[str]:
    """How kubectl asked for pods/web/<verb>: POST is the SPDY upgrade, GET a WebSocket (kubectl >= 1.30's exec,
    >= 1.31's SPDY-in-WebSocket port-forward): which protocol this kubectl really spoke."""
    paths = cluster[0].stats()["by_path"]
    return {key.split()[0] for key in paths if key.endswith(f"/pods/web/{verb}")}


def websockets(binary: str, minor: int) -> bool:
    version = re.match(r"v1\.(\d+)", _version(binary))
    return version is not None and int(version[1]) >= minor


def test_exec_separates_stdout_and_stderr_and_exits_with_the_commands_code(admin, web, cluster):
    done = admin("exec", web, "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
    assert done.returncode == 3, done
    assert done.stdout == "out\n"
    assert "err\n" in done.stderr and "command terminated with exit code 3" in done.stderr
    ok = admin("exec", web, "--", "sh", "-c", "hostname; pwd")
    assert ok.stdout == "web\n/\n" and ok.stderr == ""
    assert methods(cluster, "exec") == ({"GET"} if websockets(admin.binary, 30) else {"POST"})


def test_exec_with_stdin_piped_reaches_the_command_and_its_end(admin, web):
    text = "".join(f"line {i}\n" for i in range(20000))          # ~200 KiB: more than one flow-control window
    done = admin("exec", "-i", web, "--", "sh", "-c", "wc -l; echo done >&2", stdin=text)
    assert done.stdout.strip() == "20000"
    assert done.stderr == "done\n"


def test_exec_into_a_missing_container_fails_with_the_runtimes_message(admin, web):
    done = admin("exec", web, "-c", "nope", "--", "true", check=False)
    assert done.returncode != 0
    assert "nope" in done.stderr


@pytest.fixture(scope="module")
def alice_may_only_get(cluster, web):
    """alice may read pods and `get` pods/exec and pods/portforward, but not `create` them."""
    from kubernetes.client import RbacAuthorizationV1Api
    from kubernetes.config import new_client_from_config
    with new_client_from_config(config_file=str(cluster[1])) as api:
        rbac = RbacAuthorizationV1Api(api)
        rbac.create_namespaced_role("default", {"metadata": {"name": "peek"}, "rules": [
            {"apiGroups": [""], "resources": ["pods", "pods/exec", "pods/portforward"], "verbs": ["get"]}]})
        rbac.create_namespaced_role_binding("default", {
            "metadata": {"name": "peek"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                                      "name": "peek"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
    return cluster[2]


def test_exec_and_port_forward_need_create_over_spdy_and_websockets_alike(kubectl_bin, alice_may_only_get, web,
                                                                           tmp_path):
    alice = Kubectl(kubectl_bin, alice_may_only_get, tmp_path)
    assert alice("get", "pod", web, "-o", "name").stdout.strip() == f"pod/{web}"
    done = alice("exec", web, "--", "true", check=False)
    assert done.returncode != 0 and "forbidden" in done.stderr.lower(), done.stderr
    done = alice("port-forward", f"pod/{web}", ":8888", check=False)
    assert done.returncode != 0 and "forbidden" in done.stderr.lower(), done.stderr


def test_a_websocket_exec_with_get_but_not_create_is_forbidden(cluster, alice_may_only_get, web):
    """The WebSocket handshake is a GET: kube-apiserver (AuthorizePodWebsocketUpgradeCreatePermission) still
    asks for `create`, as SPDY's POST does. The same GET without the upgrade passes RBAC (alice may `get`)."""
    import base64
    import http.client
    import ssl
    from urllib.parse import urlparse
    sim = cluster[0]
    url = urlparse(sim.url)
    path = f"/api/v1/namespaces/default/pods/{web}/exec?command=true&stdout=true"
    auth = {"Authorization": f"Bearer {MEMBER_TOKEN}"}
    websocket = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                 "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
                 "Sec-WebSocket-Protocol": "v5.channel.k8s.io"}

    def get(headers):
        conn = http.client.HTTPSConnection(url.hostname, url.port,
                                           context=ssl.create_default_context(cadata=sim.cert_pem.decode()))
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        answer = resp.status, resp.read().decode()
        conn.close()
        return answer
    status, body = get({**auth, **websocket})
    assert status == 403 and 'cannot create resource "pods/exec"' in json.loads(body)["message"], body
    status, body = get(auth)
    assert status == 400 and "Upgrade request required" in body, body


class PortForward:
    """`kubectl port-forward pod/<pod> :8888` running; `.port` is the local port it printed."""

    def __init__(self, kubectl: Kubectl, pod_name: str):
        env = {**os.environ, "KUBECONFIG": str(kubectl.kubeconfig), "HOME": str(kubectl.home)}
        self.proc = subprocess.Popen([kubectl.binary, "port-forward", f"pod/{pod_name}", ":8888"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        line = wait_until(lambda: next((x for x in self.lines if "Forwarding from 127.0.0.1:" in x), None), 30,
                          what="kubectl port-forward's 'Forwarding from' line")
        self.port = int(re.search(r"127\.0\.0\.1:(\d+)", line)[1])

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def close(self) -> str:
        self.proc.terminate()
        try:
            return self.proc.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.communicate()[1]


def http_get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def test_port_forward_reaches_the_pods_server_with_two_connections_at_once(admin, web, cluster):
    pf = PortForward(admin, web)
    try:
        # two connections open at once, each answered in full by the pod's own server
        a = socket.create_connection(("127.0.0.1", pf.port), timeout=20)
        b = socket.create_connection(("127.0.0.1", pf.port), timeout=20)
        results = {}

        def fetch(sock, path):
            sock.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
            sock.close()
            results[path] = data
        threads = [threading.Thread(target=fetch, args=(a, "/one")), threading.Thread(target=fetch, args=(b, "/big"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results["/one"].startswith(b"HTTP/1.0 200") and results["/one"].endswith(b"\r\n\r\nweb /one")
        body = results["/big"].split(b"\r\n\r\n", 1)[1]
        assert body == b"web /big" * 20000          # 160 KB: past SPDY's 64 KiB window, whole and in order
        assert http_get(pf.port, "/again").endswith(b"web /again")    # the session serves later connections
        assert pf.proc.poll() is None
        assert methods(cluster, "portforward") == ({"GET"} if websockets(admin.binary, 31) else {"POST"})
    finally:
        stderr = pf.close()
    assert "error" not in stderr.lower(), stderr


def test_port_forward_to_a_port_nothing_listens_on_says_so(admin, web):
    env = {**os.environ, "KUBECONFIG": str(admin.kubeconfig), "HOME": str(admin.home)}
    proc = subprocess.Popen([admin.binary, "port-forward", f"pod/{web}", ":9999"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        port = int(re.search(r"127\.0\.0\.1:(\d+)", line)[1])
        assert http_get(port, "/") == b""           # the connection is closed: nothing listens on 9999
    finally:
        proc.terminate()
        stderr = proc.communicate(timeout=10)[1]
    assert "error forwarding port 9999" in stderr, stderr


def test_an_exec_asking_for_no_stream_is_refused_before_any_upgrade(cluster, web):
    """kube-apiserver's PodExecOptions validation: at least one of stdin, stdout, stderr."""
    import ssl
    import urllib.request

    import yaml
    sim = cluster[0]
    token = yaml.safe_load(cluster[1].read_text())["users"][0]["user"]["token"]       # the admin's
    req = urllib.request.Request(f"{sim.url}/api/v1/namespaces/default/pods/{web}/exec?command=true", method="POST",
                                 headers={"Authorization": f"Bearer {token}", "Connection": "Upgrade", "Upgrade": "SPDY/3.1",
                                          "X-Stream-Protocol-Version": "v4.channel.k8s.io"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=ssl.create_default_context(cadata=sim.cert_pem.decode()), timeout=20)
    assert e.value.code == 400 and "at least 1 of stdin, stdout, stderr" in e.value.read().decode()
