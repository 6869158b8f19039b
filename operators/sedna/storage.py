"""How Sedna workers reach their Models and Datasets: volumes, the storage initializer and S3 credentials.

Pure functions, after kubeedge/sedna ``pkg/globalmanager/runtime`` (storage_initializer_injector.go,
secret_injector.go): a node path becomes a hostPath volume, an s3:// or http(s):// URL is downloaded by the
storage-initializer init container, and a Secret named by ``credentialName`` gives the initializer and the
worker the S3 keys — by ``secretKeyRef`` (Sedna copies the values into the pod; Skiff never does).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from operators.templating import render

# Sedna's URL handling (runtime/storage_initializer_injector.go)
HOST_PATH_PREFIX = "/home/data"
DOWNLOAD_PREFIX = "/downloads"
DOWNLOAD_VOLUME = "sedna-storage-initializer"
DOWNLOAD_SCHEMES = ("s3", "http", "https")
# Sedna's S3 credentials (runtime/secret_injector.go): Secret data keys = env names, endpoint annotations
S3_SECRET_KEYS = ("ACCESS_KEY_ID", "SECRET_ACCESS_KEY")
S3_ENDPOINT_ENV = "S3_ENDPOINT_URL"
S3_ENDPOINT_ANNOTATION = "s3-endpoint"
S3_USE_HTTPS_ANNOTATION = "s3-usehttps"


@lru_cache(maxsize=4096)  # pure; called for every mount of every pod rendered
def convert_k8s_valid_name(name: str) -> str:
    """runtime.ConvertK8SValidName: a DNS-1123 label made from a host path (Sedna's volume names)."""
    fixed: list[str] = []
    for c in name.lower():
        if c.isascii() and (c.isalnum() or c == "-"):
            fixed.append(c)
        elif fixed and fixed[-1] != "-":
            fixed.append("-")
    fixed = fixed[:63]
    if fixed and fixed[-1] == "-":
        fixed[-1] = "z"
    return "".join(fixed) or "sedna-default-volume-name"


@dataclass(frozen=True)
class Credential:
    """S3 keys from a Secret (a Model's, Dataset's or transmitter's ``credentialName``), as Sedna reads them
    (runtime/secret_injector.go): data keys ``ACCESS_KEY_ID`` and ``SECRET_ACCESS_KEY``, endpoint from the
    Secret's ``s3-endpoint`` annotation (https unless ``s3-usehttps: "0"``). Only the Secret's name and the
    endpoint are kept: the keys reach the containers through ``secretKeyRef``, never copied into the pod."""

    secret: str
    endpoint_url: str | None

    def env(self) -> dict[str, str | dict]:
        out: dict[str, str | dict] = {S3_ENDPOINT_ENV: self.endpoint_url} if self.endpoint_url else {}
        for key in S3_SECRET_KEYS:
            out[key] = {"secretKeyRef": {"name": self.secret, "key": key}}
        return out


@dataclass(frozen=True)
class Mount:
    """A Model/Dataset URL and the env var that tells the worker where it is (runtime.WorkerMount)."""

    env_name: str
    url: str
    credential: Credential | None = None  # used for s3:// URLs, as in Sedna


def _split_dir(path: str) -> str:
    """Go's filepath.Split directory part: everything up to and including the last slash."""
    return path[: path.rfind("/") + 1]


def inject_mounts(pod_spec: dict, mounts: list[Mount]) -> dict[str, str]:
    """runtime.InjectStorageInitializer, for URLs downloaded by the initializer (Sedna >= 0.4).

    * a plain path ("/model/frozen.pb") is on the node: its directory is a hostPath volume mounted under
      /home/data, and the env var points at /home/data/model/frozen.pb (plus DATA_PATH_PREFIX);
    * s3:// and http(s):// URLs are fetched by the storage-initializer init container into an emptyDir
      mounted read-only at /downloads; the env var points at /downloads/<host><path>;
    * any other scheme is passed through unchanged in the env var (the worker reads it itself).
    An s3:// URL with a credential gives the initializer and the worker ``S3_ENDPOINT_URL`` and the Secret's
    ``ACCESS_KEY_ID`` / ``SECRET_ACCESS_KEY`` through ``secretKeyRef``.
    Mutates ``pod_spec``; returns the env vars to inject.
    """
    env: dict[str, str] = {}
    host_volumes: dict[str, str] = {}  # volume name -> host dir
    host_mounts: list[tuple[str, str]] = []
    downloads: list[str] = []
    secret_env: dict[str, str | dict] = {}  # first credential wins per env name (runtime.MergeSecretEnvs)
    for m in mounts:
        u = urlsplit(m.url)
        if m.credential and u.scheme == "s3":
            secret_env = {**m.credential.env(), **secret_env}
        if u.scheme in DOWNLOAD_SCHEMES:
            container_path = posixpath.join(DOWNLOAD_PREFIX, u.netloc + u.path)
            downloads += [m.url, _split_dir(container_path)]
            env[m.env_name] = container_path
        elif u.scheme == "":
            host_dir = _split_dir(m.url)
            container_path = posixpath.join(HOST_PATH_PREFIX, u.path.lstrip("/"))
            volume = convert_k8s_valid_name(host_dir)
            host_volumes.setdefault(volume, host_dir)
            if (volume, _split_dir(container_path)) not in host_mounts:  # Model and Dataset in one dir
                host_mounts.append((volume, _split_dir(container_path)))
            env[m.env_name] = container_path
        else:
            env[m.env_name] = m.url
    containers = pod_spec["containers"]
    volumes = pod_spec.setdefault("volumes", [])
    if downloads:
        pod_spec.setdefault("initContainers", []).append(
            render("sedna/storage-initializer.yaml.j2", args=downloads, secret_env=_env_list(secret_env))
        )
        volumes.append({"name": DOWNLOAD_VOLUME, "emptyDir": {}})
        for c in containers:
            c.setdefault("volumeMounts", []).append(
                {"name": DOWNLOAD_VOLUME, "mountPath": DOWNLOAD_PREFIX, "readOnly": True}
            )
    for volume, host_dir in host_volumes.items():
        volumes.append({"name": volume, "hostPath": {"path": host_dir, "type": "Directory"}})
    for volume, mount_path in host_mounts:
        for c in containers:
            c.setdefault("volumeMounts", []).append({"name": volume, "mountPath": mount_path})
    if host_mounts:
        env["DATA_PATH_PREFIX"] = HOST_PATH_PREFIX
    if not volumes:
        del pod_spec["volumes"]
    return {**env, **secret_env}  # the worker gets the keys too (it writes models / aggregation data)


def _env_list(env: Mapping[str, str | dict]) -> list[dict]:
    """Env entries: a str is a ``value``, a dict a ``valueFrom`` (a Secret's key, never its value)."""
    return [{"name": k, "valueFrom": v} if isinstance(v, dict) else {"name": k, "value": str(v)}
            for k, v in env.items()]


def inject_env(pod_spec: dict, env: Mapping[str, str | dict]) -> None:
    """Append the system env vars to every container, after the user's (runtime.injectWorkerParam).

    A user env var with the same name as a system one is replaced: the system value wins, as in Sedna
    (where the later duplicate wins in the container runtime), without sending duplicates to the API.
    """
    for c in pod_spec["containers"]:
        user = [e for e in c.get("env") or [] if e.get("name") not in env]
        c["env"] = user + _env_list(env)


def secret_summary(secret: dict) -> dict:
    """What the reconcile keeps of a Secret: its key names and the S3 endpoint annotations, never a value."""
    ann = (secret.get("metadata") or {}).get("annotations") or {}
    return {"keys": sorted({*(secret.get("data") or {}), *(secret.get("stringData") or {})}),
            "annotations": {k: ann[k] for k in (S3_ENDPOINT_ANNOTATION, S3_USE_HTTPS_ANNOTATION) if k in ann}}


def credential_names(obj: dict) -> list[str]:
    """The Secrets a Model, Dataset or FederatedLearningJob names (spec.credentialName, transmitter.s3)."""
    spec = obj.get("spec") or {}
    names = [spec.get("credentialName"), ((spec.get("transmitter") or {}).get("s3") or {}).get("credentialName")]
    return [n for n in names if isinstance(n, str) and n]
