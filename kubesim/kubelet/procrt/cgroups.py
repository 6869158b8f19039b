"""Memory and CPU limits through the kernel's cgroups: one group per container under kubesim's own group,
cgroup v1 (`memory.limit_in_bytes`, `cpu.cfs_quota_us`) or v2 (`memory.max`, `cpu.max`), whichever this
process can write. The kernel's OOM killer kills a process over its limit (SIGKILL: exit 137) and counts it
(`memory.oom_control` / `memory.events` `oom_kill`), which is how the runtime tells OOMKilled from another
SIGKILL, as containerd does from the cgroup's OOM events (containerd pkg/cri/server/events.go, `TaskOOM`).

Upstream for the values: pkg/kubelet/cm/helpers_linux.go (`MilliCPUToQuota`: quota = milliCPU * period / 1000,
period 100000 µs) and the memory limit in bytes as written by runc (libcontainer/cgroups/fs/memory.go).
"""
from __future__ import annotations

import os
import signal

PERIOD_US = 100_000


def _own_path(controller: str | None) -> str:
    """This process's group for a v1 `controller` (or the v2 group when None), from /proc/self/cgroup."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _id, ctrls, path = line.rstrip("\n").split(":", 2)
                if (controller is None and _id == "0") or (controller and controller in ctrls.split(",")):
                    return path
    except OSError:
        pass
    return "/"


def _try_group(parent: str) -> str | None:
    base = os.path.join(parent, f"kubesim-{os.getpid()}")
    try:
        os.makedirs(base, exist_ok=True)
        return base
    except OSError:
        return None


class Cgroups:
    """Where kubesim's per-container groups go, found once at start (`problem` says why limits are off)."""

    def __init__(self, root: str = "/sys/fs/cgroup"):
        self.version, self.memory_base, self.cpu_base, self.problem = None, None, None, None
        self.memory_mount = self.cpu_mount = None   # where each hierarchy is mounted: what a container sees there
        self.acct_base = self.acct_mount = None     # v1 cpuacct when mounted apart from cpu (usage: kubelet/stats.py)
        mem_v1 = os.path.join(root, "memory")
        if os.path.exists(os.path.join(mem_v1, "memory.limit_in_bytes")):
            self.memory_base = _try_group(mem_v1 + _own_path("memory"))
            self.memory_mount = os.path.realpath(mem_v1)
            cpu_v1 = os.path.join(root, "cpu")
            if os.path.exists(os.path.join(cpu_v1, "cpu.cfs_quota_us")):
                self.cpu_base = _try_group(cpu_v1 + _own_path("cpu"))
                self.cpu_mount = os.path.realpath(cpu_v1)       # Debian: cpu -> cpu,cpuacct
            acct_v1 = os.path.join(root, "cpuacct")
            if os.path.realpath(acct_v1) != self.cpu_mount and os.path.exists(os.path.join(acct_v1, "cpuacct.usage")):
                self.acct_base = _try_group(acct_v1 + _own_path("cpuacct"))
                self.acct_mount = os.path.realpath(acct_v1)
            self.version = "v1" if self.memory_base else None
        if self.memory_base is None:
            v2 = root if os.path.exists(os.path.join(root, "cgroup.controllers")) else os.path.join(root, "unified")
            try:
                controllers = open(os.path.join(v2, "cgroup.controllers")).read().split()
            except OSError:
                controllers = []
            if "memory" in controllers:
                self.memory_base = _try_group(v2 + _own_path(None))
                self.cpu_base = self.memory_base if "cpu" in controllers else None
                self.version = "v2" if self.memory_base else None
                self.memory_mount = self.cpu_mount = root       # a container's cgroup namespace shows it here
        if self.memory_base is None:
            self.problem = (f"no writable memory cgroup under {root} (kubesim runs without root or without "
                            "cgroup access): container memory and CPU limits are NOT enforced")

    def group(self, name: str, memory_bytes: int | None, milli_cpu: int | None) -> Group:
        dirs, mem_dir, views = [], None, []
        if self.memory_base:
            mem_dir = os.path.join(self.memory_base, name)
            os.makedirs(mem_dir, exist_ok=True)
            dirs.append(mem_dir)
            views.append((mem_dir, self.memory_mount))
            if memory_bytes:
                limit_file = "memory.limit_in_bytes" if self.version == "v1" else "memory.max"
                _write(os.path.join(mem_dir, limit_file), str(memory_bytes))
        cpu_dir = acct_dir = None
        if self.cpu_base:   # every container: its CPU time is accounted there (a quota only with a limit)
            cpu_dir = os.path.join(self.cpu_base, name)
            os.makedirs(cpu_dir, exist_ok=True)
            if milli_cpu:
                quota = max(1000, milli_cpu * PERIOD_US // 1000)
                if self.version == "v1":
                    _write(os.path.join(cpu_dir, "cpu.cfs_period_us"), str(PERIOD_US))
                    _write(os.path.join(cpu_dir, "cpu.cfs_quota_us"), str(quota))
                else:
                    _write(os.path.join(cpu_dir, "cpu.max"), f"{quota} {PERIOD_US}")
            if cpu_dir not in dirs:
                dirs.append(cpu_dir)
                views.append((cpu_dir, self.cpu_mount))
        if self.acct_base:
            acct_dir = os.path.join(self.acct_base, name)
            os.makedirs(acct_dir, exist_ok=True)
            dirs.append(acct_dir)
            views.append((acct_dir, self.acct_mount))
        return Group(dirs, mem_dir, self.version, views, acct_dir or cpu_dir)

    def remove_base(self) -> None:
        for base in {self.memory_base, self.cpu_base, self.acct_base} - {None}:
            try:
                os.rmdir(base)
            except OSError:
                pass


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class Group:
    """One container's groups: join them (in the child before exec), read its OOM kills, kill all, remove."""

    def __init__(self, dirs: list[str], memory_dir: str | None, version: str | None,
                 views: list[tuple[str, str]] | None = None, cpu_dir: str | None = None):
        self.dirs, self.memory_dir, self.version = dirs, memory_dir, version
        self.cpu_dir = cpu_dir      # where its CPU time is counted (v1 cpuacct.usage, v2 cpu.stat usage_usec)
        # (group dir, where the container sees it): runc bind-mounts a v1 container's own group read-only on
        # /sys/fs/cgroup/<controller> (libcontainer/rootfs_linux.go mountCgroupV1) and mounts cgroup2 inside the
        # container's cgroup namespace on v2 (mountCgroupV2), so a process reads its own limit where it looks
        self.views = views or []

    def join(self) -> None:
        """Called in the child between fork and exec: every process it starts stays in the groups."""
        for d in self.dirs:
            fd = os.open(os.path.join(d, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def oom_kills(self) -> int:
        if not self.memory_dir:
            return 0
        name = "memory.oom_control" if self.version == "v1" else "memory.events"
        try:
            with open(os.path.join(self.memory_dir, name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            pass
        return 0

    def pids(self) -> list[int]:
        out = set()
        for d in self.dirs:
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    out.update(int(x) for x in f.read().split())
            except OSError:
                pass
        return sorted(out)

    def kill_all(self) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        for d in self.dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
