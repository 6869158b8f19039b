"""The platform file (SPEC §3, §5): one reviewed YAML file saying which teams exist, their quotas and members,
who may use which volumes, which images and registries are allowed and how node pools are marked.

``load_platform()`` finds and validates it; ``Platform`` (``model``) answers questions about it; ``desired``
renders what the cluster should hold; ``admission`` decides on a request under it and the observed quota;
``sync`` applies it (the ``platform_sync`` DAG); ``usage`` reports quota use and GPU/CPU-hours.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from operators import settings
from operators.platform.loader import MAX_BYTES, parse_platform, schema
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
    """Read and validate the platform file; raises ``PlatformError`` naming file, line and field. The file is
    read at most ``MAX_BYTES`` + 1 bytes (a bigger one is refused unread) and parsed once per content: every
    page route, task and exporter refresh calls this, and a ``Platform`` is immutable, so the same bytes give
    the same ``Platform`` (or the same error) from a small cache keyed by the bytes (issue 30, class 5)."""
    chosen = platform_file(path)
    try:
        with chosen.open("rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PlatformError(f"{chosen}: cannot read the platform file: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise PlatformError(f"{chosen}:1: (file): over {MAX_BYTES} bytes; a platform file may have at most "
                            f"{MAX_BYTES} (1 MiB)")
    parsed = _parsed(raw, str(chosen), node_pool_defaults())
    if isinstance(parsed, PlatformError):
        raise PlatformError(str(parsed))
    return parsed


@lru_cache(maxsize=8)
def _parsed(raw: bytes, source: str, defaults: NodePools) -> Platform | PlatformError:
    """``parse_platform`` of ``raw`` (its error returned, so that a bad file is not parsed again either)."""
    try:
        return parse_platform(raw.decode("utf-8"), source, defaults)
    except UnicodeDecodeError as exc:
        return PlatformError(f"{source}:1: (file): not UTF-8 (byte {exc.start}): the platform file is UTF-8 YAML")
    except PlatformError as exc:
        return exc
