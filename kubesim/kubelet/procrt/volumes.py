"""A pod's volumes as directories on the node, and the files of the configuration volumes. The file sets
are pure (`config_files`); `VolumeDirs` writes them.

Upstream: pkg/volume/configmap/configmap.go and pkg/volume/secret/secret.go (`MakePayload`: all keys, or only
`items` with their `path` and `mode`; `defaultMode` 0644; a missing key of a listed item is an error unless
optional), pkg/volume/downwardapi/downwardapi.go (`CollectData`: fieldRef and resourceFieldRef items),
pkg/volume/projected/projected.go (the sources together, one `defaultMode`), pkg/volume/emptydir (a
directory per pod, removed with it) and the PV a claim is bound to (here a directory under kubesim's state
directory that outlives the pod and goes with a reclaimPolicy Delete PV).
"""
from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable

from kubesim.kubelet.procrt.env import ConfigError, field_value, resource_value

DEFAULT_MODE = 0o644
REFUSED = ("hostPath",)        # the node's own files: refused on process nodes unless read-only (docs/development.md)
Lookup = Callable[[str, str, str], dict | None]


def _data(obj: dict, kind: str) -> dict[str, bytes]:
    if kind == "secrets":
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    out = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
    out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    return out


def _keyed(src: dict, kind: str, ns: str, lookup: Lookup, mode: int) -> dict[str, tuple[bytes, int]]:
    name = src.get("name") or src.get("secretName")
    obj = lookup(kind, ns, name)
    what = "configmap" if kind == "configmaps" else "secret"
    if obj is None:
        if src.get("optional"):
            return {}
        raise ConfigError(f'{what} "{name}" not found')
    data = _data(obj, kind)
    if not src.get("items"):
        return {k: (v, mode) for k, v in data.items()}
    out = {}
    for item in src["items"]:
        if item["key"] not in data:
            if src.get("optional"):
                continue
            raise ConfigError(f"configmap references non-existent config key: {item['key']}" if kind == "configmaps"
                              else f"references non-existent secret key: {item['key']}")
        out[item["path"]] = (data[item["key"]], item.get("mode", mode))
    return out


def _downward(items: list[dict], pod: dict, mode: int, allocatable: dict) -> dict[str, tuple[bytes, int]]:
    out = {}
    containers = {c["name"]: c for c in pod["spec"].get("containers") or []}
    for item in items:
        if item.get("fieldRef"):
            value = field_value(pod, item["fieldRef"].get("fieldPath", ""))
        else:
            ref = item.get("resourceFieldRef") or {}
            container = containers.get(ref.get("containerName")) or next(iter(containers.values()), {})
            value = resource_value(container, ref, allocatable)
        out[item["path"]] = (value.encode(), item.get("mode", mode))
    return out


def config_files(volume: dict, pod: dict, lookup: Lookup, allocatable: dict) -> dict[str, tuple[bytes, int]] | None:
    """The files of a configMap/secret/downwardAPI/projected volume ({relative path: (bytes, mode)}), or None
    for a volume that is a plain directory (emptyDir, persistentVolumeClaim)."""
    ns = pod["metadata"]["namespace"]
    if "configMap" in volume:
        src = volume["configMap"]
        return _keyed(src, "configmaps", ns, lookup, src.get("defaultMode", DEFAULT_MODE))
    if "secret" in volume:
        src = volume["secret"]
        return _keyed(src, "secrets", ns, lookup, src.get("defaultMode", DEFAULT_MODE))
    if "downwardAPI" in volume:
        src = volume["downwardAPI"]
        return _downward(src.get("items") or [], pod, src.get("defaultMode", DEFAULT_MODE), allocatable)
    if "projected" in volume:
        src = volume["projected"]
        mode = src.get("defaultMode", DEFAULT_MODE)
        out: dict[str, tuple[bytes, int]] = {}
        for s in src.get("sources") or []:
            if "configMap" in s:
                out.update(_keyed(s["configMap"], "configmaps", ns, lookup, mode))
            elif "secret" in s:
                out.update(_keyed(s["secret"], "secrets", ns, lookup, mode))
            elif "downwardAPI" in s:
                out.update(_downward(s["downwardAPI"].get("items") or [], pod, mode, allocatable))
            elif "serviceAccountToken" in s:
                # no token is minted for a process: the path exists, empty (docs/development.md)
                out[s["serviceAccountToken"].get("path", "token")] = (b"", mode)
        return out
    return None


def refused(volume: dict, mounts: list[dict]) -> str | None:
    """The source of a volume a process node refuses (hostPath), else None. A hostPath every container mounts
    `readOnly` is allowed: the host's files are the image here, already visible read-only (the instance's
    `/etc/localtime`); a writable one would let a pod write the node's files."""
    source = next((k for k in REFUSED if k in volume), None)
    if source and mounts and all(m.get("readOnly") for m in mounts):
        return None
    return source


def host_path(volume: dict) -> str | None:
    """The node's path of an allowed (read-only) hostPath volume, else None."""
    return (volume.get("hostPath") or {}).get("path")


class VolumeDirs:
    """Where a pod's volumes live: `<state>/pods/<uid>/volumes/<name>` (per pod) and `<state>/pv/<pv name>`."""

    def __init__(self, state_dir: str):
        self.state_dir = state_dir

    def pod_dir(self, uid: str) -> str:
        return os.path.join(self.state_dir, "pods", uid)

    def pv_dir(self, pv_name: str) -> str:
        path = os.path.join(self.state_dir, "pv", pv_name)
        os.makedirs(path, exist_ok=True)
        return path

    def remove_pv(self, pv_name: str) -> None:
        shutil.rmtree(os.path.join(self.state_dir, "pv", pv_name), ignore_errors=True)

    def volume_dir(self, uid: str, name: str, files: dict[str, tuple[bytes, int]] | None) -> str:
        """The pod's own directory for volume `name`, with `files` written (config volumes) or empty."""
        path = os.path.join(self.pod_dir(uid), "volumes", name)
        os.makedirs(path, exist_ok=True)
        for rel, (data, mode) in (files or {}).items():
            target = os.path.normpath(os.path.join(path, rel))
            if not target.startswith(path + os.sep):
                raise ConfigError(f"invalid volume item path {rel[:100]!r}")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(data)
            os.chmod(target, mode)
        return path

    def remove_pod(self, uid: str) -> None:
        shutil.rmtree(self.pod_dir(uid), ignore_errors=True)
