"""Volumes and mounts (pure): ``Volume`` (an extra PVC and where it is mounted), the rules a mount path follows,
and the user's home PVC, mounted at ``/root`` in training steps and development instances alike.

``Volume`` is what a DAG author writes (``from operators import Volume``), what a development instance's form
asks (``mounts``) and what admission grants (read-only where the platform file shares a volume read-only).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from operators.core.checks import invalid, text
from operators.core.names import is_dns_subdomain, user_key

ROOT_MOUNT = "/root"   # where the home PVC is mounted
VOLUME_KEYS = {"pvc", "mount_path", "read_only"}


@dataclass(frozen=True)
class Volume:
    """An extra PVC mounted into the container (read-only unless ``read_only=False``): what a training step
    (``TrainingJobOperator(volumes=...)``) or a development instance (``mounts``) asks, and what it is granted."""

    pvc: str
    mount_path: str
    read_only: bool = True


def home_pvc(user: str) -> str:
    """A user's default PVC (mounted at /root): ``<user>-home`` when the name is already DNS-safe, else the
    normalised name plus a hash of the original, so "Bob.Smith" and "bob-smith" never share a volume. A DNS-safe
    name that ends like a hash ("bob-1a2b3c4d") takes the hashed form too, so no user's plain name can equal
    another user's hashed name (tests/integration/hostile: ``platform-home-pvc-collision``); the rule is ``names.user_key``."""
    return f"{user_key(user)}-home"


def mount_path(field: str, value: Any) -> str:
    """An absolute mount path, normalised before any rule looks at it (``//root``, ``/root/.`` and ``/root/``
    are ``/root``); ``..`` and ``:`` are refused, ``/`` itself too."""
    path = text(field, value)
    if not path.startswith("/") or ":" in path or any(c in path for c in "\n\r\t"):
        raise invalid(field, value, "must be an absolute path without ':' or control characters")
    if ".." in path.split("/"):
        raise invalid(field, value, "must not contain '..'")
    norm = "/" + posixpath.normpath(path).lstrip("/")
    if norm == "/":
        raise invalid(field, value, "cannot mount over /")
    return norm


def volumes(value: Any) -> tuple[Volume, ...]:
    """``TrainingJobOperator(volumes=...)``: a list of ``Volume`` or dicts -> validated Volumes, paths
    normalised, none at ``/root`` or twice at one path."""
    if value is None:
        return ()
    if isinstance(value, Mapping | str) or not isinstance(value, Sequence):
        raise invalid("volumes", value, "must be a list of Volume(pvc=..., mount_path=..., read_only=...)")
    out: list[Volume] = []
    paths = {ROOT_MOUNT}
    for i, item in enumerate(value):
        if isinstance(item, Mapping) and (set(item) - VOLUME_KEYS or not {"pvc", "mount_path"} <= set(item)):
            raise invalid(f"volumes[{i}]", item, "must have pvc and mount_path, and optionally read_only")
        vol = Volume(**item) if isinstance(item, Mapping) else item
        if not isinstance(vol, Volume):
            raise invalid(f"volumes[{i}]", item, "must be a Volume or a dict with pvc, mount_path, read_only")
        if not is_dns_subdomain(vol.pvc):
            raise invalid(f"volumes[{i}].pvc", vol.pvc, "is not a valid PVC name (DNS-1123 subdomain)")
        path = mount_path(f"volumes[{i}].mount_path", vol.mount_path)
        if path in paths:
            raise invalid(f"volumes[{i}].mount_path", vol.mount_path, f"{path} is already mounted (/root is the "
                                                                      "home PVC)")
        paths.add(path)
        if not isinstance(vol.read_only, bool):
            raise invalid(f"volumes[{i}].read_only", vol.read_only, "must be true or false")
        out.append(replace(vol, mount_path=path))
    return tuple(out)
