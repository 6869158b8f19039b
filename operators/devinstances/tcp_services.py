"""Apply port changes to ingress-nginx's ``tcp-services`` ConfigMap: read, modify, write with a precondition.

Every change is ``replace`` of the ConfigMap as read, so it carries the read ``resourceVersion``: if anybody wrote
in between, the API server answers 409 Conflict and the change is recomputed on a fresh read (with a short
random back-off, so 20 concurrent writers spread out). Two writers can therefore never both hand out a port.
A missing ConfigMap is created (a concurrent create is a 409 too, and retried the same way).

Requests go through ``operators.k8s.Kube``, which sends one again after a transient failure (5xx, no answer): a
``replace`` whose first send landed then answers 409, and the change is recomputed on a fresh read, where
``allocate`` and ``release`` find their own work already done (both are idempotent).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from operators.devinstances import ports as portsmod
from operators.devinstances.desired import tcp_services_configmap
from operators.devinstances.settings import Settings
from operators.k8s.errors import KubeError
from operators.k8s.resource import CONFIGMAPS
from operators.k8s.rest import Kube

MAX_ATTEMPTS = 200


def _change(kube: Kube, settings: Settings, change: Callable[[dict], dict]) -> dict:
    ns, name = settings.tcp_namespace, settings.tcp_name
    for attempt in range(MAX_ATTEMPTS):
        live = kube.get(CONFIGMAPS, ns, name)
        if live is None:
            body = tcp_services_configmap(ns, name)
            body["data"] = change({})
            if kube.create(CONFIGMAPS, ns, body) is not None:  # None: somebody created it first (409)
                return body["data"]
        else:
            data = dict(live.get("data") or {})
            new = change(dict(data))
            if new == data:
                return new
            live["data"] = new  # live carries the resourceVersion it was read at: the precondition
            try:
                kube.replace(CONFIGMAPS, ns, name, live)
                return new
            except KubeError as exc:
                if exc.status != 409:
                    raise
        time.sleep(random.uniform(0, min(0.01 * 2 ** min(attempt, 6), 0.5)))
    raise RuntimeError(f"tcp-services {ns}/{name}: still conflicting after {MAX_ATTEMPTS} attempts")


def allocate(kube: Kube, settings: Settings, namespace: str, service: str, ports: Iterable[int]) -> dict[int, int]:
    """External ports for ``ports`` of ``namespace/service`` (the same ones again if it already has them)."""
    wanted = list(ports)
    result: dict[int, int] = {}

    def change(data: dict) -> dict:
        new, got = portsmod.allocate(data, namespace, service, wanted, settings.port_range)
        result.clear()
        result.update(got)
        return new

    _change(kube, settings, change)
    return dict(result)


def release(kube: Kube, settings: Settings, namespace: str, service: str) -> dict[int, int]:
    """Drop ``namespace/service``'s entries; returns what it had (empty if nothing)."""
    freed: dict[int, int] = {}

    def change(data: dict) -> dict:
        freed.clear()
        freed.update(portsmod.service_ports(data, namespace, service))
        return portsmod.release(data, namespace, service)

    _change(kube, settings, change)
    return dict(freed)


def current(kube: Kube, settings: Settings) -> dict[str, str]:
    """The ConfigMap's ``data`` (empty if it does not exist)."""
    live = kube.get(CONFIGMAPS, settings.tcp_namespace, settings.tcp_name)
    return dict((live or {}).get("data") or {})
