"""Kubeconfig files pointing a client at kubesim: the shape `kubectl config view` prints (clientcmd's
v1 Config, k8s.io/client-go/tools/clientcmd/api/v1/types.go), one cluster, one token user, one context.
A kubeconfig holds a bearer token: it is written 0600 from its first byte (`write_private`), as kubectl's own
`~/.kube/config` is."""
from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml


def kubeconfig(url: str, token: str = "kubesim", user: str = "kubesim", namespace: str = "default",
               ca_pem: bytes | None = None) -> dict:
    """A kubeconfig for `url`; the default token is kubesim's admin (see kubesim.apiserver.auth.authz); `ca_pem`: the server's
    certificate when it serves HTTPS (kubesim.tls)."""
    cluster = {"server": url}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "kubesim", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "kubesim", "context": {"cluster": "kubesim", "user": user,
                                                     "namespace": namespace}}],
        "current-context": "kubesim",
    }


def write_private(path, text: str) -> Path:
    """Write `text` to a file only its owner may read or write (0600), created so (no moment at the umask's
    0644) and made so if it existed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(fd, 0o600)
        f.write(text)
    return path


def write_kubeconfig(url: str, path, **kw) -> Path:
    return write_private(path, yaml.safe_dump(kubeconfig(url, **kw), sort_keys=False))
