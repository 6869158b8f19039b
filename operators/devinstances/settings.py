"""Operator settings of development instances, from the environment (no I/O at import).

| variable | default | meaning |
| --- | --- | --- |
| ``SKIFF_DEVINSTANCE_TCP_SERVICES`` | ``kube-system/tcp-services`` | ingress-nginx's tcp-services ConfigMap |
| ``SKIFF_DEVINSTANCE_PORT_RANGE`` | ``20000-29999`` | external ports Skiff may hand out |
| ``SKIFF_DEVINSTANCE_HOST`` | ``localhost`` | the host name users connect to (ingress-nginx's address) |
| ``SKIFF_DEVINSTANCE_MAX_PER_OWNER`` | ``3`` | instances per user, stopped ones included |
| ``SKIFF_DEVINSTANCE_IDLE_HOURS`` | ``8`` | the culler stops instances idle for longer than this |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from operators.devinstances.ports import PortRange
from operators.devinstances.spec import DEFAULT_MAX_PER_OWNER
from operators.validation import is_dns_label, is_dns_subdomain

DEFAULT_TCP_SERVICES = "kube-system/tcp-services"
DEFAULT_IDLE_HOURS = 8.0


@dataclass(frozen=True)
class Settings:
    tcp_namespace: str = "kube-system"
    tcp_name: str = "tcp-services"
    port_range: PortRange = field(default_factory=PortRange)
    host: str = "localhost"
    max_per_owner: int = DEFAULT_MAX_PER_OWNER
    idle_seconds: float = DEFAULT_IDLE_HOURS * 3600

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        ref = env.get("SKIFF_DEVINSTANCE_TCP_SERVICES") or DEFAULT_TCP_SERVICES
        ns, sep, name = ref.partition("/")
        if not sep or not is_dns_label(ns) or not is_dns_subdomain(name):
            raise ValueError(f"SKIFF_DEVINSTANCE_TCP_SERVICES={ref!r}: must be <namespace>/<configmap>")
        max_text = env.get("SKIFF_DEVINSTANCE_MAX_PER_OWNER") or str(DEFAULT_MAX_PER_OWNER)
        if not max_text.isdigit() or int(max_text) < 1:
            raise ValueError(f"SKIFF_DEVINSTANCE_MAX_PER_OWNER={max_text!r}: must be a whole number >= 1")
        idle_text = env.get("SKIFF_DEVINSTANCE_IDLE_HOURS") or str(DEFAULT_IDLE_HOURS)
        try:
            idle = float(idle_text)
        except ValueError:
            idle = -1.0
        if not idle > 0:
            raise ValueError(f"SKIFF_DEVINSTANCE_IDLE_HOURS={idle_text!r}: must be a positive number of hours")
        return cls(tcp_namespace=ns, tcp_name=name,
                   port_range=PortRange.parse(env.get("SKIFF_DEVINSTANCE_PORT_RANGE") or "20000-29999"),
                   host=env.get("SKIFF_DEVINSTANCE_HOST") or "localhost",
                   max_per_owner=int(max_text), idle_seconds=idle * 3600)
