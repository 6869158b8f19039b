"""The bubblewrap command line of a pod's sandbox and of each container (what runc's config.json is to
containerd).

**An image is a declared set of paths, not the host.** A container's root is its own writable layer: a
directory of the pod's (`<pod>/layers/<container>-<n>/root`, bound at `/`: what it writes there counts as the
container's ephemeral storage and goes with the container, as an overlay snapshot does). Into it, read-only:
the system directories of the host (`IMAGE_DIRS`: /usr, /bin, /sbin, /lib*, /opt; symlinks stay symlinks),
`/etc` as the container's own layer (layers.py), and the nodes file's image directory bound at its own path,
with the Python it was made from (a virtualenv's pyvenv.cfg `home`), *after* the pod's volumes so that no
volume hides it (a home volume at /root over a clone under /root). Nothing else of the host is there: no home
directory, no /var/tmp, no checkout, no stack state, no host socket. `/tmp`, `/var/tmp`, `/root`, `/home` and `/run`
are directories of the writable layer, container root's (sshd makes `/run/sshd` there); `/dev` and
`/proc` are the sandbox's own, with runc's masked paths covered (security.py).

Isolation (bwrap: Linux namespaces): the pod's sandbox process holds the pod's user and network namespaces
(userns.py: container root is an unprivileged host id; its own loopback: two pods may both listen on 8888);
each container joins them (nsenter) and gets its own mount, PID, IPC and UTS namespaces with the pod's name as
hostname, its command as PID 1 (`--as-pid-1`: like runc, no init is added, so SIGTERM reaches the command
only if it handles it, and when it ends every process of the container ends).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

# the image's system directories, bound read-only where the host has them (/etc: the container's layer)
IMAGE_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt")
LAYER_DIRS = {"tmp": 0o1777, "var": 0o755, "var/tmp": 0o1777, "root": 0o700, "home": 0o755, "run": 0o755}
AGENT_PATH = "/.kubesim/agent.py"      # where the sandbox sees kubesim's network agent


def bind(host: str, target: str, read_only: bool) -> list[str]:
    return ["--ro-bind" if read_only else "--bind", host, target]


@dataclass
class Mount:
    host: str
    target: str
    read_only: bool = False


@dataclass
class Launch:
    """Everything one container's process needs. `image` holds the image's own directories (bound read-only
    at their paths, above the volumes); `wrapper` is the argv put before the command (security.py: setpriv
    with the container's user, capabilities and no_new_privs); `seccomp` the filter bwrap loads before it
    execs the wrapper."""
    argv: list[str]
    env: dict[str, str]
    hostname: str
    mounts: list[Mount] = field(default_factory=list)
    cwd: str | None = None
    image: list[str] = field(default_factory=list)
    wrapper: list[str] = field(default_factory=list)
    read_only_root: bool = False
    seccomp: str | None = None          # the compiled BPF file of its seccomp profile (seccomp.py), None: none


def image_paths(root: str | None) -> list[str]:
    """The host directories of an image from the nodes file: the directory itself and, for a virtualenv, the
    installation its interpreter comes from (pyvenv.cfg `home`'s parent), wherever they lie."""
    if not root:
        return []
    out = [os.path.abspath(root)]
    try:
        with open(os.path.join(root, "pyvenv.cfg")) as f:
            home = next((ln.split("=", 1)[1].strip() for ln in f if ln.split("=", 1)[0].strip() == "home"), None)
    except OSError:
        home = None
    if home:
        out.append(os.path.dirname(os.path.realpath(home)))
    return _outermost(out)


def _outermost(paths: list[str]) -> list[str]:
    """`paths` without those inside another of them (binding both would be redundant)."""
    keep = []
    for p in sorted(set(paths), key=len):
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in keep):
            keep.append(p)
    return keep


def system_args(symlinks: bool = True, targets: list[str] = ()) -> list[str]:
    """The image's system directories: read-only binds, symlinks (Debian's /bin -> usr/bin) as symlinks
    (`symlinks` False: make_rootfs made them in the writable layer). A mount target inside one that the host
    lacks (`/opt/skiff`) needs a writable directory above it: the directories on its way are made in the
    writable layer and their entries bound one by one (runc makes the mount point in the rootfs, a layer)."""
    exploded = set()
    for target in targets:
        parts = [p for p in target.split("/") if p]
        for i in range(1, len(parts) + 1):
            if not os.path.lexists("/" + "/".join(parts[:i])):
                exploded.update("/" + "/".join(parts[:j]) for j in range(1, i))
                break
    args: list[str] = []
    for d in IMAGE_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d] if symlinks else []
        elif d in exploded:
            args += _explode(d, exploded)
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


def _explode(d: str, exploded: set[str]) -> list[str]:
    args = ["--perms", "0755", "--dir", d]
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if path in exploded:
            args += _explode(path, exploded)
        elif os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += ["--ro-bind", path, path]
    return args


def make_rootfs(path: str, owner: tuple[int, int] | None) -> None:
    """A container's writable layer directory with the image's writable directories, owned by container root
    (`owner`: its host uid and gid; None: kubesim's own)."""
    os.makedirs(path, exist_ok=True)
    for rel, mode in [("", 0o755), *LAYER_DIRS.items()]:
        d = os.path.join(path, rel)
        os.makedirs(d, exist_ok=True)
        os.chmod(d, mode)
        if owner is not None:
            os.chown(d, *owner)
    links = {os.path.join(path, "var", "run"): "/run",
             **{os.path.join(path, d[1:]): os.readlink(d) for d in IMAGE_DIRS if os.path.islink(d)}}
    for link, to in links.items():
        if not os.path.lexists(link):
            os.symlink(to, link)


