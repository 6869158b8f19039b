"""seccomp on process nodes: the container's `securityContext.seccompProfile` (the container's, else the pod's) as
the kubelet and containerd apply it, compiled to the BPF program bwrap's `--seccomp FD` loads just before it
execs the container's first program (setpriv, then the command: the filter holds for every process after).

- `RuntimeDefault`: containerd's default profile (seccomp_default.py, copied from containerd), for the
  container's capabilities (CAP_SYS_ADMIN allows mount/unshare/setns..., CAP_SYS_PTRACE kcmp..., as upstream).
- unset: the node's `seccompDefault` (the kubelet's KubeletConfiguration field, nodes file; on process nodes
  **true by default**, since their image is the host's own files; the kubelet's own default is false, so
  unset means Unconfined there), i.e. RuntimeDefault.
- `Unconfined`: no filter.
- `Localhost`: the OCI `LinuxSeccomp` JSON document at `<profile root>/<localhostProfile>` (the kubelet's
  `<root-dir>/seccomp`; here the nodes' state directory's `seccomp/`), compiled the same way; a missing or bad
  file is a CreateContainerError with the runtime's words, as containerd's `cannot load seccomp profile`.

Compiled through libseccomp (libseccomp.so.2, Debian's libseccomp2: what runc itself links) with ctypes: the
same rule translation runc does (libcontainer/seccomp/seccomp_linux.go `InitSeccomp`: the default action,
the architectures, each rule with its conditions, an unknown syscall name skipped, a rule whose action is the
default skipped). A Python binding from PyPI (`pyseccomp`, `seccomp`) would wrap the same library and add a
dependency; the dozen calls needed are plain C. Syscalls newer than the installed libseccomp (2.5.4 knows none
past 6.4's) are added by their number on x86_64 (golang.org/x/sys/unix zsysnum_linux_amd64.go), so that
`fchmodat2` or `cachestat` are allowed as on an up-to-date runc, not refused.

Where libseccomp is missing, `problem()` says so; a container asking for a filter then does not start (a
clear CreateContainerError naming the missing library), never runs unfiltered silently.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import json
import os
import platform
import threading

from kubesim.kubelet.procrt import seccomp_default

LIBRARY = "libseccomp.so.2"
ACT_ALLOW, ACT_KILL_PROCESS, ACT_KILL_THREAD, ACT_TRAP, ACT_LOG = 0x7FFF0000, 0x80000000, 0x0, 0x00030000, 0x7FFC0000
ACTIONS = {"SCMP_ACT_ALLOW": ACT_ALLOW, "SCMP_ACT_KILL": ACT_KILL_THREAD, "SCMP_ACT_KILL_THREAD": ACT_KILL_THREAD,
           "SCMP_ACT_KILL_PROCESS": ACT_KILL_PROCESS, "SCMP_ACT_TRAP": ACT_TRAP, "SCMP_ACT_LOG": ACT_LOG}
OPS = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4, "SCMP_CMP_GE": 5, "SCMP_CMP_GT": 6,
       "SCMP_CMP_MASKED_EQ": 7}
ARCH_NAMES = {"SCMP_ARCH_X86_64": "x86_64", "SCMP_ARCH_X86": "x86", "SCMP_ARCH_X32": "x32",
              "SCMP_ARCH_ARM": "arm", "SCMP_ARCH_AARCH64": "aarch64", "SCMP_ARCH_S390": "s390",
              "SCMP_ARCH_S390X": "s390x", "SCMP_ARCH_RISCV64": "riscv64"}
# x86_64 numbers of syscalls libseccomp 2.5.4 does not know (golang.org/x/sys/unix zsysnum_linux_amd64.go)
NEWER_X86_64 = {"uretprobe": 335, "cachestat": 451, "fchmodat2": 452, "map_shadow_stack": 453, "futex_wake": 454,
                "futex_wait": 455, "futex_requeue": 456, "statmount": 457, "listmount": 458,
                "lsm_get_self_attr": 459, "lsm_set_self_attr": 460, "lsm_list_modules": 461, "mseal": 462,
                "setxattrat": 463, "getxattrat": 464, "listxattrat": 465, "removexattrat": 466}
DEFAULT_ANNOTATION = "kubesim.io/seccomp-default"      # on a Node: the nodes file's seccompDefault


class ProfileError(Exception):
    """A profile that cannot be loaded or compiled (the message is the runtime's)."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


_lib = None
_lib_problem: str | None = None
_lock = threading.Lock()


def _library():
    global _lib, _lib_problem
    with _lock:
        if _lib is None and _lib_problem is None:
            try:
                lib = ctypes.CDLL(LIBRARY)
            except OSError as e:
                _lib_problem = (f"libseccomp is missing ({LIBRARY}: {e}): containers asking for a seccomp profile "
                                "(RuntimeDefault, the default on process nodes, or Localhost) cannot start; "
                                "install Debian's libseccomp2 (make demo / make test do)")
                return None
            lib.seccomp_init.restype, lib.seccomp_init.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
            lib.seccomp_release.argtypes = [ctypes.c_void_p]
            lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
            lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
            lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
            lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
            lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                                   ctypes.POINTER(_ArgCmp)]
            lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
            _lib = lib
        return _lib


