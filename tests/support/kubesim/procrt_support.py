"""Shared by the test_procrt_* modules: the process nodes of their KubeSim (fixtures `procsim_server`, `pcore` in
conftest.py) and pod helpers."""
from __future__ import annotations

import sys

from kubesim.testing import wait_until

# the image `skiff/venv` is this test run's virtualenv (numpy and all), any other image the host's /usr/bin
# (a pid limit of 256 per pod: test_procrt_walls.py's fork bomb stops there)
PROCESS_NODES = [{"name": "proc-1", "runtime": "process", "cpu": 8, "memory": "32Gi",
                  "images": {"skiff/venv": sys.prefix}, "podPidsLimit": 256},
                 {"name": "proc-2", "runtime": "process", "cpu": 8, "memory": "32Gi",
                  "images": {"skiff/venv": sys.prefix}, "podPidsLimit": 256}]


def as_process_nodes(nodes: list[dict]) -> list[dict]:
    """``nodes`` (e.g. kubesim's DEFAULT_NODES) as process nodes whose every image is this test run's virtualenv."""
    return [{**n, "runtime": "process", "images": {"*": sys.prefix}} for n in nodes]


def pod(name: str, command: list[str], restart: str = "Never", **spec) -> dict:
    container = {"name": "main", "image": "debian:12", "command": command, **spec.pop("container", {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": restart, "containers": [container], **spec}}


def phase_is(core, name: str, *phases: str, timeout: float = 15):
    def check():
        p = core.read_namespaced_pod(name, "default")
        return p if p.status and p.status.phase in phases else None
    return wait_until(check, timeout, what=f"pod {name} in {phases}")


def log(core, name: str, **kw) -> str:
    return core.read_namespaced_pod_log(name, "default", _preload_content=False, **kw).data.decode()


def events_for(core, name: str, reason: str | None = None) -> list:
    return [e for e in core.list_namespaced_event("default").items
            if e.involved_object.name == name and (reason is None or e.reason == reason)]


def last_state_before_removal(pcore, name, resource_version, namespace: str = "default", timeout: int = 15):
    """The DELETED watch event carries the pod's last state (what the kubelet reported before removing it)."""
    from kubernetes import watch
    for event in watch.Watch().stream(pcore.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}",
                                      resource_version=resource_version, timeout_seconds=timeout):
        if event["type"] == "DELETED":
            return event["object"]
    raise AssertionError(f"pod {name} was not removed")
