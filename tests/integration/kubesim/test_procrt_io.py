"""What a process pod sees and shows: env and `$(VAR)` expansion, valueFrom, configuration volumes with
items and modes, read-only mounts, hostname; its logs (follow, tail, timestamps); its own network
namespace; what a process node refuses."""
from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from kubesim.testing import wait_until
from tests.support.kubesim.procrt_support import events_for, log, phase_is, pod


def test_env_expansion_value_from_and_argv_exactly_as_the_kubelet_builds_them(pcore):
    """makeEnvironmentVariables + expand.go: `$(A)` expanded, `$$(A)` kept literal, an undefined `$(NOPE)`
    kept; secretKeyRef / configMapKeyRef / fieldRef / resourceFieldRef resolved; args expanded, no shell."""
    pcore.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}, "data": {"mode": "fast"}})
    pcore.create_namespaced_secret("default", {"metadata": {"name": "sec"},
                                              "data": {"token": base64.b64encode(b"s3cret").decode()}})
    env = [{"name": "A", "value": "alpha"}, {"name": "B", "value": "$(A)-beta $$(A) $(NOPE)"},
           {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
           {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}},
           {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}]
    pcore.create_namespaced_pod("default", pod(
        "envs", ["/bin/echo"], container={
            "args": ["$(B)|$(MODE)|$(TOKEN)|$(POD)|$(MEM)|$(A) b|'q'|$HOME"], "env": env,
            "resources": {"limits": {"memory": "256Mi"}}}))
    phase_is(pcore, "envs", "Succeeded")
    assert log(pcore, "envs") == "alpha-beta $(A) $(NOPE)|fast|s3cret|envs|256|alpha b|'q'|$HOME\n"


def test_hostname_is_the_pod_name_and_config_volumes_have_items_and_modes_read_only(pcore):
    pcore.create_namespaced_config_map("default", {"metadata": {"name": "files"}, "data": {"a": "A", "b": "B"}})
    script = ("hostname; cat /cfg/dir/a.txt; echo; stat -c %a /cfg/dir/a.txt; ls /cfg/dir; "
              "{ echo x > /cfg/dir/new; } 2>/dev/null || echo read-only; "
              "echo y > /scratch/f && cat /scratch/f; cat /info/labels; echo; echo t > /tmp/t && cat /tmp/t; "
              "mkdir -p /run/skiff && echo r > /run/skiff/r && cat /run/skiff/r")
    pcore.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vols", "labels": {"app": "demo"}},
        "spec": {"restartPolicy": "Never", "volumes": [
            {"name": "cfg", "configMap": {"name": "files", "items": [{"key": "a", "path": "dir/a.txt", "mode": 0o600}]}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}],
            "containers": [{"name": "main", "image": "debian:12", "command": ["bash", "-c", script], "volumeMounts": [
                {"name": "cfg", "mountPath": "/cfg"}, {"name": "scratch", "mountPath": "/scratch"},
                {"name": "info", "mountPath": "/info"}]}]}})
    phase_is(pcore, "vols", "Succeeded")
    assert log(pcore, "vols").splitlines() == ["vols", "A", "600", "a.txt", "read-only", "y", 'app="demo"', "t", "r"]


def test_a_missing_secret_key_is_create_container_config_error(pcore):
    pcore.create_namespaced_secret("default", {"metadata": {"name": "sec"}, "data": {}})
    pcore.create_namespaced_pod("default", pod("nokey", ["true"], container={"env": [
        {"name": "T", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "token"}}}]}))

    def waiting():
        p = pcore.read_namespaced_pod("nokey", "default")
        cs = (p.status.container_statuses or [None])[0]
        return cs.state.waiting if cs and cs.state.waiting and cs.state.waiting.reason != "ContainerCreating" else None
    w = wait_until(waiting, 10)
    assert (w.reason, w.message) == ("CreateContainerConfigError", "couldn't find key token in Secret default/sec")


