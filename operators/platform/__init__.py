"""The platform file (SPEC §3, §5): one reviewed YAML file saying which teams exist, their quotas and members,
who may use which volumes, which images and registries are allowed and how node pools are marked.

``load_platform()`` finds and validates it; ``Platform`` (``model``) answers questions about it; ``desired``
renders what the cluster should hold; ``admission`` decides on a request under it and the observed quota;
``sync`` applies it (the ``platform_sync`` DAG); ``usage`` reports quota use and GPU/CPU-hours.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

from operators import settings
from operators.platform.loader import parse_platform, schema
from operators.platform.model import (
    Image,
    Member,
    NodePools,
    Platform,
    PlatformError,
    Quota,
    SharedVolume,
    Team,
    home_pvc,
)

ENV_PLATFORM_FILE = settings.env_var("platform_file")

__all__ = [
    "Image", "Member", "NodePools", "Platform", "PlatformError", "Quota", "SharedVolume", "Team",
    "example_path", "home_pvc", "load_platform", "parse_platform", "platform_file", "schema",
]


NOT_SET = ("[skiff] platform_file is not set: Skiff applies and enforces no teams without the reviewed platform "
           "file. Set it in airflow.cfg ([skiff] platform_file = /path/to/platform.yaml) or in the environment "
           "({env}=/path/to/platform.yaml); an example to start from: {example}")


def example_path() -> Path:
    """The example platform file shipped in the package (``make demo`` and the tests set it explicitly)."""
    return Path(str(files("operators.platform").joinpath("example.yaml")))


def platform_file(path: str | os.PathLike | None = None) -> Path:
    """The file to read: ``path``, else ``[skiff] platform_file``. Never the packaged example on its own: on a
    real cluster that would create the example's teams and make its users admins; without the setting this
    raises ``PlatformError`` saying how to set it."""
    chosen = path or settings.get("platform_file")
    if not chosen:
        raise PlatformError(NOT_SET.format(env=ENV_PLATFORM_FILE, example=example_path()))
    return Path(chosen)


def node_pool_defaults() -> NodePools:
    """Today's ``[skiff] online_pool_key/value`` settings are the defaults the file may override."""
    return NodePools(online_key=settings.get("online_pool_key"), online_value=settings.get("online_pool_value"))


def load_platform(path: str | os.PathLike | None = None) -> Platform:
    """Read and validate the platform file; raises ``PlatformError`` naming file, line and field."""
    chosen = platform_file(path)
    try:
        text = chosen.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlatformError(f"{chosen}: cannot read the platform file: {exc.strerror or exc}") from None
    return parse_platform(text, str(chosen), node_pool_defaults())
