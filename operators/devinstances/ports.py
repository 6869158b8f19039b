"""External TCP ports in ingress-nginx's ``tcp-services`` ConfigMap (pure functions over its ``data``).

ingress-nginx reads ``data`` as ``"<external port>": "<namespace>/<service>:<service port>"`` and opens each
external port on its controller. ``allocate`` gives every port of an instance's Service an external port from
the configured range, lowest free first; it is idempotent (ports the Service already has are kept), so a retried
create reuses them. ``release`` drops every entry of one Service. Entries Skiff did not write (any other value)
are never touched and their ports never reused. The shell (``tcp_services.py``) applies these with a
resourceVersion precondition, so two concurrent writers never both get a port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class PortRange:
    low: int
    high: int

    def __post_init__(self) -> None:
        if not (1 <= self.low <= self.high <= 65535):
            raise ValueError(f"port range={self.low}-{self.high}: must be 1 <= low <= high <= 65535")

    @classmethod
    def parse(cls, text: str) -> PortRange:
        """``"20000-29999"`` -> PortRange (the form of ``[skiff] devinstance_port_range``)."""
        low, sep, high = str(text).partition("-")
        if not sep or not low.strip().isdigit() or not high.strip().isdigit():
            raise ValueError(f"port range={text!r}: must look like 20000-29999")
        return cls(int(low), int(high))


def target(namespace: str, service: str, port: int) -> str:
    return f"{namespace}/{service}:{port}"


def service_ports(data: Mapping[str, str] | None, namespace: str, service: str) -> dict[int, int]:
    """``{service port: external port}`` for one Service."""
    prefix = f"{namespace}/{service}:"
    out: dict[int, int] = {}
    for external, value in (data or {}).items():
        if isinstance(value, str) and value.startswith(prefix) and value[len(prefix):].isdigit():
            if str(external).isdigit():
                out[int(value[len(prefix):])] = int(external)
    return out


class PortsExhausted(RuntimeError):
    pass


def allocate(data: Mapping[str, str] | None, namespace: str, service: str, ports: Iterable[int],
             port_range: PortRange) -> tuple[dict[str, str], dict[int, int]]:
    """New ``data`` with an external port for each of ``ports``, and ``{service port: external port}``."""
    new = dict(data or {})
    have = service_ports(new, namespace, service)
    used = {int(k) for k in new if str(k).isdigit()}
    candidate = port_range.low
    for port in ports:
        if port in have:
            continue
        while candidate in used:
            candidate += 1
        if candidate > port_range.high:
            raise PortsExhausted(f"tcp-services: no free external port left in {port_range.low}-{port_range.high}")
        new[str(candidate)] = target(namespace, service, port)
        used.add(candidate)
        have[port] = candidate
    return new, {p: have[p] for p in ports}


def release(data: Mapping[str, str] | None, namespace: str, service: str) -> dict[str, str]:
    """``data`` without the entries of ``namespace/service``."""
    prefix = f"{namespace}/{service}:"
    return {k: v for k, v in (data or {}).items() if not (isinstance(v, str) and v.startswith(prefix))}
