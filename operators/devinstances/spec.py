"""Validate a development-instance request (pure: no I/O, no cluster).

``build_request`` turns the form values of ``dev_instance_create`` into an ``InstanceRequest`` or raises
``ValueError`` naming the field and the value, before anything is written. What it needs to know about the
platform (the image catalogue, the owner's home volume, who may use which volume) is passed in as plain data,
so the same checks run in the DAG, in the UI's API and in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.core.checks import invalid
from operators.core.names import is_dns_label, is_dns_subdomain
from operators.core.nodepools import NodePools
from operators.core.quantity import cpu_quantity, gpu_count, memory_gi, parse_quantity
from operators.core.volumes import ROOT_MOUNT, Volume, mount_path
from operators.devinstances.naming import check_name, owner_slug
from operators.platform.model import Image  # one entry of the platform's image catalogue

# name -> container port; the order is the order of the Service's ports and of the tcp-services entries
BUILTIN_PORTS = {"jupyter": 8888, "code-server": 8080, "ssh": 22, "tensorboard": 6006}
MAX_EXTRA_PORTS = 5
MAX_CPU = 64
MAX_MEMORY_GI = 512
MAX_GPU = 8


@dataclass(frozen=True)
class InstanceRequest:
    """A validated request: everything the manifests need besides the password and the external ports."""

    owner: str
    name: str
    namespace: str
    image: Image
    cpu: str
    memory_gi: str
    gpu: int
    home_pvc: str
    mounts: tuple[Volume, ...]
    extra_ports: tuple[int, ...]
    service_account: str | None = None
    pull_secrets: tuple[str, ...] = ()
    node_pools: NodePools = NodePools()   # the GPU resource and taint (the platform file's node_pools)
    timezone: str = "UTC"                  # TZ ([skiff] devinstance_timezone)

    @property
    def ports(self) -> dict[str, int]:
        """Every container port by name: the four built-in ones, then ``port-<n>`` for each extra port."""
        return {**BUILTIN_PORTS, **{f"port-{p}": p for p in self.extra_ports}}


def pick_image(catalogue: Sequence[Image], value: Any, default: str | None) -> Image:
    """The catalogue entry named ``value`` (``None``/empty: the default entry)."""
    wanted = value if value not in (None, "") else default
    for image in catalogue:
        if image.name == wanted:
            return image
    names = ", ".join(i.name for i in catalogue) or "(the catalogue is empty)"
    raise invalid("image", value, f"is not in the platform's image catalogue: {names}")


def bounded(field: str, text: str, top: float) -> str:
    if parse_quantity(text) > top:  # text is already checked: cpu cores ("500m") or a number of GiB
        raise invalid(field, text, f"must be at most {top:g}")
    return text


def extra_ports(value: Any) -> tuple[int, ...]:
    if value in (None, ""):
        return ()
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence):
        raise invalid("extra_ports", value, "must be a list of port numbers, e.g. [5000, 7860]")
    if len(value) > MAX_EXTRA_PORTS:
        raise invalid("extra_ports", value, f"at most {MAX_EXTRA_PORTS} extra ports")
    out: list[int] = []
    for i, port in enumerate(value):
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise invalid(f"extra_ports[{i}]", port, "must be a port number 1-65535")
        if port in BUILTIN_PORTS.values():
            raise invalid(f"extra_ports[{i}]", port, "is already used by JupyterLab, code-server, ssh or TensorBoard")
        if port in out:
            raise invalid(f"extra_ports[{i}]", port, "is listed twice")
        out.append(port)
    return tuple(out)


def mounts(value: Any, access: Callable[[str], str | None]) -> tuple[Volume, ...]:
    """Validate ``[{pvc, path, read_only}]``; ``access(pvc)`` is the owner's right on it: "rw", "ro" or None."""
    if value in (None, ""):
        return ()
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence):
        raise invalid("mounts", value, "must be a list of {pvc, path, read_only}")
    out: list[Volume] = []
    paths = {ROOT_MOUNT}
    for i, item in enumerate(value):
        if not isinstance(item, Mapping) or set(item) - {"pvc", "path", "read_only"}:
            raise invalid(f"mounts[{i}]", item, "must be {pvc, path, read_only}")
        pvc, path, read_only = item.get("pvc"), item.get("path"), item.get("read_only", True)
        if not isinstance(pvc, str) or not is_dns_subdomain(pvc):
            raise invalid(f"mounts[{i}].pvc", pvc, "is not a valid PVC name")
        norm = mount_path(f"mounts[{i}].path", path)
        if norm in paths:
            raise invalid(f"mounts[{i}].path", path, f"{norm} is already mounted (/root is the home volume)")
        if not isinstance(read_only, bool):
            raise invalid(f"mounts[{i}].read_only", read_only, "must be true or false")
        right = access(pvc)
        if right is None:
            raise invalid(f"mounts[{i}].pvc", pvc, "is not yours and not shared with you")
        if right == "ro" and not read_only:
            raise invalid(f"mounts[{i}].read_only", read_only, f"{pvc} is shared with you read-only")
        paths.add(norm)
        out.append(Volume(pvc, norm, read_only))
    return tuple(out)


def build_request(
    *,
    owner: Any,
    name: Any,
    team: Any,
    image: Any,
    cpu: Any,
    memory: Any,
    gpu: Any,
    mounts_: Any = (),
    extra_ports_: Any = (),
    catalogue: Sequence[Image],
    default_image: str | None,
    home_pvc: str,
    access: Callable[[str], str | None],
    service_account: str | None = None,
    pull_secrets: Sequence[str] = (),
    node_pools: NodePools | None = None,
    timezone: str = "UTC",
) -> InstanceRequest:
    owner_slug(owner)
    check_name(owner, name)
    if not isinstance(team, str) or not is_dns_label(team):
        raise invalid("team", team, "is not a team queue (namespace)")
    picked = pick_image(catalogue, image, default_image)
    gpus = gpu_count(gpu)
    if gpus > MAX_GPU:
        raise invalid("gpu", gpu, f"must be at most {MAX_GPU}")
    if gpus and not picked.gpu:
        raise invalid("image", picked.name, f"is a CPU image; pick a GPU image for gpu={gpus}")
    return InstanceRequest(
        owner=owner,
        name=name,
        namespace=team,
        image=picked,
        cpu=bounded("cpu", cpu_quantity(cpu), MAX_CPU),
        memory_gi=bounded("memory", memory_gi(memory), MAX_MEMORY_GI),
        gpu=gpus,
        home_pvc=home_pvc,
        mounts=mounts(mounts_, access),
        extra_ports=extra_ports(extra_ports_),
        service_account=service_account,
        pull_secrets=tuple(pull_secrets),
        node_pools=node_pools or NodePools(),
        timezone=timezone,
    )
