"""What a training step really used beside what it held, said at its end in the task log and the e-mail.

While the step runs, ``UsageWatch`` reads the metrics API (``metrics.k8s.io/v1beta1`` PodMetrics: metrics-server in
production, kubesim on the demo) for the Job's pods every ``interval`` seconds: one list request per step per
interval, by the Job's label. ``summary`` (pure) turns what was read into lines:

    Usage of pod <pod>: peak memory 2.1 GiB of its 32 GiB limit (7 %), CPU 0.41 of 4 requested cores (10 %,
    mean of 12 readings over 3 min); GPU utilisation: no source here (the dashboard's DCGM panels have it)
    Advice: asked 32 GiB of memory, peaked at 2.1 GiB: memory=4 would do (under 25 % of the limit used)

Never a made-up number: with no reading it says why (the cluster serves no metrics API; the step ended before a
reading, which takes two samples of the metrics pipeline, ~15-30 s after the start). Readings are samples: a
peak shorter than the interval can be missed, and the line says the peak "seen". A container the kernel
OOM-killed peaked at its limit by definition: that is said from the pod's status, whatever the samples saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from operators.core.quantity import parse_quantity
from operators.k8s.errors import KubeError

GROUP_PATH = "/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods"
ADVICE_SHARE = 0.25    # advice when the peak is under this share of the memory limit (or CPU of the request)
GiB = 1 << 30


@dataclass
class Seen:
    """One pod's readings: memory working sets and CPU cores, as the metrics API gave them."""
    memory: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def parse_memory(value) -> int:
    return int(parse_quantity(value))


def parse_cpu(value) -> float:
    return float(parse_quantity(value))


def _gib(n: float) -> str:
    """``32 GiB``, ``2.1 GiB``, ``310 MiB``."""
    if n >= GiB:
        return f"{n / GiB:.1f}".rstrip("0").rstrip(".") + " GiB"
    return f"{n / (1 << 20):.0f} MiB"


def _container(pod: dict, name: str) -> dict:
    containers = (pod.get("spec") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == name), containers[0] if containers else {})


def _oom_killed(pod: dict) -> bool:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        for state in (cs.get("state") or {}, cs.get("lastState") or {}):
            if (state.get("terminated") or {}).get("reason") == "OOMKilled":
                return True
    return False


def summary(pod: dict, container: str, seen: Seen | None, problem: str | None,
            interval: float, share: float = ADVICE_SHARE) -> list[str]:
    """The lines for one pod (pure): usage against limit and request, and one advice line when under ``share``."""
    name = pod["metadata"]["name"]
    res = _container(pod, container).get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    mem_limit = parse_memory(limits["memory"]) if limits.get("memory") else None
    cpu_req = parse_cpu(requests.get("cpu") or limits.get("cpu")) if requests.get("cpu") or limits.get("cpu") \
        else None
    gpus = limits.get("nvidia.com/gpu")
    gpu = "; GPU utilisation: no source in the task (the dashboard's DCGM panels show it)" if gpus else ""
    if _oom_killed(pod) and mem_limit:
        return [f"Usage of pod {name}: peak memory at its limit of {_gib(mem_limit)} (OOMKilled: the kernel stops "
                f"a container when it reaches its limit){gpu}"]
    if seen is None or not seen.memory:
        why = problem or (f"the step ended before the metrics API had a reading (it needs two samples, "
                          f"~{int(interval)} s apart)")
        return [f"Usage of pod {name}: not known: {why}{gpu}"]
    peak, cpu = max(seen.memory), sum(seen.cpu) / len(seen.cpu)
    mem = f"peak memory seen {_gib(peak)}" + (f" of its {_gib(mem_limit)} limit ({100 * peak / mem_limit:.0f} %)"
                                             if mem_limit else " (no memory limit)")
    cpu_text = f"CPU {cpu:.2f}" + (f" of {cpu_req:g} requested cores ({100 * cpu / cpu_req:.0f} %" if cpu_req
                                    else " cores (no CPU request")
    lines = [f"Usage of pod {name}: {mem}, {cpu_text}, mean of {len(seen.cpu)} reading(s) {int(interval)} s "
             f"apart){gpu}"]
    if mem_limit and peak < share * mem_limit:
        suggest = max(1, math.ceil(peak * 2 / GiB))
        lines.append(f"Advice: asked {_gib(mem_limit)} of memory, peaked at {_gib(peak)}: memory={suggest} would "
                     f"do (under {share * 100:.0f} % of the limit used)")
    elif cpu_req and cpu < share * cpu_req and cpu_req >= 1:
        lines.append(f"Advice: asked {cpu_req:g} CPU cores, used {cpu:.2f} on average: cpu={max(1, math.ceil(cpu * 2))} "
                     f"would do (under {share * 100:.0f} % of the request used)")
    return lines


def parse_pod_metrics(doc: dict, container: str) -> dict[str, tuple[int, float]]:
    """{pod: (memory bytes, cpu cores)} of the training container from a PodMetricsList."""
    out = {}
    for item in doc.get("items") or []:
        for c in item.get("containers") or []:
            if c.get("name") == container or len(item.get("containers") or []) == 1:
                u = c.get("usage") or {}
                out[item["metadata"]["name"]] = (parse_memory(u.get("memory", "0")), parse_cpu(u.get("cpu", "0")))
    return out


class UsageWatch:
    """Reads the Job's pods' metrics every ``interval`` seconds until ``stop``; ``problem`` says why it cannot."""

    def __init__(self, kube, namespace: str, selector: str, container: str, interval: float):
        self.kube, self.namespace, self.selector = kube, namespace, selector
        self.container, self.interval = container, interval
        self.seen: dict[str, Seen] = {}
        self.problem: str | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        path = GROUP_PATH.format(ns=self.namespace)
        while True:
            try:
                doc = await self.kube.request("GET", path, query=[("labelSelector", self.selector)])
            except KubeError as exc:
                if exc.status == 404:
                    self.problem = "the cluster serves no metrics API (metrics.k8s.io: install metrics-server)"
                    return
                self.problem = f"the metrics API answered {exc.status}"
            else:
                for pod, (memory, cpu) in parse_pod_metrics(doc or {}, self.container).items():
                    seen = self.seen.setdefault(pod, Seen())
                    seen.memory.append(memory)
                    seen.cpu.append(cpu)
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def lines(self, pods: Iterable[dict], container_of, share: float = ADVICE_SHARE) -> list[str]:
        out = []
        for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            if ((pod.get("status") or {}).get("containerStatuses")):
                out += summary(pod, container_of(pod), self.seen.get(pod["metadata"]["name"]), self.problem,
                               self.interval, share)
        return out
