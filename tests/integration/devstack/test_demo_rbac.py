"""The demo's cluster has access control (issue 29 item 2): kubesim enforcing RBAC over HTTPS, Skiff's RBAC
installed and the example platform file synced as Skiff's ServiceAccount (what ``make demo`` does through
``Stack(rbac=True, people=...)``), and each demo user's kubeconfig from ``devstack.people`` (tokens loaded the way
``--token-auth-file`` loads them). Debian's kubectl then tells each person what docs/platform-owner-guide.md says
a member may do: read the team's work and logs; no Secrets, no writes, no exec; nothing in another team."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from kubernetes import config

from devstack.airflow_env import REPO
from devstack.people import token_file, write_kubeconfigs
from devstack.rbac import install_skiff_rbac
from kubesim.server import KubeSim
from operators.k8s import Kube

KUBECTL = REPO / ".tools" / "kubernetes-client" / "usr" / "bin" / "kubectl"


@pytest.fixture(scope="module")
def people(tmp_path_factory):
    from operators.platform import example_path, load_platform
    from operators.platform.sync import sync_cluster

    if not KUBECTL.is_file():
        pytest.fail(f"Debian's kubectl is not unpacked at {KUBECTL}: run `make kubectl`")
    tmp = tmp_path_factory.mktemp("demo-rbac")
    sim = KubeSim(authz="rbac", tls=True).start()
    try:
        admin = sim.write_kubeconfig(tmp / "admin.kubeconfig")
        skiff = install_skiff_rbac(admin, tmp / "skiff.kubeconfig")
        with config.new_client_from_config(str(skiff)) as as_skiff:  # platform_sync, as Skiff's ServiceAccount
            report = sync_cluster(Kube(as_skiff), load_platform(example_path()), quota_timeout=10)
        assert not report.errors, report.errors
        text, tokens = token_file(["alice", "bob", "carol"])
        (tmp / "tokens.csv").write_text(text)
        sim.access.load_token_auth_file(tmp / "tokens.csv")
        yield {"admin": admin, **write_kubeconfigs(admin, tokens, tmp)}, tmp
    finally:
        sim.stop()


def _kubectl(people, user: str, *args: str) -> subprocess.CompletedProcess:
    kubeconfigs, tmp = people
    env = {**os.environ, "KUBECONFIG": str(kubeconfigs[user]), "HOME": str(tmp / f"home-{user}")}
    return subprocess.run([str(KUBECTL), *args], capture_output=True, text=True, env=env, timeout=120)


def _can(people, user: str, *args: str) -> bool:
    done = _kubectl(people, user, "auth", "can-i", *args)
    assert done.stdout.strip() in ("yes", "no"), done.stdout + done.stderr
    return done.stdout.strip() == "yes"


@pytest.mark.parametrize(("user", "args", "allowed"), [
    ("bob", ("get", "pods", "-n", "recsys"), True),            # read the team's work
    ("bob", ("get", "pods/log", "-n", "recsys"), True),        # and its logs
    ("bob", ("list", "jobs.batch", "-n", "recsys"), True),
    ("bob", ("delete", "persistentvolumeclaims", "-n", "recsys"), False),  # issue 29: it said yes
    ("bob", ("list", "secrets", "-n", "recsys"), False),       # no Secrets (the instances' passwords)
    ("bob", ("create", "pods", "-n", "recsys"), False),        # no writes (a pod could mount any Secret)
    ("bob", ("create", "pods/exec", "-n", "recsys"), False),   # no exec into a teammate's instance
    ("bob", ("get", "pods", "-n", "nlp"), False),              # not his team
    ("alice", ("get", "pods", "-n", "nlp"), True),             # alice is in nlp too
    ("alice", ("delete", "jobs.batch", "-n", "recsys"), False),  # a team admin reads, like a member
    # not even into her own instance (docs/dev-instances.md "Your shell": ssh and JupyterLab's terminal are that shell)
    ("alice", ("create", "pods/alice--notebook-0", "--subresource=exec", "-n", "recsys"), False),
    ("alice", ("create", "pods/portforward", "-n", "recsys"), False),
    ("carol", ("get", "pods", "-n", "recsys"), False),
    ("admin", ("delete", "persistentvolumeclaims", "-n", "recsys"), True),  # the cluster admin's kubeconfig
])
def test_kubectl_shows_each_person_what_the_platform_owner_guide_says(people, user, args, allowed):
    assert _can(people, user, *args) is allowed


def test_a_persons_requests_are_theirs_not_anonymous(people):
    """issue 29: `auth whoami` said system:anonymous. Debian's kubectl 1.20 has no whoami; the 403 names the user."""
    done = _kubectl(people, "bob", "get", "secrets", "-n", "recsys")
    assert done.returncode != 0 and 'User "bob" cannot list resource "secrets"' in done.stderr, done.stderr
    assert "system:anonymous" not in done.stderr
    assert Path(people[0]["bob"]).stat().st_mode & 0o077 == 0  # the kubeconfig holds bob's token: his alone


def test_a_team_admin_and_a_member_may_do_the_same_with_kubectl_as_the_instance_guide_and_the_demo_say(people):
    """issue 36: alice (recsys admin) and bob (member) get the same `auth can-i --list`, which surprised a user:
    it is the platform's decision (they differ in Skiff, not in kubectl), and the instance guide and the demo's
    output say so, with why an owner has no exec."""
    from devstack.__main__ import ROLE_LINES

    lists = {u: _kubectl(people, u, "auth", "can-i", "--list", "-n", "recsys") for u in ("alice", "bob")}
    assert all(d.returncode == 0 for d in lists.values()), {u: d.stderr for u, d in lists.items()}
    assert lists["alice"].stdout == lists["bob"].stdout and "pods/log" in lists["bob"].stdout
    assert "pods/exec" not in lists["alice"].stdout
    guide = (REPO / "docs" / "dev-instances.md").read_text()
    section = guide.split("### Your shell", 1)[1].split("\n### ", 1)[0]
    for words in ("no `exec`", "not even", "your own instance", "team admin", "stop, start and delete",
                  "tests/integration/devstack/test_demo_rbac.py"):
        assert words in section, words
    said = " ".join(ROLE_LINES)
    assert "no exec" in said and "not even" in said and "stop, start and delete" in said
