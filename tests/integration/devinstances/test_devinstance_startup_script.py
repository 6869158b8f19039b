"""The start-up script for real, on this machine: the script shipped in the instance's ConfigMap runs in a
temporary directory with JupyterLab and TensorBoard from PyPI, Debian's sshd and (when installed from npm)
code-server, with the password read back from the instance's Secret on kubesim.

Needs root (sshd and chpasswd do) and Debian's openssh-server (``make test`` installs it). code-server comes
from ``make code-server`` (npm); where it is not installed that part alone is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import requests
from kubernetes import client

from devstack.ports import free_port
from kubesim.testing import wait_until
from operators.devinstances import idle, inventory, lifecycle, naming
from operators.devinstances.settings import Settings
from operators.k8s import Kube
from tests.support.devinstances.devinstance_support import NS, make_request

REPO = Path(__file__).resolve().parents[3]
CODE_SERVER_DIRS = [REPO / ".tools" / "code-server" / "node_modules" / ".bin"]
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(os.geteuid() != 0, reason="sshd and chpasswd need root"),
    pytest.mark.skipif(not Path(SSHD).exists(), reason="Debian's openssh-server is not installed (make test does)"),
]


def code_server_bin() -> str | None:
    for d in CODE_SERVER_DIRS:
        if (d / "code-server").exists():
            return str(d)
    found = shutil.which("code-server")
    return str(Path(found).parent) if found else None


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.ConnectionError:
        return False


def _response(url: str) -> tuple[requests.Response] | None:
    """(the response,) once ``url`` answers at all (a Response is false for an error status)."""
    try:
        return (requests.get(url, timeout=2),)
    except requests.ConnectionError:
        return None


def jupyter_login(base: str, password: str) -> tuple[int, int]:
    """(status of POST /login, status of GET /api/status with the session it got)."""
    session = requests.Session()
    session.get(f"{base}/login", timeout=5)
    posted = session.post(f"{base}/login", data={"password": password, "_xsrf": session.cookies.get("_xsrf")},
                          allow_redirects=False, timeout=10)
    return posted.status_code, session.get(f"{base}/api/status", timeout=5).status_code


@pytest.fixture
def instance(k8s, team, tmp_path):
    """A created instance on kubesim: (its password from the Secret, the script from its ConfigMap)."""
    lifecycle.create(Kube(k8s), make_request(), Settings())
    password = inventory.password(Kube(k8s), "alice", NS, "nb", caller="alice")
    cm = client.CoreV1Api(k8s).read_namespaced_config_map(naming.startup_configmap_name("alice", "nb"), NS)
    script = tmp_path / "start-notebook.sh"
    script.write_text(cm.data["start-notebook.sh"])
    return password, script


@pytest.fixture
def started(instance, tmp_path):
    password, script = instance
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc" / "shadow").write_text("root:*:20000:0:99999:7:::\n")
    (root / "etc" / "shadow").chmod(0o600)
    home = tmp_path / "home"
    home.mkdir()
    ports = {name: free_port() for name in ("JUPYTER_PORT", "CODE_SERVER_PORT", "SSH_PORT", "TENSORBOARD_PORT")}
    path = [str(Path(sys.executable).parent), os.environ.get("PATH", "/usr/bin:/bin")]
    cs = code_server_bin()
    if cs:
        path.insert(0, cs)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "JUPYTER"))},
           "PATH": ":".join(path), "HOME": str(home), "PASSWORD": password, "SKIFF_HOME": str(home),
           "SKIFF_RUN_DIR": str(tmp_path / "run"), "SKIFF_PASSWD_ROOT": str(root),
           **{k: str(v) for k, v in ports.items()}}
    log = (tmp_path / "start.log").open("wb")
    proc = subprocess.Popen(["bash", str(script)], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        yield password, ports, root, proc, tmp_path / "start.log", cs
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def test_startup_script_serves_everything_behind_the_secrets_password(started):
    password, ports, root, proc, log, cs = started
    jupyter = f"http://127.0.0.1:{ports['JUPYTER_PORT']}"
    wait_until(lambda: proc.poll() is not None or answers(f"{jupyter}/login"), 90, interval=0.2,
               what="JupyterLab answering")
    assert proc.poll() is None, log.read_text()[-3000:]
    # JupyterLab: the Secret's password logs in, a wrong one is refused
    assert jupyter_login(jupyter, password) == (302, 200)
    assert jupyter_login(jupyter, password + "x") == (401, 403)
    # the idle signal the culler reads is served without a login, and parses
    metrics = requests.get(f"{jupyter}/metrics", timeout=5)
    assert metrics.status_code == 200 and idle.last_activity(metrics.text) is not None
    # TensorBoard answers on its port
    wait_until(lambda: answers(f"http://127.0.0.1:{ports['TENSORBOARD_PORT']}/"), 60, interval=0.2,
               what="TensorBoard answering")
    # sshd answers, and root's password (chpasswd) is the Secret's
    with socket.create_connection(("127.0.0.1", ports["SSH_PORT"]), timeout=10) as s:
        assert s.recv(64).startswith(b"SSH-2.0-OpenSSH")
    hashed = (root / "etc" / "shadow").read_text().split(":")[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    assert crypt.crypt(password, hashed) == hashed and crypt.crypt("wrong", hashed) != hashed
    # the password never reaches a command line (visible to every process on the machine)
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert password not in out
    if not cs:  # the VS Code link opens a page saying why, not "site can't be reached"
        assert "code-server is not installed in this image" in log.read_text()
        (note,) = wait_until(lambda: _response(f"http://127.0.0.1:{ports['CODE_SERVER_PORT']}/"), 60, interval=0.2,
                          what="the code-server note answering")
        assert note.status_code == 503 and "VS Code in the browser is not available" in note.text


@pytest.mark.skipif(code_server_bin() is None,
                    reason="code-server is not installed (make code-server installs it from npm)")
def test_code_server_takes_the_same_password(started):
    password, ports, _, proc, log, _ = started
    code = f"http://127.0.0.1:{ports['CODE_SERVER_PORT']}"
    wait_until(lambda: proc.poll() is not None or answers(f"{code}/login"), 90, interval=0.2,
               what="code-server answering")
    assert proc.poll() is None, log.read_text()[-3000:]
    good = requests.post(f"{code}/login", data={"password": password}, allow_redirects=False, timeout=10)
    bad = requests.post(f"{code}/login", data={"password": "wrong"}, allow_redirects=False, timeout=10)
    assert good.status_code == 302 and "code-server-session" in good.headers.get("Set-Cookie", "")
    assert bad.status_code != 302 and "code-server-session" not in bad.headers.get("Set-Cookie", "")


def test_the_script_refuses_to_start_without_a_password(instance, tmp_path):
    _, script = instance
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SKIFF_RUN_DIR": str(tmp_path / "run")}
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "PASSWORD is not set" in done.stderr
    assert not (tmp_path / "run").exists()
