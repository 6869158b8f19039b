"""What each container really uses, sampled as the kubelet's cAdvisor does and kept as metrics-server keeps it.

Every ``resolution`` seconds (metrics-server's ``--metric-resolution``, 15 s by default) the sampler reads every
running container once and keeps the last two readings per pod and per node, the way metrics-server's storage
keeps ``prev`` and ``last`` (pkg/storage/pod.go, node.go): a usage exists only once there are two, its CPU is the
rate between them and its window their distance (pkg/storage/types.go ``resourceUsage``), its memory the last
working set. The metrics API (apiserver/endpoints/metrics_api.py) and the cAdvisor series (cadvisor.py) read it.

Where a reading comes from:
* a process pod's container: its own cgroup (procrt/cgroups.py), read like cAdvisor's libcontainer handler
  (container/libcontainer/handler.go ``setMemoryStats``, ``setCPUStats``): CPU time from ``cpuacct.usage`` (v1) or
  ``cpu.stat`` ``usage_usec`` (v2); the working set is usage minus ``inactive_file`` (v1 ``total_inactive_file``,
  never below 0), usage being ``memory.usage_in_bytes`` / ``memory.current``; peak ``memory.max_usage_in_bytes``
  / ``memory.peak``.
* a scripted pod's container: its annotations ``kubesim.io/cpu-usage`` (a CPU quantity, e.g. ``500m``) and
  ``kubesim.io/memory-usage`` (bytes, e.g. ``300Mi``), steady from its start; without them it uses nothing.
* a node: the sum of its containers (kubesim's nodes share one host, so there is no node cgroup to read); its
  CPU counter only grows (each container's increase is added), as a node's root cgroup does.

A container's simulated GPU load (a process writes a percent into ``/tmp/kubesim-gpu-util``; a scripted pod has
``kubesim.io/gpu-util``) is read here too, for the dcgm-exporter-shaped endpoint; it is never a measured number.
"""
from __future__ import annotations

import asyncio
import contextlib
import math
import os
import stat
import time
from dataclasses import dataclass, field

from kubesim.apimachinery.resources import qty

ANN_CPU = "kubesim.io/cpu-usage"
ANN_MEMORY = "kubesim.io/memory-usage"
ANN_GPU = "kubesim.io/gpu-util"
GPU_UTIL_FILE = "kubesim-gpu-util"   # in the container's /tmp: its simulated GPU utilisation, in percent
DEFAULT_RESOLUTION = 15.0


@dataclass(frozen=True)
class Reading:
    """One container at one time: cumulative CPU nanoseconds and memory bytes (cAdvisor's ContainerStats)."""
    cpu_ns: int
    working_set: int
    usage: int = 0
    rss: int = 0
    cache: int = 0
    peak: int = 0
    gpu_util: float | None = None      # simulated percent, only for a container that holds a GPU


@dataclass
class Point:
    time: float                         # wall clock (unix seconds) of the reading
    start: float                        # the container's start (a restart starts a new series)
    reading: Reading
    limit_memory: int = 0               # bytes, 0: none (container_spec_memory_limit_bytes)
    request_cpu: float = 0.0            # cores
    limit_cpu: float = 0.0
    gpus: int = 0
    image: str = ""


@dataclass
class PodPoints:
    namespace: str
    name: str
    uid: str
    node: str
    labels: dict
    containers: dict[str, Point] = field(default_factory=dict)


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _read_kv(path: str) -> dict[str, int]:
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(" ")
                if value.strip().isdigit():
                    out[key] = int(value)
    except OSError:
        pass
    return out


def read_cgroup(memory_dir: str | None, cpu_dir: str | None, version: str | None) -> Reading | None:
    """A container's reading from its cgroup files, as cAdvisor computes it; None when it has no group."""
    if memory_dir is None and cpu_dir is None:
        return None
    cpu_ns = 0
    if cpu_dir is not None:
        if version == "v1":
            cpu_ns = _read_int(os.path.join(cpu_dir, "cpuacct.usage")) or 0
        else:
            cpu_ns = _read_kv(os.path.join(cpu_dir, "cpu.stat")).get("usage_usec", 0) * 1000
    usage = rss = cache = peak = inactive = 0
    if memory_dir is not None:
        stat = _read_kv(os.path.join(memory_dir, "memory.stat"))
        if version == "v1":
            usage = _read_int(os.path.join(memory_dir, "memory.usage_in_bytes")) or 0
            peak = _read_int(os.path.join(memory_dir, "memory.max_usage_in_bytes")) or 0
            inactive, rss, cache = (stat.get("total_inactive_file", 0), stat.get("total_rss", 0),
                                    stat.get("total_cache", 0))
        else:
            usage = _read_int(os.path.join(memory_dir, "memory.current")) or 0
            peak = _read_int(os.path.join(memory_dir, "memory.peak")) or usage
            inactive, rss, cache = stat.get("inactive_file", 0), stat.get("anon", 0), stat.get("file", 0)
    working_set = max(0, usage - inactive)    # handler.go: workingSet = usage - inactive_file, not below 0
    return Reading(cpu_ns, working_set, usage, rss, cache, max(peak, usage))


