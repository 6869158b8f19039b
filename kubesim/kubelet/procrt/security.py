"""A container's security profile as the kubelet asks for it and containerd/runc apply it (pure): the user
and groups it runs as (`runAsUser`, `runAsGroup`, `supplementalGroups`, `fsGroup`), its capabilities (the
runtime's default set, then `capabilities.add/drop`), `no_new_privs`, runc's masked and read-only `/proc`
paths, and the kubelet's refusal of a root container under `runAsNonRoot`.

The process side is util-linux's `setpriv`, run by bwrap as the container's first program (it execs the
command, which stays PID 1): it sets the ids and groups, the bounding set (a root process's effective set after
exec; a non-root one has none, as in a runc container without ambient capabilities) and no_new_privs.

Upstream:
- containerd pkg/oci/spec.go `populateDefaultUnixSpec`: the default capabilities (`defaultUnixCaps`), masked
  paths and read-only paths every CRI container starts from;
- containerd internal/cri/opts/spec_linux.go `WithCapabilities`: add ALL, drop ALL, then each add, each drop;
- kubelet pkg/kubelet/kuberuntime/security_context_others.go `verifyRunAsNonRoot`: the CreateContainerConfigError
  messages; pkg/securitycontext/util.go `AddNoNewPrivileges`; pkg/kubelet/kuberuntime/security_context.go
  (`determineEffectiveSecurityContext`: the container's fields win over the pod's; fsGroup joins the
  supplemental groups).
"""
from __future__ import annotations

import os

DEFAULT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
                "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE")
ALL_CAPS = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
            "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
            "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
            "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
            "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ",
            "PERFMON", "BPF", "CHECKPOINT_RESTORE")
# containerd's defaults; /sys is not mounted in a kubesim container, so its /sys entries are covered already
MASKED_PATHS = ("/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
                "/sys/devices/virtual/powercap")
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
BWRAP_READONLY = ("/proc/bus", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")     # bwrap's --proc does these


def _name(cap: str) -> str:
    return cap.upper().removeprefix("CAP_")


def capabilities(container: dict) -> list[str]:
    """The container's capability set: the default, then ALL added/dropped, then each add and each drop."""
    caps_spec = (container.get("securityContext") or {}).get("capabilities") or {}
    add, drop = [_name(c) for c in caps_spec.get("add") or []], [_name(c) for c in caps_spec.get("drop") or []]
    caps = list(DEFAULT_CAPS)
    if "ALL" in add:
        caps = list(ALL_CAPS)
    if "ALL" in drop:
        caps = []
    caps += [c for c in add if c != "ALL" and c not in caps]
    return [c for c in caps if c not in drop]


def effective(pod: dict, container: dict, key: str):
    """A securityContext field: the container's when set, else the pod's (determineEffectiveSecurityContext)."""
    csc = container.get("securityContext") or {}
    if csc.get(key) is not None:
        return csc[key]
    return (pod["spec"].get("securityContext") or {}).get(key)


def pod_format(pod: dict) -> str:
    """kubelet's format.Pod: name_namespace(uid)."""
    md = pod["metadata"]
    return f'{md.get("name")}_{md.get("namespace")}({md.get("uid")})'


def non_root_error(pod: dict, container: dict) -> str | None:
    """verifyRunAsNonRoot: the CreateContainerConfigError message when `runAsNonRoot` meets a root user (every
    image of a process node runs as root unless `runAsUser` says otherwise), else None."""
    if not effective(pod, container, "runAsNonRoot"):
        return None
    uid = effective(pod, container, "runAsUser")
    where = f'(pod: "{pod_format(pod)}", container: {container["name"]})'
    if uid is None:
        return f"container has runAsNonRoot and image will run as root {where}"
    if int(uid) == 0:
        return f"container's runAsUser breaks non-root policy {where}"
    return None


def user(pod: dict, container: dict) -> tuple[int, int, list[int]]:
    """(uid, gid, supplementary groups): runAsUser (image default root), runAsGroup (else the user's group in the
    image's /etc/passwd, else 0), then fsGroup and supplementalGroups."""
    uid = int(effective(pod, container, "runAsUser") or 0)
    gid = effective(pod, container, "runAsGroup")
    if gid is None:
        gid = _passwd_gid(uid)
    psc = pod["spec"].get("securityContext") or {}
    groups = [int(g) for g in ([psc["fsGroup"]] if psc.get("fsGroup") is not None else [])
              + list(psc.get("supplementalGroups") or [])]
    return uid, int(gid), sorted(set(groups))


def _passwd_gid(uid: int) -> int:
    try:
        with open("/etc/passwd") as f:
            for line in f:
                parts = line.split(":")
                if len(parts) > 3 and parts[2] == str(uid):
                    return int(parts[3])
    except (OSError, ValueError):
        pass
    return 0


def no_new_privs(container: dict) -> bool:
    """no_new_privs unless allowPrivilegeEscalation is true (the kubelet sets it only for an explicit false:
    AddNoNewPrivileges; kubesim's image is the host's /usr with its setuid programs, so it is on by default)."""
    return (container.get("securityContext") or {}).get("allowPrivilegeEscalation") is not True


def wrapper(setpriv: str, pod: dict, container: dict) -> list[str]:
    """setpriv's argv: the user, groups, bounding set (the capabilities), no inheritable ones, no_new_privs."""
    uid, gid, groups = user(pod, container)
    caps = capabilities(container)
    bounding = ",".join(["-all", *(f"+{c.lower()}" for c in caps)])
    argv = [setpriv, f"--regid={gid}", f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
            f"--reuid={uid}", "--inh-caps=-all", f"--bounding-set={bounding}"]
    if no_new_privs(container):
        argv.append("--no-new-privs")
    return [*argv, "--"]


def read_only_root(container: dict) -> bool:
    return bool((container.get("securityContext") or {}).get("readOnlyRootFilesystem"))


def proc_args() -> list[str]:
    """bwrap arguments masking runc's paths (/dev/null over a file, an empty read-only tmpfs over a directory)
    and making the rest of its read-only paths read-only; only what this kernel has."""
    args: list[str] = []
    for path in MASKED_PATHS:
        if not path.startswith("/proc/") or not os.path.exists(path):
            continue
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    for path in READONLY_PATHS:
        if path not in BWRAP_READONLY and os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args
