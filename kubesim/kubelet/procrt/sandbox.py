"""The bubblewrap command line of a pod's sandbox and of each container (what runc's config.json is to
containerd). The host's filesystem, read-only, stands for the image: bwrap's root is a fresh tmpfs (a
container's writable layer, gone with the container) into which every top-level host directory is bound
read-only; a volume's mountPath that does not exist on the host is made by replacing the directories above
it with tmpfs copies of their listings (so nothing is ever created on the host). `/tmp` is a per-container
writable directory, `/run` an empty per-container tmpfs (an image's `/run` is empty and writable: sshd makes
`/run/sshd` there); `/dev` and `/proc` are the sandbox's own.

Isolation (bwrap: Linux namespaces): the pod's sandbox process holds the pod's network namespace (its own
loopback: two pods may both listen on 8888); each container joins it (nsenter) and gets its own PID and UTS
namespaces with the pod's name as hostname, its command as PID 1 (`--as-pid-1`: like runc, no init is added,
so SIGTERM reaches the command only if it handles it, and when it ends every process of the container ends).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

SKIP_TOP = {"proc", "dev", "tmp", "run", "lost+found"}     # the container's own (/run: an empty tmpfs)


@dataclass
class Mount:
    host: str
    target: str
    read_only: bool = False


@dataclass
class Launch:
    """Everything one container's process needs."""
    argv: list[str]
    env: dict[str, str]
    hostname: str
    mounts: list[Mount] = field(default_factory=list)
    cwd: str | None = None


def _host_exists(path: str) -> bool:
    return os.path.lexists(path)


def root_args(targets: list[str]) -> list[str]:
    """Bind the host's directories read-only into the tmpfs root; directories above a mount target that the
    host lacks are rebuilt as tmpfs listings so bwrap can create the mount point in them."""
    exploded = {"/"}
    for target in targets:
        parts = [p for p in target.split("/") if p]
        if not parts or parts[0] in SKIP_TOP:
            continue
        for i in range(1, len(parts) + 1):
            if not _host_exists("/" + "/".join(parts[:i])):
                exploded.update("/" + "/".join(parts[:j]) for j in range(1, i))
                break
    args: list[str] = []
    for d in sorted(exploded, key=lambda p: (p.count("/"), p)):
        if d != "/":
            args += ["--dir", d]
        try:
            children = sorted(os.listdir(d))
        except OSError:
            continue
        for name in children:
            path = os.path.join(d, name)
            if path in exploded or (d == "/" and name in SKIP_TOP):
                continue
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            else:
                args += ["--ro-bind-try", path, path]
    return args


def mount_target(target: str) -> str:
    """Where a mount lands when its destination is a symlink in the image: runc follows it inside the rootfs
    (libcontainer/rootfs_linux.go `mountToRootfs`: `securejoin.SecureJoin(rootfs, m.Destination)`), so
    `/etc/localtime` -> `/usr/share/zoneinfo/Etc/UTC` mounts on the zone file. bwrap would resolve an absolute
    link outside the new root and fail; the image is the host's filesystem, so the host resolves it."""
    if os.path.islink(target):
        real = os.path.realpath(target)
        if os.path.exists(real):
            return real
    return target


def container_args(launch: Launch, tmp_dir: str, info_fd: int,
                   cgroup_views: list[tuple[str, str]] = ()) -> list[str]:
    """bwrap's argv for one container (run inside the pod's network namespace); ``cgroup_views``: the container's
    own cgroup directories and where it sees them (read-only, as runc mounts them for an unprivileged one)."""
    targets = [m.target for m in launch.mounts] + ([launch.cwd] if launch.cwd else [])
    args = ["bwrap", *root_args(targets), "--dev", "/dev", "--proc", "/proc", "--bind", tmp_dir, "/tmp",
            "--tmpfs", "/run",
            "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--hostname", launch.hostname, "--as-pid-1",
            "--die-with-parent", "--new-session", "--info-fd", str(info_fd)]
    for m in sorted(launch.mounts, key=lambda m: m.target.count("/")):
        args += ["--ro-bind" if m.read_only else "--bind", m.host, mount_target(m.target)]
    for host, target in cgroup_views:
        args += ["--ro-bind", host, target]
    if launch.cwd:
        args += ["--chdir", launch.cwd]
    return [*args, "--", *launch.argv]


def sandbox_args(hostname: str, info_fd: int, argv: list[str], run_dir: str) -> list[str]:
    """The pod sandbox (the pause container's part): a process holding the pod's network namespace."""
    return ["bwrap", *root_args([]), "--dev", "/dev", "--proc", "/proc", "--bind", run_dir, run_dir,
            "--unshare-net", "--unshare-pid", "--unshare-uts", "--hostname", hostname, "--as-pid-1",
            "--die-with-parent", "--info-fd", str(info_fd), "--", *argv]


def resolve(argv0: str, env: dict[str, str], mounts: list[Mount], cwd: str | None) -> str | None:
    """runc's exec lookup (libcontainer/standard_init_linux.go: exec.LookPath on the container's PATH) seen
    from the host: None when found, else the runtime's error text."""
    def host_path(path: str) -> str:
        best = max((m for m in mounts if path == m.target or path.startswith(m.target.rstrip("/") + "/")),
                   key=lambda m: len(m.target), default=None)
        return best.host + path[len(best.target):] if best else path

    def executable(path: str) -> bool:
        hp = host_path(path)
        return os.path.isfile(hp) and os.access(hp, os.X_OK)

    if "/" in argv0:
        path = argv0 if argv0.startswith("/") else os.path.join(cwd or "/", argv0)
        if not os.path.exists(host_path(path)):
            return f'exec: "{argv0}": stat {argv0}: no such file or directory'
        return None if executable(path) else f'exec: "{argv0}": permission denied'
    for d in (env.get("PATH") or "").split(":"):
        if d and executable(os.path.join(d, argv0)):
            return None
    return f'exec: "{argv0}": executable file not found in $PATH'