def problem() -> str | None:
    """Why no seccomp filter can be made here (None when one can)."""
    _library()
    return _lib_problem


def _action(name: str, errno_ret: int | None) -> int:
    if name == "SCMP_ACT_ERRNO":
        return 0x00050000 | ((errno.EPERM if errno_ret is None else int(errno_ret)) & 0xFFFF)
    if name == "SCMP_ACT_TRACE":
        return 0x7FF00000 | ((errno.EPERM if errno_ret is None else int(errno_ret)) & 0xFFFF)
    if name not in ACTIONS:
        raise ProfileError(f"invalid action {name!r}")
    return ACTIONS[name]


def _conditions(args: list[dict]) -> list[list[_ArgCmp]]:
    """runc's rule split: conditions on one argument index each AND together; several on the same index make
    one rule each (OR)."""
    conds = []
    for a in args:
        if a.get("op") not in OPS:
            raise ProfileError(f"invalid operator {a.get('op')!r}")
        op = OPS[a["op"]]
        if op == OPS["SCMP_CMP_MASKED_EQ"]:
            conds.append(_ArgCmp(int(a["index"]), op, int(a.get("value", 0)), int(a.get("valueTwo", 0))))
        else:
            conds.append(_ArgCmp(int(a["index"]), op, int(a.get("value", 0)), 0))
    indexes = [c.arg for c in conds]
    if len(set(indexes)) == len(indexes):
        return [conds]
    return [[c] for c in conds]


