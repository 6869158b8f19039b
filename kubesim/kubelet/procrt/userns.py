"""Container root is not host root: each process pod runs in a user namespace of its own, as Kubernetes runs a
`hostUsers: false` pod (KEP-127, keps/sig-node/127-user-namespaces: a range of 65,536 host ids per pod,
disjoint from every other pod's and from the host's own 0-65535; container id N is host id base+N).

The pod's sandbox is started inside a new user namespace whose maps kubesim (root) writes itself into
/proc/<pid>/uid_map and gid_map (user_namespaces(7): a process with CAP_SETUID in the parent namespace may map
any ids), then joins it with util-linux's `nsenter --user` (which becomes id 0 there): no setuid helper
(`newuidmap`) and no /etc/subuid entry are needed. The holder is `unshare --user` (util-linux), the
namespace's first process. Every container joins the sandbox's user and network namespaces, so the network
namespace belongs to the pod's user namespace (binding port 22 needs CAP_NET_BIND_SERVICE there only).

Ranges (`IdRanges`): the lowest free slot, slot 0 being the host's (the kubelet's userns manager also hands out
free 65,536-id blocks past the host's: pkg/kubelet/userns/userns_manager.go); deterministic for a given
order of pods. Free on the machine, not only in this kubesim: a slot is held by an exclusive flock(2) on
`RANGES_DIR/<slot>.lock` for as long as a pod has it, so two kubesims on one machine never hand out the same
range, and a killed kubesim's slots are free again (the kernel drops its locks when it exits). What the pod writes is owned by its range: kubesim chowns the pod's directories (writable
layer, emptyDir, config volumes, the /etc layer) to it. A PersistentVolume keeps container ids on disk and
is mounted idmapped through the pod's namespace (`idmapped_mount`, as KEP-127 does), so pods of different
ranges share it, at once too; where the file system cannot, its directory records the base it is owned by
(`<pv>.idbase` beside it) and is shifted to the next pod's base when it is mounted (`adopt`).

The image's /etc is a copy per range (kept in `IMAGE_CACHE` for the machine), shifted, without the host's secrets: files the host keeps from other
users (mode without o+r: /etc/shadow, ssh host keys) are left out, except shadow/gshadow, copied with every
password locked (so `chpasswd` works on the container's own copy). A copy is named by its range and a stamp of
the host's /etc; `prune_images` (at every kubesim start, and when a pod releases its range) removes the copies
of an older stamp whose range no pod on the machine holds, and the half-made copies of dead processes: the
cache holds at most one copy per range ever in use at once.
"""
from __future__ import annotations

import asyncio
import ctypes
import fcntl
import os
import platform
import shutil

RANGE = 65536
FIRST_SLOT = 1           # 0-65535: the host's ids
SHADOW = {"shadow", "shadow-", "gshadow", "gshadow-"}
# the shifted /etc copies, kept for the machine (making one takes seconds; every kubesim reuses them)
IMAGE_CACHE = "/var/lib/kubesim/images"
RANGES_DIR = "/var/lib/kubesim/ranges"     # <slot>.lock, flock'ed while a pod of some kubesim holds the slot


def problem() -> str | None:
    """Why pods cannot get their own user namespace here (None when they can)."""
    if os.geteuid() != 0:
        return ("kubesim is not root, so it cannot map a pod's ids: pods run WITHOUT a user namespace of their own "
                "(container root is kubesim's user) and without their securityContext's user and capabilities")
    if not (shutil.which("unshare") or os.path.exists("/usr/bin/unshare")):
        return "util-linux's unshare is missing: pods run WITHOUT a user namespace (container root is host root)"
    return None