def test_writable_host_path_volumes_and_privileged_containers_are_refused_with_an_event(pcore):
    pcore.create_namespaced_pod("default", pod("hp", ["true"], volumes=[{"name": "h", "hostPath": {"path": "/etc"}}],
                                               container={"volumeMounts": [{"name": "h", "mountPath": "/h"}]}))
    pcore.create_namespaced_pod("default", pod("priv", ["true"], container={"securityContext": {"privileged": True}}))
    assert phase_is(pcore, "hp", "Failed").status.reason == "HostPathNotAllowed"
    assert phase_is(pcore, "priv", "Failed").status.reason == "PrivilegedNotAllowed"
    assert "hostPath volumes are not allowed" in events_for(pcore, "hp", "HostPathNotAllowed")[0].message
    assert events_for(pcore, "priv", "PrivilegedNotAllowed")


def test_logs_follow_streams_lines_as_the_process_writes_them(pcore):
    """`kubectl logs -f`: lines arrive while the process runs, in order, and the stream ends with it."""
    pcore.create_namespaced_pod("default", pod("talk", ["bash", "-c", "for i in 1 2 3 4; do echo line $i; sleep 0.3; done"]))
    phase_is(pcore, "talk", "Running")
    got, done = [], threading.Event()

    def follow():
        resp = pcore.read_namespaced_pod_log("talk", "default", follow=True, _preload_content=False)
        for chunk in resp.stream(1):
            got.append((time.monotonic(), chunk.decode()))
        done.set()
    threading.Thread(target=follow, daemon=True).start()
    wait_until(done.is_set, 15)
    text = "".join(c for _, c in got)
    assert text == "line 1\nline 2\nline 3\nline 4\n"
    assert got[-1][0] - got[0][0] >= 0.5          # streamed over the run, not at the end
    stamped = log(pcore, "talk", timestamps=True, tail_lines=1)
    assert stamped.endswith(" line 4\n") and stamped[:4].isdigit()


def test_two_pods_both_listen_on_8888_in_their_own_network_namespaces(pcore):
    serve = ("import socket,time\ns=socket.socket(); s.bind(('0.0.0.0', 8888)); s.listen()\n"
             "print('listening', flush=True); time.sleep(30)")
    for name in ("one", "two"):
        pcore.create_namespaced_pod("default", pod(name, ["python3", "-c", serve], restart="Always"))
    for name in ("one", "two"):
        wait_until(lambda n=name: log(pcore, n) == "listening\n" if phase_is(pcore, n, "Running") else None, 15)
        assert pcore.read_namespaced_pod(name, "default").status.container_statuses[0].restart_count == 0


SERVE = ("import http.server, socket\n"
         "class H(http.server.BaseHTTPRequestHandler):\n"
         "    def do_GET(self):\n"
         "        body = (socket.gethostname() + ' ' + self.path).encode()\n"
         "        self.send_response(200); self.send_header('Content-Type', 'text/plain'); self.end_headers()\n"
         "        self.wfile.write(body)\n"
         "http.server.HTTPServer(('0.0.0.0', 8888), H).serve_forever()\n")


def web_pod(name, app):
    spec = pod(name, ["python3", "-c", SERVE], restart="Always", container={"ports": [{"containerPort": 8888}]})
    spec["metadata"]["labels"] = {"app": app}
    return spec


