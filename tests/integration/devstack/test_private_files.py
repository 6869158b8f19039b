"""Issue 38: what the stacks write that holds a credential is readable by its owner only (0600), from its first
byte: kubesim's kubeconfig (`python -m kubesim --kubeconfig`, KubeSim.write_kubeconfig), the people's
kubeconfigs and the token auth file (devstack/people.py, stack.py), the monitoring token (monitoring.py): all
through `kubesim.kubeconfig.write_private`. A file left 0644 by an older stack is made 0600 when rewritten."""
from __future__ import annotations

import stat
import subprocess
import sys

from devstack.people import token_file, write_kubeconfigs
from kubesim.kubeconfig import write_kubeconfig, write_private
from kubesim.testing import wait_until


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_credentials_are_written_0600(tmp_path):
    old = tmp_path / "admin.kubeconfig"
    old.write_text("left by an older stack")
    old.chmod(0o644)
    admin = write_kubeconfig("http://127.0.0.1:1", old, token="secret")
    assert _mode(admin) == 0o600 and "secret" in admin.read_text()
    text, tokens = token_file(["alice", "bob"])
    assert _mode(write_private(tmp_path / "tokens.csv", text)) == 0o600
    people = write_kubeconfigs(admin, tokens, tmp_path)
    assert {u: _mode(p) for u, p in people.items()} == {"alice": 0o600, "bob": 0o600}


def test_the_kubesim_process_writes_its_kubeconfig_0600(tmp_path):
    path = tmp_path / "kubeconfig"
    proc = subprocess.Popen([sys.executable, "-m", "kubesim", "--port", "0", "--kubeconfig", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: path.exists() and path.stat().st_size > 0, 30, what="kubesim's kubeconfig")
        assert _mode(path) == 0o600
    finally:
        proc.terminate()
        proc.wait(10)
