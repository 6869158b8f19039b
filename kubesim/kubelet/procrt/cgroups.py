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
                if self.memory_base:
                    _enable(self.memory_base, controllers)
                self.cpu_base = self.memory_base if "cpu" in controllers else None
                self.version = "v2" if self.memory_base else None
                self.memory_mount = self.cpu_mount = root       # a container's cgroup namespace shows it here
        self.pids_base = None
        if self.version == "v1" and os.path.isdir(os.path.join(root, "pids")):
            self.pids_base = _try_group(os.path.join(root, "pids") + _own_path("pids"))
        elif self.version == "v2" and "pids" in controllers:
            self.pids_base = self.memory_base
        if self.memory_base is None:
            self.problem = (f"no writable memory cgroup under {root} (kubesim runs without root or without "
                            "cgroup access): container memory and CPU limits are NOT enforced")

    def pod(self, pod_name: str, pids_max: int | None) -> str | None:
        """The pod's own group (the kubelet's pod<uid> cgroup) with its pid limit (`pids.max`); None without
        a pids controller. v2: the containers' groups go below it; v1: the pids hierarchy holds it alone."""
        if not self.pids_base:
            return None
        path = os.path.join(self.pids_base, pod_name)
        os.makedirs(path, exist_ok=True)
        if self.version == "v2":
            _enable(path, ["memory", "cpu", "pids"])
        if pids_max:
            _write(os.path.join(path, "pids.max"), str(pids_max))
        return path

    def remove_pod(self, path: str | None) -> None:
        if path:
            try:
                os.rmdir(path)
            except OSError:
                pass

    def group(self, name: str, memory_bytes: int | None, milli_cpu: int | None, pod: str | None = None) -> Group:
        """A container's groups; `pod`: its pod's group (Cgroups.pod), whose pid limit it shares."""
        dirs, mem_dir, views, shared = [], None, [], []
        if pod and self.version == "v2":
            name = os.path.join(os.path.relpath(pod, self.memory_base), name)
        elif pod:
            shared.append(pod)
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
        return Group(dirs, mem_dir, self.version, views, acct_dir or cpu_dir, shared)

    def remove_base(self) -> None:
        for base in {self.memory_base, self.cpu_base, self.acct_base} - {None}:
            try:
                os.rmdir(base)
            except OSError:
                pass


def _enable(path: str, controllers: list[str]) -> None:
    """v2: let the groups below `path` use `controllers` (cgroup.subtree_control); best effort."""
    for c in controllers:
        try:
            _write(os.path.join(path, "cgroup.subtree_control"), f"+{c}")
        except OSError:
            pass


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class Group:
    """One container's groups: add its process, read its OOM kills, kill all, remove."""

    def __init__(self, dirs: list[str], memory_dir: str | None, version: str | None,
                 views: list[tuple[str, str]] | None = None, cpu_dir: str | None = None,
                 shared: list[str] | None = None):
        self.dirs, self.memory_dir, self.version = dirs, memory_dir, version
        self.cpu_dir = cpu_dir      # where its CPU time is counted (v1 cpuacct.usage, v2 cpu.stat usage_usec)
        self.shared = shared or []          # the pod's groups it joins too (v1 pids), not its own to kill
        # (group dir, where the container sees it): runc bind-mounts a v1 container's own group read-only on
        # /sys/fs/cgroup/<controller> (libcontainer/rootfs_linux.go mountCgroupV1) and mounts cgroup2 inside the
        # container's cgroup namespace on v2 (mountCgroupV2), so a process reads its own limit where it looks
        self.views = views or []

    def add(self, pid: int) -> None:
        """Move process `pid` into the groups (before it runs its command: bwrap waits on --block-fd)."""
        for d in [*self.dirs, *self.shared]:
            _write(os.path.join(d, "cgroup.procs"), str(pid))

    def exec_prefix(self) -> list[str]:
        """An argv prefix that puts the process in the groups and then execs the rest (kubectl exec):
        the shell writes its own pid into each cgroup.procs, as cgexec does."""
        files = [os.path.join(d, "cgroup.procs") for d in [*self.dirs, *self.shared]]
        script = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *files, "--"]

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