def test_a_services_port_answers_on_its_loopback_twin_and_through_the_service_proxy_and_tcp_services(pcore, procsim_server):
    """kube-proxy's part: the Service's clusterIP 10.96.b.c answers on 127.96.b.c:<port> into a ready pod;
    the API server's service proxy reaches the pod's real server; a tcp-services entry on 127.0.0.1."""
    import socket
    import urllib.request
    pcore.create_namespaced_pod("default", web_pod("web-a", "a"))
    pcore.create_namespaced_pod("default", web_pod("web-b", "b"))
    for app in ("a", "b"):
        pcore.create_namespaced_service("default", {"metadata": {"name": f"svc-{app}"}, "spec": {
            "selector": {"app": app}, "ports": [{"name": "http", "port": 8888, "targetPort": 8888}]}})
    pcore.create_namespaced_config_map("default", {"metadata": {"name": "tcp-services"},
                                                  "data": {"29111": "default/svc-b:8888"}})
    ip = {app: "127." + ".".join(pcore.read_namespaced_service(f"svc-{app}", "default").spec.cluster_ip.split(".")[1:])
          for app in ("a", "b")}

    def get(url):
        try:
            return urllib.request.urlopen(url, timeout=2).read().decode()
        except OSError:
            return None
    assert wait_until(lambda: get(f"http://{ip['a']}:8888/x"), 15) == "web-a /x"
    assert wait_until(lambda: get(f"http://{ip['b']}:8888/y"), 15) == "web-b /y"
    assert wait_until(lambda: get("http://127.0.0.1:29111/z"), 15) == "web-b /z"
    body = pcore.connect_get_namespaced_service_proxy_with_path("svc-a:http", "default", "hello",
                                                               _preload_content=False).data.decode()
    assert body == "web-a /hello"
    pcore.delete_namespaced_pod("web-a", "default", grace_period_seconds=0)
    with socket.create_connection((ip["a"], 8888), timeout=2) as s:     # no ready endpoint: closed at once
        s.settimeout(5)
        wait_until(lambda: get(f"http://{ip['a']}:8888/x") is None, 10)


def test_exec_and_port_forward_through_the_python_clients_streams(pcore):
    """`stream(connect_get_namespaced_pod_exec)` runs in the container (its files, env, hostname) and reports
    the exit code; `portforward` reaches the pod's port 8888 inside its own network namespace."""
    from kubernetes.stream import portforward, stream
    pcore.create_namespaced_pod("default", web_pod("shell", "s"))
    phase_is(pcore, "shell", "Running")
    wait_until(lambda: pcore.read_namespaced_pod("shell", "default").status.container_statuses[0].ready, 10)
    out = stream(pcore.connect_get_namespaced_pod_exec, "shell", "default", command=[
        "bash", "-c", "hostname; echo $HOSTNAME; ls -d /tmp; exit 4"], stderr=True, stdin=False, stdout=True,
        tty=False, _preload_content=False)
    out.run_forever(timeout=10)
    assert out.read_stdout() == "shell\nshell\n/tmp\n"
    assert out.returncode == 4
    # runc exec: the container's seccomp filter (RuntimeDefault, the node's default) holds the exec'd process
    out = stream(pcore.connect_get_namespaced_pod_exec, "shell", "default", command=[
        "bash", "-c", "grep ^Seccomp: /proc/self/status; unshare -U true 2>&1"], stderr=True, stdin=False,
        stdout=True, tty=False, _preload_content=False)
    out.run_forever(timeout=10)
    assert out.read_stdout().splitlines() == ["Seccomp:\t2", "unshare: unshare failed: Operation not permitted"]

    def fetch():     # Ready (no probe) comes before the server listens: a refused forward is tried again
        pf = portforward(pcore.connect_get_namespaced_pod_portforward, "shell", "default", ports="8888")
        sock = pf.socket(8888)
        sock.setblocking(True)
        try:
            sock.sendall(b"GET /pf HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionError:
            return None
        finally:
            sock.close()
        return data.decode()
    assert wait_until(fetch, 10).endswith("shell /pf")


def _mounts_of(uid: str) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if uid in line]


