"""A container's writable layer over the image, for the image directories a container must be able to write
(`/etc`: `chpasswd`, `useradd`, a package's config). Each container gets its own overlayfs per directory: the
image's directory is the read-only lower layer (userns.py: a copy of the host's /etc in the pod's ids, without
the host's secrets; the host's own without a user namespace), the upper and work directories live in the pod's
state directory, and the merged view is bound at the directory inside the sandbox. A write changes only that
container's upper layer: the host's `/etc/shadow` and every other container's stay as they were; a restarted
container starts from the image again, as a new container does. The upper layer is container root's.

Upstream: containerd's overlay snapshotter (plugins/snapshots/overlay/overlay.go: `createSnapshot` and
`prepareDirectory` make an active snapshot's `fs` (upperdir) and `work` directories; `mounts` returns the
`overlay` mount with `workdir=...,upperdir=...,lowerdir=<the image's layers>`; `removeCleanupDir` unmounts
what is left under a removed snapshot with MNT_DETACH, as `unmount_under` does), which containerd's CRI
plugin prepares for every new container (internal/cri/server/container_create.go, `createContainer`:
`WithNewSnapshot`, "Prepare container rootfs. This is always writeable"), so a container's root filesystem is
writable and private to it.

bwrap 0.8 has no `--overlay`, so kubesim mounts the overlay itself (mount(2) of type `overlay`, which needs root,
CAP_SYS_ADMIN in the host's mount namespace) and binds the merged directory. Without root the directory
stays the host's, read-only, and `Layer.problem` says so (the pod gets a Warning Event). The mounts are
taken down when the container ends and swept under a pod's directory when the pod is removed.
"""
from __future__ import annotations

import ctypes
import os

from kubesim.kubelet.procrt.sandbox import Mount

LAYERED = ("/etc",)        # the image directories each container gets a writable layer of


def _unescape(path: str) -> str:
    """/proc/self/mountinfo escapes space, tab, newline and backslash as octal."""
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, ch)
    return path


def mounts_under(root: str) -> list[str]:
    """The mount points at or below `root` in this process's mount namespace (deepest first)."""
    root = os.path.realpath(root)
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = _unescape(line.split()[4])
                if point == root or point.startswith(root.rstrip("/") + "/"):
                    found.append(point)
    except OSError:
        return []
    return sorted(set(found), key=lambda p: -p.count("/"))


_libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2


def _mount_overlay(lower: str, upper: str, work: str, merged: str) -> str | None:
    """mount(2) of an overlay at `merged`; None when done, else the error text."""
    opts = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    if _libc.mount(b"overlay", merged.encode(), b"overlay", 0, opts) == 0:
        return None
    return os.strerror(ctypes.get_errno())


def _umount(point: str) -> None:
    _libc.umount2(point.encode(), MNT_DETACH)


def unmount_under(root: str) -> None:
    """Take down every mount at or below `root` (a pod's directory before it is removed)."""
    for point in mounts_under(root):
        _umount(point)


class Layer:
    """One container's writable layers (`<dir>/<n>/{upper,work,merged}` for each of `LAYERED`)."""

    def __init__(self, directory: str, lowers: dict[str, str] | None = None, base: int | None = None):
        """`lowers`: the image's directory for each of `LAYERED` (userns.py: /etc shifted to the pod's ids);
        `base`: the pod's host id of container root, which owns the upper layer (None: kubesim's ids)."""
        self.directory, self.lowers, self.base = directory, lowers or {}, base
        self.mounts: list[Mount] = []
        self.problem: str | None = None

    def mount(self) -> list[Mount]:
        """Mount the overlays; the bind mounts for the sandbox (none when they could not be made: `problem`)."""
        if os.geteuid() != 0:
            self.problem = (f"{', '.join(LAYERED)} read-only: kubesim is not root, so it cannot mount a container's "
                            "writable layer (overlayfs); writes there fail")
            return []
        for i, target in enumerate(LAYERED):
            base = os.path.join(self.directory, str(i))
            upper, work, merged = (os.path.join(base, d) for d in ("upper", "work", "merged"))
            for d in (upper, work, merged):
                os.makedirs(d, exist_ok=True)
            lower = self.lowers.get(target, target)
            if self.base is not None:
                st = os.stat(lower)
                os.chmod(upper, st.st_mode & 0o7777)
                os.chown(upper, st.st_uid, st.st_gid)
            error = _mount_overlay(lower, upper, work, merged)
            if error:
                self.problem = f"{target} read-only: mounting the container's writable layer failed: {error[:300]}"
                self.unmount()
                return []
            self.mounts.append(Mount(merged, target))
        return list(self.mounts)

    def unmount(self) -> None:
        unmount_under(self.directory)
        self.mounts = []