class IdRanges:
    """Which 65,536-id block each pod holds (lowest free on the machine first: see the module's docstring).
    `lock_dir` None: within this object only (kubesim without root)."""

    def __init__(self, lock_dir: str | None = RANGES_DIR):
        self.slots: dict[str, int] = {}
        self.lock_dir = lock_dir
        self._locks: dict[int, int] = {}          # slot -> the descriptor holding its flock

    def allocate(self, pod_uid: str) -> int:
        if pod_uid not in self.slots:
            used = set(self.slots.values())
            self.slots[pod_uid] = next(s for s in range(FIRST_SLOT, 1 << 15) if s not in used and self._lock(s))
        return self.slots[pod_uid] * RANGE

    def _lock(self, slot: int) -> bool:
        if self.lock_dir is None:
            return True
        fd = lock_slot(self.lock_dir, slot)
        if fd is None:
            return False
        self._locks[slot] = fd
        return True

    def release(self, pod_uid: str) -> int | None:
        """The pod's range is free again; its base (None: it had none)."""
        slot = self.slots.pop(pod_uid, None)
        fd = self._locks.pop(slot, None) if slot is not None else None
        if fd is not None:
            os.close(fd)
        return None if slot is None else slot * RANGE

    def close(self) -> None:
        for uid in list(self.slots):
            self.release(uid)


