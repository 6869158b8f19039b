"""Operator settings of development instances: the ``[skiff] devinstance_*`` options (``operators/settings.py``
declares them, with their defaults) parsed and checked into one value; no I/O at import.

A bad value fails naming the option and the value, before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from operators import settings
from operators.core.names import is_dns_label, is_dns_subdomain
from operators.devinstances.ports import PortRange

Lookup = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Settings:
    tcp_namespace: str = settings.default("devinstance_tcp_services").partition("/")[0]
    tcp_name: str = settings.default("devinstance_tcp_services").partition("/")[2]
    port_range: PortRange = field(default_factory=lambda: PortRange.parse(settings.default("devinstance_port_range")))
    host: str = settings.default("devinstance_host")
    max_per_owner: int = int(settings.default("devinstance_max_per_owner"))
    idle_seconds: float = float(settings.default("devinstance_idle_hours")) * 3600
    usage_idle_seconds: float = float(settings.default("devinstance_usage_idle_hours")) * 3600  # 0: off
    usage_idle_cpu: float = float(settings.default("devinstance_usage_idle_cpu"))

    @classmethod
    def from_config(cls, get: Lookup = settings.get) -> Settings:
        """The configured settings (``get``: an option's value by name, Airflow's config by default)."""
        ref = get("devinstance_tcp_services")
        ns, sep, name = ref.partition("/")
        if not sep or not is_dns_label(ns) or not is_dns_subdomain(name):
            raise ValueError(f"[skiff] devinstance_tcp_services={ref!r}: must be <namespace>/<configmap>")
        max_text = get("devinstance_max_per_owner")
        if not max_text.isdigit() or int(max_text) < 1:
            raise ValueError(f"[skiff] devinstance_max_per_owner={max_text!r}: must be a whole number >= 1")
        idle_text = get("devinstance_idle_hours")
        try:
            idle = float(idle_text)
        except ValueError:
            idle = -1.0
        if not idle > 0:
            raise ValueError(f"[skiff] devinstance_idle_hours={idle_text!r}: must be a positive number of hours")
        usage_hours = _number(get, "devinstance_usage_idle_hours", lambda v: v >= 0, "a number of hours >= 0 (0: off)")
        usage_cpu = _number(get, "devinstance_usage_idle_cpu", lambda v: v > 0, "a positive number of CPU cores")
        return cls(tcp_namespace=ns, tcp_name=name, port_range=PortRange.parse(get("devinstance_port_range")),
                   host=get("devinstance_host"), max_per_owner=int(max_text), idle_seconds=idle * 3600,
                   usage_idle_seconds=usage_hours * 3600, usage_idle_cpu=usage_cpu)


def _number(get: Lookup, option: str, ok: Callable[[float], bool], what: str) -> float:
    text = get(option)
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not ok(value):  # nan fails every test
        raise ValueError(f"[skiff] {option}={text!r}: must be {what}")
    return value
