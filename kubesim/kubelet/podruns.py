"""What the simulated kubelets keep per pod they run, in place of a container runtime: the pod's scripted
outcome (`Script`, from its `kubesim.io/*` annotations), each container's state and runs (`ContainerRun`,
`Attempt`: its log lines on the loop clock, scripted or read from a real process) and the pod's (`PodRun`).
Plain data, no I/O.

Upstream (what it stands in for): the CRI runtime's container records the kubelet reads back,
pkg/kubelet/container/runtime.go (`PodStatus`, `Status`) and the image IDs it reports
(`docker.io/library/<image>@sha256:...`).
"""
from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from kubesim.controllers.framework import Key

ANN = "kubesim.io/"
WAITING_REASONS = ("ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError", "InvalidImageName",
                   "CreateContainerError")
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Script:
    """A pod's scripted outcome, from its `kubesim.io/*` annotations."""
    duration: float | None
    exit_code: int
    reason: str | None
    lines: tuple[str, ...]
    message: str | None

    @classmethod
    def of(cls, pod: dict) -> Script:
        """Read the annotations (kindvalidation.check_script_annotations has refused bad values)."""
        ann = pod["metadata"].get("annotations") or {}
        duration = float(ann[ANN + "duration"]) if ann.get(ANN + "duration") not in (None, "") else None
        reason = ann.get(ANN + "reason") or None
        if reason == "OOMKilled":
            default_exit = 137
        elif reason and reason != "Completed" and reason not in WAITING_REASONS:
            default_exit = 1      # a terminated reason such as Error implies a failure
        else:
            default_exit = 0
        exit_code = int(ann.get(ANN + "exit-code") or default_exit)
        if ann.get(ANN + "logs") is not None:
            lines = tuple(ann[ANN + "logs"].splitlines())
        elif ann.get(ANN + "log-lines"):
            lines = tuple(f"line {i}" for i in range(1, int(ann[ANN + "log-lines"]) + 1))
        else:
            lines = ()
        return cls(duration, exit_code, reason, lines, ann.get(ANN + "message"))

    @property
    def waiting(self) -> bool:
        return self.reason in WAITING_REASONS


def image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


@dataclass
class Attempt:
    """One run of one container: its log lines on the loop clock (due time, wall time, text)."""
    container_id: str
    started: datetime
    started_mono: float
    lines: list[tuple[float, datetime, str]]
    finished_mono: float | None = None
    terminated: dict | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def written(self, now_mono: float) -> list[tuple[float, datetime, str]]:
        if self.finished_mono is not None:
            return self.lines
        return [ln for ln in self.lines if ln[0] <= now_mono]


@dataclass
class ContainerRun:
    name: str
    image: str
    state: dict
    restart_count: int = 0
    last_state: dict = field(default_factory=dict)
    attempt: Attempt | None = None
    previous: Attempt | None = None
    ready: bool | None = None     # a readiness probe's result (None: no probe, ready while running)

    @property
    def running(self) -> bool:
        return "running" in self.state


@dataclass
class PodRun:
    key: Key
    uid: str
    node: str
    script: Script
    restart_policy: str
    containers: dict[str, ContainerRun]
    pod_ip: str
    host_ip: str
    start_time: str
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    backoff: float = 0.0
    blocked: bool = False      # waiting for a ConfigMap/Secret/PVC it references to exist
    process: bool = False      # run by the process runtime (kubesim/kubelet/procrt), not scripted
    init_containers: dict[str, ContainerRun] = field(default_factory=dict)   # process pods: real init runs
    initialized: bool = False  # process pods: every init container has completed
    terminating: bool = False  # being stopped (deletion, deadline): no restarts

    def cancel(self) -> None:
        for t in self.timers:
            t.cancel()
        self.timers.clear()