def lock_slot(lock_dir: str, slot: int) -> int | None:
    """A descriptor holding `slot`'s lock, None when another holder has it."""
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(lock_dir, f"{slot}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _stamp(source: str) -> int:
    """The host /etc's stamp (a changed /etc, passwd or group: a new copy)."""
    return sum(os.stat(os.path.join(source, f)).st_mtime_ns for f in ("", "passwd", "group")
               if os.path.exists(os.path.join(source, f))) % 10**12


def prune_images(cache_dir: str, lock_dir: str | None, source: str = "/etc") -> list[str]:
    """Remove the /etc copies of another stamp than the host's whose range is free on the machine (its slot's
    lock can be taken: no pod of any kubesim uses it), and the temporary copies of dead processes. Returns
    what it removed."""
    try:
        names = os.listdir(cache_dir)
    except OSError:
        return []
    current, removed = _stamp(source), []
    for name in names:
        parts = name.split(".")
        path = os.path.join(cache_dir, name)
        if name.endswith(".tmp") and len(parts) >= 3:
            if parts[-2].isdigit() and not os.path.exists(f"/proc/{parts[-2]}"):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(name)
            continue
        fields = name.split("-")
        if len(fields) != 3 or fields[0] != "etc" or not fields[1].isdigit() or not fields[2].isdigit():
            continue
        if int(fields[2]) == current:
            continue
        fd = lock_slot(lock_dir, int(fields[1]) // RANGE) if lock_dir is not None else None
        if lock_dir is not None and fd is None:
            continue                                       # a pod somewhere still runs on it
        try:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
        finally:
            if fd is not None:
                os.close(fd)
    return removed


async def holder(base: int, unshare: str) -> asyncio.subprocess.Process:
    """A process in a new user namespace mapping 0-65535 to `base`...; it ends when its stdin closes."""
    proc = await asyncio.create_subprocess_exec(unshare, "--user", "--", "/bin/sh", "-c", "echo; read _",
                                                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    await proc.stdout.readline()           # the shell runs: the namespace exists
    for name in ("uid_map", "gid_map"):
        with open(f"/proc/{proc.pid}/{name}", "w") as f:
            f.write(f"0 {base} {RANGE}\n")
    return proc


def shift_tree(path: str, old: int | None, new: int) -> None:
    """Every file under `path` moved from the range at `old` to the one at `new` (ids outside `old`'s range,
    e.g. the host's, are taken as container ids)."""
    def moved(i: int) -> int:
        rel = i - old if old is not None and old <= i < old + RANGE else i
        return new + rel if 0 <= rel < RANGE else new
    for root, dirs, files in os.walk(path):
        for name in [".", *dirs, *files]:
            p = os.path.join(root, name) if name != "." else root
            try:
                st = os.lstat(p)
                os.lchown(p, moved(st.st_uid), moved(st.st_gid))
                if not os.path.islink(p) and st.st_mode & 0o6000:
                    os.chmod(p, st.st_mode & 0o7777)       # chown clears set-id bits: keep them
            except OSError:
                pass


def adopt(path: str, base: int) -> None:
    """A PersistentVolume's directory owned by the range at `base`, shifted from the range it had."""
    marker = path.rstrip("/") + ".idbase"
    try:
        old = int(open(marker).read().strip())
    except (OSError, ValueError):
        old = None
    if old == base:
        return
    shift_tree(path, old, base)
    with open(marker, "w") as f:
        f.write(str(base))


def image_etc(cache_dir: str, base: int | None, source: str = "/etc") -> str:
    """The image's /etc for the range at `base` (None: the host's /etc itself), made once per range."""
    if base is None:
        return source
    target = os.path.join(cache_dir, f"etc-{base}-{_stamp(source)}")
    if os.path.isdir(target):
        return target
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    tmp = f"{target}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for root, dirs, files in os.walk(source):
        rel = os.path.relpath(root, source)
        out = os.path.normpath(os.path.join(tmp, rel))
        st = os.lstat(root)
        os.makedirs(out, exist_ok=True)
        os.chmod(out, st.st_mode & 0o7777)
        os.lchown(out, base + st.st_uid % RANGE, base + st.st_gid % RANGE)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            _copy_one(os.path.join(root, name), os.path.join(out, name), base, rel == "." and name in SHADOW)
    os.rename(tmp, target)
    return target


def _copy_one(src: str, dst: str, base: int, shadow: bool) -> None:
    st = os.lstat(src)
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
    elif not os.path.isfile(src):
        return
    elif shadow:
        with open(src) as f:
            lines = [ln.rstrip("\n").split(":") for ln in f]
        with open(dst, "w") as f:
            f.writelines(":".join([p[0], "!" if "gshadow" in src else "*", *p[2:]]) + "\n" for p in lines if p[0])
        os.chmod(dst, st.st_mode & 0o7777)
    elif st.st_mode & 0o004:
        shutil.copy2(src, dst, follow_symlinks=False)
    else:
        return                                     # the host's own secrets are not part of the image
    os.lchown(dst, base + st.st_uid % RANGE, base + st.st_gid % RANGE)


def volume_ownership(path: str, base: int | None, fs_group: int | None) -> None:
    """With `fsGroup`, the kubelet's SetVolumeOwnership (pkg/volume/volume_linux.go) on a writable volume: every
    file's group is fsGroup (in the pod's range), group read-write, directories setgid so new files keep it."""
    if fs_group is None:
        return
    gid = (base or 0) + int(fs_group)
    for root, dirs, files in os.walk(path):
        for name in [".", *dirs, *files]:
            p = root if name == "." else os.path.join(root, name)
            if os.path.islink(p):
                continue
            st = os.lstat(p)
            os.lchown(p, st.st_uid, gid)
            os.chmod(p, st.st_mode & 0o7777 | (0o2770 if os.path.isdir(p) else 0o660))


# --- idmapped mounts (mount_setattr(2) MOUNT_ATTR_IDMAP): a PersistentVolume seen through the pod's map ----------
_SYS_OPEN_TREE, _SYS_MOVE_MOUNT, _SYS_MOUNT_SETATTR = 428, 429, 442      # x86_64 and aarch64's generic table
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _AT_RECURSIVE = 1, 0x1000, 0x8000
_MOUNT_ATTR_IDMAP, _MOVE_MOUNT_F_EMPTY_PATH = 0x00100000, 0x4


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def idmapped_mount(source: str, target: str, userns_path: str) -> str | None:
    """Mount `source` at `target` idmapped through the user namespace at `userns_path` (on disk a file keeps its
    container id, 0 for container root; through the mount the pod sees it as its own), as the kubelet asks the
    runtime to mount a `hostUsers: false` pod's volumes (KEP-127 "Handling of volumes"). None when done, else
    why not (a file system without idmapped mounts)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if platform.machine() not in ("x86_64", "aarch64"):
        return f"idmapped mounts: syscall numbers unknown on {platform.machine()}"
    os.makedirs(target, exist_ok=True)
    tree = libc.syscall(_SYS_OPEN_TREE, -100, source.encode(), _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE)
    if tree < 0:
        return f"open_tree: {os.strerror(ctypes.get_errno())}"
    ns = os.open(userns_path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, ns)
        if libc.syscall(_SYS_MOUNT_SETATTR, tree, b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                        ctypes.sizeof(attr)) < 0:
            return f"mount_setattr: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(_SYS_MOVE_MOUNT, tree, b"", -100, target.encode(), _MOVE_MOUNT_F_EMPTY_PATH) < 0:
            return f"move_mount: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ns)
        os.close(tree)
    return None