def compile_bpf(prof: dict) -> bytes:
    """The BPF program of an OCI `LinuxSeccomp` document (libseccomp's seccomp_export_bpf)."""
    lib = _library()
    if lib is None:
        raise ProfileError(_lib_problem)
    default = _action(prof.get("defaultAction", ""), prof.get("defaultErrnoRet"))
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise ProfileError("seccomp_init failed")
    try:
        for arch in prof.get("architectures") or []:
            token = lib.seccomp_arch_resolve_name(ARCH_NAMES.get(arch, arch.lower()).encode())
            rc = lib.seccomp_arch_add(ctx, token) if token else -errno.EINVAL
            if rc < 0 and rc != -errno.EEXIST:
                raise ProfileError(f"architecture {arch!r}: {os.strerror(-rc)}")
        for rule in prof.get("syscalls") or []:
            action = _action(rule.get("action", ""), rule.get("errnoRet"))
            if action == default:
                continue                                   # runc: the default action already applies
            for name in rule.get("names") or []:
                nr = lib.seccomp_syscall_resolve_name(name.encode())
                native_only = False
                if nr < 0:
                    if platform.machine() != "x86_64" or name not in NEWER_X86_64:
                        continue                           # runc: a syscall unknown here is skipped
                    nr, native_only = NEWER_X86_64[name], True
                for conds in _conditions(rule.get("args") or []):
                    array = (_ArgCmp * len(conds))(*conds) if conds else None
                    rc = lib.seccomp_rule_add_array(ctx, action, nr, len(conds), array)
                    # a number only x86_64 has: libseccomp adds it there and reports the other arches' failure
                    if rc < 0 and not native_only:
                        raise ProfileError(f"error adding seccomp rule for syscall {name}: {os.strerror(-rc)}")
        fd = os.memfd_create("seccomp-bpf", os.MFD_CLOEXEC)
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
            if rc < 0:
                raise ProfileError(f"seccomp_export_bpf: {os.strerror(-rc)}")
            os.lseek(fd, 0, os.SEEK_SET)
            out = b""
            while chunk := os.read(fd, 65536):
                out += chunk
            return out
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


def requested(pod: dict, container: dict, node_default: bool) -> tuple[str, str | None]:
    """(type, localhostProfile) the container runs with: its securityContext.seccompProfile, else the pod's,
    else RuntimeDefault when the node's seccompDefault is on, else Unconfined (kuberuntime_sandbox /
    security_context: `getSeccompProfile`)."""
    for sc in ((container.get("securityContext") or {}), (pod["spec"].get("securityContext") or {})):
        prof = sc.get("seccompProfile")
        if prof and prof.get("type"):
            return prof["type"], prof.get("localhostProfile")
    return ("RuntimeDefault" if node_default else "Unconfined"), None


class Filters:
    """The compiled programs, one file per profile under `<state_dir>/seccomp-bpf/` (bwrap reads it from a
    descriptor); made once per (profile, capability set)."""

    def __init__(self, state_dir: str, profile_root: str):
        self.dir, self.profile_root = os.path.join(state_dir, "seccomp-bpf"), profile_root
        self._made: dict[str, str] = {}
        self._lock = threading.Lock()

    def path(self, kind: str, localhost: str | None, caps: list[str]) -> str | None:
        """The BPF file for the container, None for Unconfined; ProfileError when it cannot be made."""
        if kind == "Unconfined":
            return None
        if kind == "RuntimeDefault":
            doc = seccomp_default.profile(caps)
        elif kind == "Localhost":
            doc = self._localhost(localhost)
        else:
            raise ProfileError(f'seccomp profile type "{kind}" is not supported')
        text = json.dumps(doc, sort_keys=True)
        key = hashlib.sha256(text.encode()).hexdigest()[:24]
        with self._lock:
            if key in self._made and os.path.exists(self._made[key]):
                return self._made[key]
            program = compile_bpf(doc)
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            path = os.path.join(self.dir, f"{key}.bpf")
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(program)
            os.replace(tmp, path)
            self._made[key] = path
            return path

    def _localhost(self, name: str | None) -> dict:
        """containerd's WithProfile: the file read and unmarshalled as an OCI LinuxSeccomp."""
        if not name:
            raise ProfileError("localhostProfile must be set when seccompProfile.type is Localhost")
        root = os.path.realpath(self.profile_root)
        path = os.path.realpath(os.path.join(root, name))
        if not path.startswith(root + os.sep):
            raise ProfileError(f'cannot load seccomp profile "{name}": outside the profile root {root}')
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as e:
            raise ProfileError(f'cannot load seccomp profile "{path}": {e.strerror}') from None
        except ValueError as e:
            raise ProfileError(f'decoding seccomp profile failed "{path}": {e}') from None
        if not isinstance(doc, dict) or not doc.get("defaultAction"):
            raise ProfileError(f'seccomp profile "{path}": defaultAction is required')
        return doc
