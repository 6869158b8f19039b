"""containerd's seccomp `RuntimeDefault` profile, as data (what the CRI plugin gives runc for a container whose
securityContext.seccompProfile is RuntimeDefault).

Copied from containerd contrib/seccomp/seccomp_default.go `DefaultProfile` (github.com/containerd/containerd,
commit 301026e58c619e63d09c0ec411012e54c0124b03), Copyright The containerd Authors, licensed under the Apache
License, Version 2.0 (the licence of this project too: LICENSE). Translated from Go to Python data; the lists
are upstream's, in upstream's order. `profile(caps, machine)` returns the same OCI `LinuxSeccomp` document
`DefaultProfile(spec)` returns for a spec whose bounding set is `caps`.
"""
from __future__ import annotations

import platform

ALLOW = (
    "accept", "accept4", "access", "adjtimex", "alarm", "bind", "brk", "cachestat", "capget", "capset", "chdir",
    "chmod", "chown", "chown32", "clock_adjtime", "clock_adjtime64", "clock_getres", "clock_getres_time64",
    "clock_gettime", "clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64", "close", "close_range",
    "connect", "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
    "execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fadvise64_64",
    "fallocate", "fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchown32", "fchownat",
    "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr",
    "fstat", "fstat64", "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64", "futex",
    "futex_requeue", "futex_time64", "futex_wait", "futex_waitv", "futex_wake", "futimesat", "getcpu", "getcwd",
    "getdents", "getdents64", "getegid", "getegid32", "geteuid", "geteuid32", "getgid", "getgid32", "getgroups",
    "getgroups32", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
    "getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32", "getrlimit", "get_robust_list",
    "getrusage", "getsid", "getsockname", "getsockopt", "get_thread_area", "gettid", "gettimeofday", "getuid",
    "getuid32", "getxattr", "getxattrat", "inotify_add_watch", "inotify_init", "inotify_init1",
    "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy", "io_getevents", "io_pgetevents",
    "io_pgetevents_time64", "ioprio_get", "ioprio_set", "io_setup", "io_submit", "ipc", "kill",
    "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown", "lchown32", "lgetxattr",
    "link", "linkat", "listen", "listmount", "listxattr", "listxattrat", "llistxattr", "_llseek",
    "lremovexattr", "lseek", "lsetxattr", "lsm_get_self_attr", "lsm_list_modules", "lsm_set_self_attr", "lstat",
    "lstat64", "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod",
    "mknodat", "mlock", "mlock2", "mlockall", "map_shadow_stack", "mmap", "mmap2", "mprotect", "mq_getsetattr",
    "mq_notify", "mq_open", "mq_timedreceive", "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64",
    "mq_unlink", "mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall",
    "munmap", "name_to_handle_at", "nanosleep", "newfstatat", "_newselect", "open", "openat", "openat2",
    "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect",
    "poll", "ppoll", "ppoll_time64", "prctl", "pread64", "preadv", "preadv2", "prlimit64", "process_mrelease",
    "pselect6", "pselect6_time64", "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
    "readlinkat", "readv", "recv", "recvfrom", "recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages",
    "removexattr", "removexattrat", "rename", "renameat", "renameat2", "restart_syscall", "rmdir", "rseq",
    "rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
    "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_getaffinity", "sched_getattr",
    "sched_getparam", "sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
    "sched_rr_get_interval", "sched_rr_get_interval_time64", "sched_setaffinity", "sched_setattr",
    "sched_setparam", "sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget", "semop",
    "semtimedop", "semtimedop_time64", "send", "sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto",
    "setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32",
    "setitimer", "setpgid", "setpriority", "setregid", "setregid32", "setresgid", "setresgid32", "setresuid",
    "setresuid32", "setreuid", "setreuid32", "setrlimit", "set_robust_list", "setsid", "setsockopt",
    "set_thread_area", "set_tid_address", "setuid", "setuid32", "setxattr", "setxattrat", "shmat", "shmctl",
    "shmdt", "shmget", "shutdown", "sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn",
    "socketcall", "socketpair", "splice", "stat", "stat64", "statfs", "statfs64", "statmount", "statx",
    "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill", "time",
    "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime",
    "timer_settime64", "timerfd_create", "timerfd_gettime", "timerfd_gettime64", "timerfd_settime",
    "timerfd_settime64", "times", "tkill", "truncate", "truncate64", "ugetrlimit", "umask", "uname", "unlink",
    "unlinkat", "uretprobe", "utime", "utimensat", "utimensat_time64", "utimes", "vfork", "vmsplice", "wait4",
    "waitid", "waitpid", "write", "writev",
)

