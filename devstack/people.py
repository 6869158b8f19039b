"""People on the stack's cluster: a bearer token each (kube-apiserver's ``--token-auth-file``) and a kubeconfig each.

On a real cluster people log in through the site's OIDC or certificates; the demo's kubesim reads a token file as
kube-apiserver does, so ``kubectl`` as alice or bob is exactly what RBAC lets *them* do: the RoleBindings
``platform_sync`` makes (``skiff-admins``/``skiff-members`` to ClusterRole ``skiff-member``,
docs/platform-owner-guide.md). The admin's kubeconfig stays kubesim's own (``system:masters``). kubectl sends a
token only over TLS, so the stack's kubesim serves HTTPS when it has people (``Stack(tls=True)``).
"""

from __future__ import annotations

import csv
import io
import secrets
from pathlib import Path

import yaml

from kubesim.kubeconfig import write_private


def token_file(users: list[str]) -> tuple[str, dict[str, str]]:
    """The CSV text of a token auth file (``token,user,uid``) and each user's token (fresh, 192 bits)."""
    tokens = {u: secrets.token_urlsafe(24) for u in users}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for user, token in tokens.items():
        writer.writerow([token, user, f"uid-{user}"])
    return out.getvalue(), tokens


def person_kubeconfig(admin_kubeconfig: dict, user: str, token: str, namespace: str | None = None) -> dict:
    """The admin's kubeconfig (server, CA) with ``user``'s token instead of the admin's."""
    cfg = yaml.safe_load(yaml.safe_dump(admin_kubeconfig))  # a deep copy
    cfg["users"] = [{"name": user, "user": {"token": token}}]
    for ctx in cfg["contexts"]:
        ctx["context"]["user"] = user
        if namespace:
            ctx["context"]["namespace"] = namespace
    return cfg


def write_kubeconfigs(admin_kubeconfig: Path, tokens: dict[str, str], out_dir: Path,
                      namespaces: dict[str, str] | None = None, names: dict[str, str] | None = None) -> dict[str, Path]:
    """``<out_dir>/<user>.kubeconfig`` (or ``names[user]``) for each token's user, mode 0600: it holds the token.
    Also Skiff's ServiceAccount's (devstack/rbac.py)."""
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    paths = {}
    for user, token in tokens.items():
        path = out_dir / (names or {}).get(user, f"{user}.kubeconfig")
        write_private(path, yaml.safe_dump(person_kubeconfig(admin, user, token, (namespaces or {}).get(user)),
                                           sort_keys=False))
        paths[user] = path
    return paths