def test_etc_is_a_private_writable_layer_per_container_and_its_mounts_go_with_the_pod(pcore):
    """containerd's overlay snapshotter gives every container a writable root over the image
    (plugins/snapshots/overlay/overlay.go `createSnapshot`/`mounts`; internal/cri/server/container_create.go
    `WithNewSnapshot`): chpasswd in one container changes only that container's /etc/shadow, never the host's
    nor a sibling container's, and the layer's mounts are gone when the pod is."""
    if os.geteuid() != 0:
        pytest.skip("the writable layer needs root (without it /etc stays read-only and an Event says so)")
    with open("/etc/shadow", "rb") as f:
        host_shadow = f.read()
    writer = ("printf 'root:layer-test-pw\\n' | chpasswd -c SHA512 && echo marked > /etc/skiff-layer && "
              "grep -c '^root:\\$6\\$' /etc/shadow && cat /etc/skiff-layer && touch /shared/done && sleep 30")
    reader = ("until test -e /shared/done; do sleep 0.05; done; "
              "test -e /etc/skiff-layer && echo visible || echo private; sleep 30")
    shared = [{"name": "shared", "mountPath": "/shared"}]
    pcore.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "layer"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                 "volumes": [{"name": "shared", "emptyDir": {}}], "containers": [
                     {"name": "writer", "image": "debian:12", "command": ["bash", "-c", writer],
                      "volumeMounts": shared},
                     {"name": "reader", "image": "debian:12", "command": ["bash", "-c", reader],
                      "volumeMounts": shared}]}})
    uid = phase_is(pcore, "layer", "Running").metadata.uid
    wait_until(lambda: "marked" in log(pcore, "layer", container="writer"), 10, what="writer's output")
    assert log(pcore, "layer", container="writer").splitlines() == ["1", "marked"]
    wait_until(lambda: log(pcore, "layer", container="reader"), 10, what="reader's output")
    assert log(pcore, "layer", container="reader").splitlines() == ["private"]
    with open("/etc/shadow", "rb") as f:
        assert f.read() == host_shadow
    assert not os.path.exists("/etc/skiff-layer")
    assert len([m for m in _mounts_of(uid) if " overlay " in m]) == 2        # one layer per container
    pcore.delete_namespaced_pod("layer", "default", grace_period_seconds=0)
    wait_until(lambda: not pcore.list_namespaced_pod("default", field_selector="metadata.name=layer").items, 10)
    wait_until(lambda: not _mounts_of(uid), 10, what="the pod's layer mounts taken down")


def test_a_read_only_host_path_shows_the_host_file_and_run_is_a_private_writable_tmpfs(pcore):
    """A hostPath every container mounts readOnly runs (the host's files are the image here: the instance's
    /etc/localtime); /run is empty and writable per container (sshd makes /run/sshd), the host's untouched."""
    with open("/etc/hostname") as f:
        host_name = f.read().strip()
    script = ("cat /hostname; { echo x > /hostname; } 2>/dev/null || echo read-only; ls -A /run; "
              "mkdir /run/sshd && echo made")
    pcore.create_namespaced_pod("default", pod(
        "hpro", ["bash", "-c", script], volumes=[{"name": "h", "hostPath": {"path": "/etc/hostname", "type": "File"}}],
        container={"volumeMounts": [{"name": "h", "mountPath": "/hostname", "readOnly": True}]}))
    phase_is(pcore, "hpro", "Succeeded")
    assert log(pcore, "hpro").splitlines() == [host_name, "read-only", "made"]


def test_without_root_the_layer_is_not_mounted_and_says_why(tmp_path):
    """Not root (here: a process as `nobody`): no overlay can be mounted, so /etc stays the host's, read-only,
    and `problem` carries the text of the pod's WritableLayerUnavailable Event: never a silent pretend."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root to drop to nobody (setpriv)")
    tmp_path.chmod(0o777)
    code = ("import sys; from kubesim.kubelet.procrt.layers import Layer; layer = Layer(sys.argv[1]); "
            "print(layer.mount(), layer.problem)")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                           "-c", code, str(tmp_path / "layer")], capture_output=True, text=True, timeout=60, cwd=repo)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.strip() == ("[] /etc read-only: kubesim is not root, so it cannot mount a container's "
                                   "writable layer (overlayfs); writes there fail")
