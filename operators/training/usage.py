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

The peak so far is also recorded on the step's Job, in the ``skiff.io/usage-peak`` annotation (``PEAK_ANNOTATION``,
a small JSON: ``encode_peak``), for the page's training row while the step runs and after it ends (as long as the
Job exists). It is written when the first reading comes, again when the peak has grown by more than
``PEAK_GROWTH`` but at most once per ``PEAK_WRITE_MIN_S``, and once at the step's end with the summary's figures
(``final``). A gang step (``workers=N``) records one peak per Job: the highest over its pods (each pod of a gang
has the same limit and request, so the worst rank is what right-sizing needs) and how many pods were read. The
page reads the annotation with ``read_peak``, which trusts nothing: a team member allowed to edit Jobs could
write anything there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from operators.core.quantity import parse_quantity
from operators.k8s.errors import KubeError
from operators.k8s.resource import JOBS
from operators.k8s.rest import MERGE_PATCH

GROUP_PATH = "/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods"
ADVICE_SHARE = 0.25    # advice when the peak is under this share of the memory limit (or CPU of the request)
GiB = 1 << 30
PEAK_ANNOTATION = "skiff.io/usage-peak"   # on the step's Job: its peak so far (issue 37: the page's training row)
PEAK_VERSION = 1
PEAK_WRITE_MIN_S = 60.0   # while the step runs, at most one write of the peak per minute (plus the one at its end)
PEAK_GROWTH = 1.05        # ... and only when the peak grew by more than 5 % since the last write
PEAK_MAX_CHARS = 512      # read_peak refuses a longer annotation unread
_MAX_MEMORY, _MAX_CPU, _MAX_COUNT = float(1 << 50), 1e5, 10**9   # bounds of a believable peak (1 PiB, cores, readings)


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


@dataclass(frozen=True)
class Peak:
    """What a step's Job records: the highest memory working set (bytes) and CPU reading (cores) seen over its
    pods, the highest pod mean CPU (the summary's figure), the readings of the most-read pod, the pods read;
    ``final`` once the step ended; ``oom`` when a pod was OOM-killed (its peak was its limit, whatever was seen).
    Without a reading memory and CPU are None."""
    memory: int | None
    cpu: float | None
    cpu_mean: float | None
    readings: int
    pods: int
    final: bool = False
    oom: bool = False


def peak_of(seen: Mapping[str, Seen], *, final: bool = False, oom: bool = False) -> Peak:
    """The Job's peak from every pod's readings (pure): the maximum over pods."""
    read = [s for s in seen.values() if s.memory]
    if not read:
        return Peak(None, None, None, 0, 0, final, oom)
    return Peak(memory=max(max(s.memory) for s in read), cpu=round(max(max(s.cpu) for s in read), 3),
                cpu_mean=round(max(sum(s.cpu) / len(s.cpu) for s in read), 3),
                readings=max(len(s.memory) for s in read), pods=len(read), final=final, oom=oom)


def encode_peak(peak: Peak) -> str:
    return json.dumps({"v": PEAK_VERSION, **asdict(peak)}, separators=(",", ":"))


def should_write(written: Peak | None, now: Peak, since_write: float | None) -> bool:
    """While the step runs: write the first reading at once, then only a peak grown by more than
    ``PEAK_GROWTH`` and not within ``PEAK_WRITE_MIN_S`` of the last write (pure)."""
    if now.memory is None:
        return False
    if written is None or written.memory is None:
        return True
    grew = now.memory > written.memory * PEAK_GROWTH or (now.cpu or 0) > (written.cpu or 0) * PEAK_GROWTH + 0.01
    return grew and (since_write is None or since_write >= PEAK_WRITE_MIN_S)


def _number(doc: dict, key: str, top: float, *, whole: bool = False) -> float | int | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        raise ValueError(f"{key}: not a {'whole ' if whole else ''}number")
    if (isinstance(value, float) and not math.isfinite(value)) or not 0 <= value <= top:
        raise ValueError(f"{key}: out of range")
    return value


def read_peak(value: object) -> Peak:
    """The ``PEAK_ANNOTATION`` of a Job, read defensively (whoever may edit the Job may have written it): at most
    ``PEAK_MAX_CHARS``, a JSON object of this version, numbers only and within bounds; anything else is a
    ValueError saying what (the page then says the peak is not readable, never shows a number from it)."""
    if not isinstance(value, str) or len(value) > PEAK_MAX_CHARS:
        raise ValueError(f"not a string of at most {PEAK_MAX_CHARS} characters")
    try:
        doc = json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise ValueError("not JSON") from exc
    if not isinstance(doc, dict) or doc.get("v") != PEAK_VERSION:
        raise ValueError(f"not a version {PEAK_VERSION} object")
    flags = {k: doc.get(k, False) for k in ("final", "oom")}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise ValueError("final/oom: not true or false")
    readings = _number(doc, "readings", _MAX_COUNT, whole=True)
    pods = _number(doc, "pods", _MAX_COUNT, whole=True)
    memory = _number(doc, "memory", _MAX_MEMORY, whole=True)
    cpu, cpu_mean = _number(doc, "cpu", _MAX_CPU), _number(doc, "cpu_mean", _MAX_CPU)
    if readings is None or pods is None:
        raise ValueError("readings/pods: missing")
    if (readings > 0) != (memory is not None and cpu is not None and cpu_mean is not None and pods > 0):
        raise ValueError("memory and CPU: given without readings, or readings without them")
    return Peak(memory, None if cpu is None else float(cpu), None if cpu_mean is None else float(cpu_mean),
                readings, pods, **flags)


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
    """Reads the Job's pods' metrics every ``interval`` seconds until ``stop``; ``problem`` says why it cannot.
    With ``job`` (the Job's name) it records the peak so far on that Job (``PEAK_ANNOTATION``); ``finish``
    writes the final one."""

    def __init__(self, kube, namespace: str, selector: str, container: str, interval: float,
                 job: str | None = None):
        self.kube, self.namespace, self.selector = kube, namespace, selector
        self.container, self.interval, self.job = container, interval, job
        self.seen: dict[str, Seen] = {}
        self.problem: str | None = None
        self.written: Peak | None = None
        self._written_at: float | None = None
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
                await self._record_growth()
            await asyncio.sleep(self.interval)

    async def _record_growth(self) -> None:
        if self.job is None:
            return
        loop = asyncio.get_running_loop()
        since = None if self._written_at is None else loop.time() - self._written_at
        now = peak_of(self.seen)
        if should_write(self.written, now, since):
            self._written_at = loop.time()   # a failed write is not retried before the next interval either
            await self.write(now)

    async def write(self, peak: Peak) -> str | None:
        """Record ``peak`` on the Job (one merge patch of its annotation); the error in words when it cannot
        (the Job gone, no permission): the step goes on, only the page lacks the figure."""
        body = {"metadata": {"annotations": {PEAK_ANNOTATION: encode_peak(peak)}}}
        try:
            await self.kube.request("PATCH", JOBS.path(self.namespace, self.job), body=body,
                                    content_type=MERGE_PATCH)
        except KubeError as exc:
            return str(exc)
        self.written = peak
        return None

    async def finish(self, pods: Iterable[dict]) -> str | None:
        """Stop reading and record the final peak on the Job (the summary's figures; ``oom`` from the pods'
        status), when there is one to record; the error in words when the write failed."""
        await self.stop()
        pods = list(pods)
        peak = peak_of(self.seen, final=True, oom=any(_oom_killed(p) for p in pods))
        if self.job is None or (peak.memory is None and not peak.oom):
            return None
        return await self.write(peak)

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