AF_ALG, AF_VSOCK = 38, 40
PERSONALITIES = (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF)
KERNEL_4_8 = ("process_vm_readv", "process_vm_writev", "ptrace")
BY_ARCH = {"x86_64": ("arch_prctl", "modify_ldt"), "i386": ("modify_ldt",),
           "aarch64": ("arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2", "breakpoint", "cacheflush",
                       "set_tls"),
           "ppc64le": ("sync_file_range2", "swapcontext"),
           "s390x": ("s390_pci_mmio_read", "s390_pci_mmio_write", "s390_runtime_instr"),
           "riscv64": ("riscv_flush_icache", "riscv_hwprobe")}
ARCHES = {"x86_64": ("SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"),
          "aarch64": ("SCMP_ARCH_ARM", "SCMP_ARCH_AARCH64"), "s390x": ("SCMP_ARCH_S390", "SCMP_ARCH_S390X"),
          "riscv64": ("SCMP_ARCH_RISCV64",)}
BY_CAP = {
    "CAP_DAC_READ_SEARCH": ("open_by_handle_at",),
    "CAP_SYS_ADMIN": ("bpf", "clone", "clone3", "fanotify_init", "fsconfig", "fsmount", "fsopen", "fspick",
                      "lookup_dcookie", "mount", "mount_setattr", "move_mount", "open_tree", "perf_event_open",
                      "quotactl", "quotactl_fd", "setdomainname", "sethostname", "setns", "syslog", "umount",
                      "umount2", "unshare"),
    "CAP_SYS_BOOT": ("reboot",),
    "CAP_SYS_CHROOT": ("chroot",),
    "CAP_SYS_MODULE": ("delete_module", "init_module", "finit_module"),
    "CAP_SYS_PACCT": ("acct",),
    "CAP_SYS_PTRACE": ("kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev", "ptrace"),
    "CAP_SYS_RAWIO": ("iopl", "ioperm"),
    "CAP_SYS_TIME": ("settimeofday", "stime", "clock_settime", "clock_settime64"),
    "CAP_SYS_TTY_CONFIG": ("vhangup",),
    "CAP_SYS_NICE": ("get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"),
    "CAP_SYSLOG": ("syslog",),
    "CAP_BPF": ("bpf",),
    "CAP_PERFMON": ("perf_event_open",),
}
CLONE_NEW = 0x00020000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x02000000
ENOSYS = 38


def _allow(names, args=()) -> dict:
    return {"names": list(names), "action": "SCMP_ACT_ALLOW", "args": list(args)}


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        parts = platform.release().split(".")
        return (int(parts[0]), int(parts[1].split("-")[0])) >= (major, minor)
    except (ValueError, IndexError):
        return False


def profile(caps: list[str], machine: str | None = None) -> dict:
    """DefaultProfile for a container whose bounding set is `caps` (names with or without `CAP_`)."""
    machine = machine or platform.machine()
    bounding = ["CAP_" + c.upper().removeprefix("CAP_") for c in caps]
    syscalls = [_allow(ALLOW)]
    # socket(2) for every family but AF_ALG and AF_VSOCK: three single-condition rules (upstream's comment)
    syscalls += [_allow(["socket"], [{"index": 0, "value": AF_ALG, "op": "SCMP_CMP_LT"}]),
                 _allow(["socket"], [{"index": 0, "value": AF_ALG + 1, "op": "SCMP_CMP_EQ"}]),
                 _allow(["socket"], [{"index": 0, "value": AF_VSOCK, "op": "SCMP_CMP_GT"}])]
    syscalls += [_allow(["personality"], [{"index": 0, "value": v, "op": "SCMP_CMP_EQ"}]) for v in PERSONALITIES]
    if _kernel_at_least(4, 8):
        syscalls.append(_allow(KERNEL_4_8))
    if machine in BY_ARCH:
        syscalls.append(_allow(BY_ARCH[machine]))
    for cap in bounding:
        if cap in BY_CAP:
            syscalls.append(_allow(BY_CAP[cap]))
    if "CAP_SYS_ADMIN" not in bounding:
        index = 1 if machine.startswith("s390") else 0
        syscalls.append(_allow(["clone"], [{"index": index, "value": CLONE_NEW, "valueTwo": 0,
                                            "op": "SCMP_CMP_MASKED_EQ"}]))
        # clone3 gives ENOSYS, not EPERM, so that glibc falls back to clone (moby/moby#42681)
        syscalls.append({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS, "args": []})
    return {"defaultAction": "SCMP_ACT_ERRNO", "architectures": list(ARCHES.get(machine, ())),
            "syscalls": syscalls}