def scripted_reading(annotations: dict, started: float, now: float) -> Reading:
    """A scripted container's steady use from its annotations (none without them)."""
    cores = float(qty(annotations[ANN_CPU])) if annotations.get(ANN_CPU) else 0.0
    memory = int(qty(annotations[ANN_MEMORY])) if annotations.get(ANN_MEMORY) else 0
    cpu_ns = int(cores * max(0.0, now - started) * 1e9)
    return Reading(cpu_ns, memory, memory, memory, 0, memory)


def read_in_root(root: str, relative: str, limit: int = 64) -> str | None:
    """At most ``limit`` bytes of the regular file ``relative`` under ``root``, a container's root filesystem, or
    None. The container owns everything there and kubesim reads as root, so no component is followed if it is a
    symlink (its /tmp made a link to the host's /etc would otherwise be read here), and a FIFO is not waited on."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds: list[int] = []
    try:
        fds.append(os.open(root, flags | os.O_DIRECTORY))
        *dirs, name = relative.strip("/").split("/")
        for part in dirs:
            fds.append(os.open(part, flags | os.O_DIRECTORY, dir_fd=fds[-1]))
        fds.append(os.open(name, flags | os.O_NONBLOCK, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            return None
        return os.read(fds[-1], limit).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def gpu_util(annotations: dict, written: str | None) -> float | None:
    """The simulated GPU load: what a process wrote (its /tmp/kubesim-gpu-util), else the annotation, else 0."""
    if written is not None:
        try:
            value = float(written.strip() or 0)
            if math.isfinite(value):
                return max(0.0, min(100.0, value))
        except ValueError:
            pass
    try:
        return max(0.0, min(100.0, float(annotations.get(ANN_GPU) or 0)))
    except ValueError:
        return 0.0


def _resources(spec: dict) -> tuple[int, float, float, int]:
    res = spec.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    memory = int(qty(str(limits["memory"]))) if limits.get("memory") else 0
    cpu_req = float(qty(str(requests.get("cpu") or limits.get("cpu") or 0)))
    cpu_lim = float(qty(str(limits["cpu"]))) if limits.get("cpu") else 0.0
    gpus = int(qty(str(limits.get("nvidia.com/gpu") or requests.get("nvidia.com/gpu") or 0)))
    return memory, cpu_req, cpu_lim, gpus


def usage(last: Point, prev: Point) -> tuple[float, int, float] | None:
    """(cores, working set bytes, window seconds) between two readings, as metrics-server's ``resourceUsage``:
    None for a restarted container or a counter that went down (it skips those)."""
    window = last.time - prev.time
    if last.start != prev.start or last.reading.cpu_ns < prev.reading.cpu_ns or window <= 0:
        return None
    return (last.reading.cpu_ns - prev.reading.cpu_ns) / 1e9 / window, last.reading.working_set, window


class UsageSampler:
    """The kubelet's usage, read every ``resolution`` seconds (a cluster component: ``start``/``stop``)."""

    def __init__(self, kubelet, resolution: float = DEFAULT_RESOLUTION):
        self.kubelet, self.resolution = kubelet, resolution
        self.last: dict[tuple[str, str], PodPoints] = {}
        self.prev: dict[tuple[str, str], PodPoints] = {}
        self.node_last: dict[str, tuple[float, int, int]] = {}    # node -> (time, cumulative cpu ns, memory)
        self.node_prev: dict[str, tuple[float, int, int]] = {}
        self._node_cpu: dict[str, int] = {}
        self.scrapes = 0
        self.last_duration = 0.0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def on_event(self, event_type, rt, obj, old) -> None:
        """A cluster component hears every change; the sampler reads on its own clock instead."""

    async def _run(self) -> None:
        while True:
            self.scrape()
            await asyncio.sleep(self.resolution)

    def _container_points(self, run, pod: dict, now: float) -> dict[str, Point]:
        procs = self.kubelet.procs_if_any
        pod_procs = procs.pods.get(run.uid) if procs is not None and run.process else None
        specs = {c["name"]: c for c in pod["spec"].get("containers") or []}
        ann = pod["metadata"].get("annotations") or {}
        out = {}
        for name, c in run.containers.items():
            if not c.running or c.attempt is None or name not in specs:
                continue
            started = c.attempt.started.timestamp()
            memory, cpu_req, cpu_lim, gpus = _resources(specs[name])
            if pod_procs is not None:
                proc = pod_procs.containers.get(name)
                if proc is None:
                    continue
                group = proc.group
                reading = read_cgroup(group.memory_dir, getattr(group, "cpu_dir", None), group.version)
                if reading is None:
                    continue
                rootfs = proc.rootfs
            else:
                reading, rootfs = scripted_reading(ann, started, now), None
            if gpus:
                written = read_in_root(rootfs, f"tmp/{GPU_UTIL_FILE}") if rootfs else None
                reading = Reading(**{**reading.__dict__, "gpu_util": gpu_util(ann, written)})
            out[name] = Point(now, started, reading, memory, cpu_req, cpu_lim, gpus, specs[name].get("image", ""))
        return out

    def scrape(self) -> None:
        """Read every running container once (one pass: the cost grows with the containers, never requests)."""
        t0 = time.monotonic()
        now = time.time()
        current: dict[tuple[str, str], PodPoints] = {}
        pods_rt = self.kubelet.pods_rt
        for key, run in list(self.kubelet.runs.items()):
            pod = self.kubelet.cluster.cache.get(pods_rt, *key)
            if pod is None or pod["metadata"].get("uid") != run.uid:
                continue
            points = self._container_points(run, pod, now)
            if points:
                current[key] = PodPoints(key[0], key[1], run.uid, run.node, pod["metadata"].get("labels") or {},
                                         points)
        nodes: dict[str, tuple[int, int]] = {}
        for key, pp in current.items():
            old = self.last.get(key)
            for name, p in pp.containers.items():
                before = old.containers.get(name) if old is not None and old.uid == pp.uid else None
                grew = p.reading.cpu_ns - (before.reading.cpu_ns if before and before.start == p.start else 0)
                cpu, mem = nodes.get(pp.node, (0, 0))
                nodes[pp.node] = (cpu + max(0, grew), mem + p.reading.working_set)
        self.prev, self.last = self.last, current
        self.node_prev = self.node_last
        self.node_last = {}
        names = {n["metadata"]["name"] for n in self.kubelet.cluster.cache.list(self.kubelet.nodes_rt)}
        for node in names | set(nodes):
            grew, mem = nodes.get(node, (0, 0))
            self._node_cpu[node] = self._node_cpu.get(node, 0) + grew
            self.node_last[node] = (now, self._node_cpu[node], mem)
        self.scrapes += 1
        self.last_duration = time.monotonic() - t0

    # ---- what the metrics API serves (metrics-server's storage GetMetrics) ----------------------------------
    def pod_usage(self, namespace: str, name: str) -> tuple[float, float, dict[str, tuple[float, int]]] | None:
        """(timestamp, window, {container: (cores, bytes)}) once two readings of every container exist."""
        last, prev = self.last.get((namespace, name)), self.prev.get((namespace, name))
        if last is None or prev is None or prev.uid != last.uid:
            return None
        out, stamp, window = {}, None, 0.0
        for cname, p in last.containers.items():
            before = prev.containers.get(cname)
            if before is None:
                return None      # metrics-server: a pod is reported only when all its containers are
            u = usage(p, before)
            if u is None:
                continue
            out[cname] = (u[0], u[1])
            if stamp is None or p.time < stamp:
                stamp, window = p.time, u[2]
        return (stamp, window, out) if stamp is not None else None

    def node_usage(self, node: str) -> tuple[float, float, float, int] | None:
        """(timestamp, window, cores, bytes) of a node once read twice."""
        last, prev = self.node_last.get(node), self.node_prev.get(node)
        if last is None or prev is None or last[0] <= prev[0]:
            return None
        window = last[0] - prev[0]
        return last[0], window, (last[1] - prev[1]) / 1e9 / window, last[2]
