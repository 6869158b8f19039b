"""Development instances really serve on kubesim's process nodes (kubesim/kubelet/procrt): the objects Skiff renders
(operators.devinstances.lifecycle) run the real start-up script, and through the ingress-nginx tcp-services
ports on this machine's loopback JupyterLab takes the revealed password (and only it), ssh logs in with it, a
file written through JupyterLab lands in the home volume's directory and survives stop/start, and two
instances both listening on 8888 do not clash. No Airflow: the real `kubernetes` client on kubesim."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest
import requests
from kubernetes import client

from kubesim import KubeSim
from kubesim.testing import sync_api_client, wait_until
from operators.devinstances import inventory, lifecycle
from operators.devinstances.ports import PortRange
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from tests.support.devinstances.devinstance_support import make_request, wait_no_pod, wait_ready

TEAM = "recsys"
NODES = [{"name": "proc-1", "runtime": "process", "cpu": 8, "memory": "32Gi", "images": {"*": sys.prefix}}]
# loopback ports of this run: other test runs and the demo share the machine (the default 20000-29999 range),
# and the kernel's ephemeral ports start at 32768
_LOW = 11000 + (os.getpid() % 80) * 100
SETTINGS = Settings(host="127.0.0.1", port_range=PortRange(_LOW, _LOW + 99))
READY_S = 120            # JupyterLab + TensorBoard + sshd starting on a loaded 2-core machine

pytestmark = pytest.mark.skipif(not (shutil.which("bwrap") and shutil.which("sshpass") and os.geteuid() == 0),
                                reason="needs bubblewrap, sshpass (make test installs them) and root (/etc layer)")


@pytest.fixture(scope="module")
def cluster():
    """A process-node kubesim with alice's and bob's instances running (both listen on 8888 in their pods)."""
    sim = KubeSim(nodes=NODES).start()
    api = sync_api_client(sim.url)
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": TEAM}})
    for claim in ("alice-home", "bob-home", "datasets"):
        core.create_namespaced_persistent_volume_claim(TEAM, {"metadata": {"name": claim}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    for owner in ("alice", "bob"):
        lifecycle.create(Kube(api), make_request(owner=owner), SETTINGS)
    for owner in ("alice", "bob"):
        wait_ready(api, owner, "nb", TEAM, timeout=READY_S)
    yield sim, api
    api.close()
    sim.stop()


def _view(api, owner: str):
    (view,) = inventory.list_instances(Kube(api), owner, SETTINGS)
    return view


def _password(api, owner: str) -> str:
    return inventory.password(Kube(api), owner, TEAM, "nb", caller=owner)


def _login(url: str, password: str) -> requests.Session:
    """As a browser does: GET /login sets the _xsrf cookie, the form POSTs it with the password."""
    s = requests.Session()
    s.get(url + "login", timeout=30).raise_for_status()
    s.post(url + "login", data={"password": password, "_xsrf": s.cookies["_xsrf"]}, timeout=30,
           allow_redirects=False)
    return s


def _contents(s: requests.Session, url: str, path: str = "") -> requests.Response:
    return s.get(url + "api/contents/" + path, timeout=30)


def _mounts_of(uid: str) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line for line in f if uid in line]


def _ssh(port: int, password: str, command: str) -> subprocess.CompletedProcess:
    """Debian's ssh with the password from the environment (sshpass -e: never on a command line)."""
    return subprocess.run(
        ["sshpass", "-e", "ssh", "-F", "/dev/null", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "PubkeyAuthentication=no", "-o", "LogLevel=ERROR",
         "-o", "PreferredAuthentications=password,keyboard-interactive", "-o", "ConnectTimeout=20",
         "-p", str(port), "root@127.0.0.1", command],
        env={**os.environ, "SSHPASS": password}, capture_output=True, text=True, timeout=60, check=False)