def mount_target(target: str) -> str:
    """Where a mount lands when its destination is a symlink in the image: runc follows it inside the rootfs
    (libcontainer/rootfs_linux.go `mountToRootfs`: `securejoin.SecureJoin(rootfs, m.Destination)`), so
    `/etc/localtime` -> `/usr/share/zoneinfo/Etc/UTC` mounts on the zone file. bwrap would resolve an absolute
    link outside the new root and fail; the image's system directories are the host's, so the host resolves it
    (only for targets inside them)."""
    if os.path.islink(target) and any(target.startswith(d + "/") for d in ("/etc", *IMAGE_DIRS)):
        real = os.path.realpath(target)
        if os.path.exists(real):
            return real
    return target


def _parents(target: str) -> list[str]:
    """The directories above a mount point, made 0755 where missing (bwrap would make them 0700, which the
    pod's root, not the host's, could not search)."""
    parts = [p for p in target.split("/") if p][:-1]
    out: list[str] = []
    for i in range(1, len(parts) + 1):
        path = "/" + "/".join(parts[:i])
        if not any(path == d or path.startswith(d + "/") for d in (*IMAGE_DIRS, "/etc")):
            out += ["--perms", "0755", "--dir", path]
    return out


def container_args(launch: Launch, rootfs: str, info_fd: int, cgroup_views: list[tuple[str, str]] = (),
                   proc_args: list[str] = (), block_fd: int | None = None, userns_fd=None) -> list[str]:
    """bwrap's argv for one container (run inside the pod's user and network namespaces). Order matters:
    the writable layer at `/`, the system directories, the volumes, then the image's own directories (nothing
    hides them), `/proc` with runc's masks (`proc_args`), the container's cgroup (read-only, as runc mounts it
    for an unprivileged one); `readOnlyRootFilesystem` remounts `/` read-only last. bwrap runs as host root:
    it reaches every source (a clone under /root, 0700) and its mount namespace belongs to the host's user
    namespace, so nothing inside can change a mount; with `userns_fd` it then enters the pod's user namespace
    (`--userns2`) keeping its capabilities there, which the wrapper (setpriv) narrows."""
    targets = [m.target for m in launch.mounts] + ([launch.cwd] if launch.cwd else [])
    args = ["bwrap", *bind(rootfs, "/", False), *system_args(False, targets), "--dev", "/dev", "--proc", "/proc", *proc_args,
            "--unshare-pid", "--unshare-uts", "--unshare-ipc", "--hostname", launch.hostname, "--as-pid-1",
            "--die-with-parent", "--new-session", "--info-fd", str(info_fd)]
    if block_fd is not None:
        args += ["--block-fd", str(block_fd)]
    if userns_fd is not None:
        args += ["--userns2", str(userns_fd), "--cap-add", "ALL"]
    for m in sorted(launch.mounts, key=lambda m: m.target.count("/")):
        args += [*_parents(mount_target(m.target)), *bind(m.host, mount_target(m.target), m.read_only)]
    for path in launch.image:
        args += [*_parents(path), *bind(path, path, True)]
    for host, target in cgroup_views:
        args += [*_parents(target), *bind(host, target, True)]
    if launch.read_only_root:
        args += ["--remount-ro", "/"]
    if launch.seccomp:
        args += ["--seccomp", "{fd:" + launch.seccomp + "}"]
    if launch.cwd:
        args += ["--chdir", launch.cwd]
    return [*args, "--", *launch.wrapper, *launch.argv]


def sandbox_args(hostname: str, info_fd, python: list[str], interpreter: str, agent: str, socket: str,
                 run_dir: str) -> list[str]:
    """The pod sandbox (the pause container's part): the network agent (kubesim's `interpreter`, `python` the
    directories it needs) holding the pod's network namespace; it sees only the system directories, its
    script and `run_dir`."""
    return ["bwrap", *system_args(), *sum((bind(p, p, True) for p in _outermost(python)), []),
            *bind(agent, AGENT_PATH, True), "--dev", "/dev", "--proc", "/proc", *bind(run_dir, run_dir, False),
            "--unshare-net", "--unshare-pid", "--unshare-uts", "--hostname", hostname, "--as-pid-1",
            "--die-with-parent", "--info-fd", str(info_fd), "--", interpreter, "-I", AGENT_PATH, socket]


def resolve(argv0: str, env: dict[str, str], mounts: list[Mount], cwd: str | None) -> str | None:
    """runc's exec lookup (libcontainer/standard_init_linux.go: exec.LookPath on the container's PATH) seen
    from the host: None when found, else the runtime's error text. `mounts`: the volumes and the image's
    paths (a path outside every mount is the image's system directories' or not there)."""
    def host_path(path: str) -> str | None:
        best = max((m for m in mounts if path == m.target or path.startswith(m.target.rstrip("/") + "/")),
                   key=lambda m: len(m.target), default=None)
        if best:
            return best.host + path[len(best.target):]
        visible = any(path == d or path.startswith(d + "/") for d in (*IMAGE_DIRS, "/etc"))
        return path if visible else None

    def executable(path: str) -> bool:
        hp = host_path(path)
        return hp is not None and os.path.isfile(hp) and os.access(hp, os.X_OK)

    if "/" in argv0:
        path = argv0 if argv0.startswith("/") else os.path.join(cwd or "/", argv0)
        hp = host_path(path)
        if hp is None or not os.path.exists(hp):
            return f'exec: "{argv0}": stat {argv0}: no such file or directory'
        return None if executable(path) else f'exec: "{argv0}": permission denied'
    for d in (env.get("PATH") or "").split(":"):
        if d and executable(os.path.join(d, argv0)):
            return None
    return f'exec: "{argv0}": executable file not found in $PATH'
