"""Apply port changes to ingress-nginx's ``tcp-services`` ConfigMap: read, modify, write with a precondition.

Every change is ``replace`` of the ConfigMap as read, so it carries the read ``resourceVersion``: if anybody wrote
in between, the API server answers 409 Conflict and the change is recomputed on a fresh read (with a short
random back-off, so 20 concurrent writers spread out). Two writers can therefore never both hand out a port.
A missing ConfigMap is created (a concurrent create is a 409 too, and retried the same way).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from operators.devinstances import ports as portsmod
from operators.devinstances.desired import tcp_services_configmap
from operators.devinstances.settings import Settings

MAX_ATTEMPTS = 200


def _change(api_client, settings: Settings, change: Callable[[dict], dict]) -> dict:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(api_client)
    ns, name = settings.tcp_namespace, settings.tcp_name
    for attempt in range(MAX_ATTEMPTS):
        try:
            live = core.read_namespaced_config_map(name, ns)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = tcp_services_configmap(ns, name)
            body["data"] = change({})
            try:
                core.create_namespaced_config_map(ns, body)
                return body["data"]
            except ApiException as exc2:
                if exc2.status != 409:
                    raise
        else:
            data = dict(live.data or {})
            new = change(dict(data))
            if new == data:
                return new
            live.data = new
            try:
                core.replace_namespaced_config_map(name, ns, live)
                return new
            except ApiException as exc:
                if exc.status != 409:
                    raise
        time.sleep(random.uniform(0, min(0.01 * 2 ** min(attempt, 6), 0.5)))
    raise RuntimeError(f"tcp-services {ns}/{name}: still conflicting after {MAX_ATTEMPTS} attempts")


def allocate(api_client, settings: Settings, namespace: str, service: str, ports: Iterable[int]) -> dict[int, int]:
    """External ports for ``ports`` of ``namespace/service`` (the same ones again if it already has them)."""
    wanted = list(ports)
    result: dict[int, int] = {}

    def change(data: dict) -> dict:
        new, got = portsmod.allocate(data, namespace, service, wanted, settings.port_range)
        result.clear()
        result.update(got)
        return new

    _change(api_client, settings, change)
    return dict(result)


def release(api_client, settings: Settings, namespace: str, service: str) -> dict[int, int]:
    """Drop ``namespace/service``'s entries; returns what it had (empty if nothing)."""
    freed: dict[int, int] = {}

    def change(data: dict) -> dict:
        freed.clear()
        freed.update(portsmod.service_ports(data, namespace, service))
        return portsmod.release(data, namespace, service)

    _change(api_client, settings, change)
    return dict(freed)


def current(api_client, settings: Settings) -> dict[str, str]:
    """The ConfigMap's ``data`` (empty if it does not exist)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        return dict(client.CoreV1Api(api_client).read_namespaced_config_map(
            settings.tcp_name, settings.tcp_namespace).data or {})
    except ApiException as exc:
        if exc.status == 404:
            return {}
        raise