def test_jupyterlab_answers_on_its_loopback_port_and_takes_only_its_own_password(cluster):
    """Two instances both on 8888 in their pods: each answers on its own tcp-services port; a login with its
    revealed password opens the contents API, a wrong one and the other owner's do not."""
    _sim, api = cluster
    urls = {owner: _view(api, owner).urls["jupyter"] for owner in ("alice", "bob")}
    assert urls["alice"] != urls["bob"] and all(u.startswith("http://127.0.0.1:") for u in urls.values())
    for owner, other in (("alice", "bob"), ("bob", "alice")):
        session = _login(urls[owner], _password(api, owner))
        listing = _contents(session, urls[owner])
        assert listing.status_code == 200 and listing.json()["type"] == "directory"
        for wrong in ("not-the-password", _password(api, other)):
            assert _contents(_login(urls[owner], wrong), urls[owner]).status_code == 403
    assert _contents(requests.Session(), urls["alice"]).status_code == 403       # no login at all


def test_ssh_with_the_revealed_password_opens_a_shell_in_the_instance(cluster):
    _sim, api = cluster
    port = _view(api, "alice").ports["ssh"]
    done = _ssh(port, _password(api, "alice"), "hostname; pwd")
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split() == ["alice--nb-0", "/root"]
    assert _ssh(port, "not-the-password", "true").returncode != 0
    # the container's environment, as kubectl exec and JupyterLab's terminal have it (issue 36: over ssh `python`
    # was not found and PATH was sshd's): the image's python first, the pod's variables, never the password;
    # a command (sshd's SetEnv) and a login shell (whose /etc/profile resets PATH: /etc/profile.d) alike
    show = 'command -v python; echo "$HADOOP_USER"; echo "${PASSWORD:-no password}"'
    for command in (show, f"bash -lc '{show}'"):
        done = _ssh(port, _password(api, "alice"), command)
        assert done.returncode == 0, done.stderr[-500:]
        assert done.stdout.split("\n")[:3] == [os.path.join(sys.prefix, "bin", "python"), "alice", "no password"], (
            command, done.stdout)


def test_a_file_written_through_jupyterlab_is_in_the_home_volume_and_survives_stop_start(cluster):
    sim, api = cluster
    url = _view(api, "alice").urls["jupyter"]
    old = _password(api, "alice")
    session = _login(url, old)
    put = session.put(url + "api/contents/kept.txt", json={"type": "file", "format": "text", "content": "kept\n"},
                      headers={"X-XSRFToken": session.cookies["_xsrf"]}, timeout=30)
    assert put.status_code in (200, 201), put.text[:300]
    pvc = client.CoreV1Api(api).read_namespaced_persistent_volume_claim("alice-home", TEAM)
    pv_root = os.path.join(sim.cluster.kubelet.procs.dirs.state_dir, "pv")
    (found,) = glob.glob(os.path.join(pv_root, "*", "kept.txt"))
    assert os.path.basename(os.path.dirname(found)) in (pvc.spec.volume_name, f"pvc-{pvc.metadata.uid}")
    with open(found) as f:
        assert f.read() == "kept\n"

    uid = client.CoreV1Api(api).read_namespaced_pod("alice--nb-0", TEAM).metadata.uid
    assert _mounts_of(uid)                  # its container's writable /etc
    lifecycle.stop(Kube(api), "alice", TEAM, "nb")
    wait_no_pod(api, "alice", "nb", TEAM, timeout=60)
    wait_until(lambda: not _mounts_of(uid), 10, what="the stopped pod's layer mounts taken down")
    lifecycle.start(Kube(api), "alice", TEAM, "nb")
    wait_ready(api, "alice", "nb", TEAM, timeout=READY_S)
    new = _password(api, "alice")
    assert new != old
    url = _view(api, "alice").urls["jupyter"]
    got = wait_until(lambda: _contents(_login(url, new), url, "kept.txt"), 30, what="kept.txt after start")
    assert got.status_code == 200 and got.json()["content"] == "kept\n"
    assert _contents(_login(url, old), url, "kept.txt").status_code == 403
    port = _view(api, "alice").ports["ssh"]
    assert _ssh(port, old, "true").returncode != 0
    done = _ssh(port, new, "cat /root/kept.txt")
    assert done.returncode == 0 and done.stdout == "kept\n", done.stderr[-500:]
