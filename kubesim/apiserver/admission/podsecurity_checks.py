"""The Pod Security Standards' checks, as k8s.io/pod-security-admission evaluates them (policy/check_*.go).

Each check takes a pod's metadata and spec (plain dicts) and returns None (allowed) or its
`(ForbiddenReason, ForbiddenDetail)`, worded as the upstream check words it (the file is named beside each).
`evaluate(level, version, metadata, spec)` runs a level's checks in upstream's order (policy/registry.go:
the baseline checks, then at baseline the "overlapping" baseline ones, at restricted the restricted ones,
which supersede the overlapping ones; within a group the order of the check files) and returns the failures.
A version `v1.N` runs only the checks whose minimum version is at most 1.N; `latest` runs all.

Not checked (out of reach here, said so in docs/security.md): Windows hostProcess, the probes' and lifecycle
hooks' `host` field (check_hostProbesAndhostLifecycle.go), the AppArmor profile as a securityContext field
(the beta annotations are checked), the user-namespace relaxation of runAsNonRoot/procMount (upstream's
off-by-default `RelaxPolicyForUserNamespacePods`), the pre-1.19 seccomp annotations beside the fields.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

Result = "tuple[str, str] | None"


def join_quote(items) -> str:
    """helpers.go joinQuote: `"a", "b"`."""
    items = list(items)
    return '"' + '", "'.join(items) + '"' if items else ""


def pluralize(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def containers(spec: dict) -> Iterator[dict]:
    """visitor.go visitContainers: init containers, containers, ephemeral containers."""
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _sc(c: dict) -> dict:
    return c.get("securityContext") or {}


def _pod_sc(spec: dict) -> dict:
    return spec.get("securityContext") or {}


# ---- baseline --------------------------------------------------------------------------------------------

def app_armor(md: dict, spec: dict):
    """check_appArmorProfile.go (the beta annotations): runtime/default, localhost/* or unset."""
    bad = sorted(f'{k}="{v}"' for k, v in (md.get("annotations") or {}).items()
                 if k.startswith("container.apparmor.security.beta.kubernetes.io/")
                 and not (v == "" or v == "runtime/default" or v.startswith("localhost/")))
    if bad:
        return pluralize("forbidden AppArmor profile", "forbidden AppArmor profiles", len(bad)), ", ".join(bad)
    return None


def host_namespaces(md: dict, spec: dict):
    """check_hostNamespaces.go."""
    bad = sorted(k for k in ("hostIPC", "hostNetwork", "hostPID") if spec.get(k))
    return ("host namespaces", ", ".join(bad)) if bad else None


def host_ports(md: dict, spec: dict):
    """check_hostPorts.go."""
    bad, ports = [], set()
    for c in containers(spec):
        used = [p["hostPort"] for p in c.get("ports") or [] if p.get("hostPort")]
        if used:
            bad.append(c.get("name", ""))
            ports.update(str(p) for p in used)
    if not bad:
        return None
    return "hostPort", (f'{pluralize("container", "containers", len(bad))} {join_quote(bad)} '
                        f'{pluralize("uses", "use", len(bad))} {pluralize("hostPort", "hostPorts", len(ports))} '
                        f'{", ".join(sorted(ports))}')


def privileged(md: dict, spec: dict):
    """check_privileged.go."""
    bad = [c.get("name", "") for c in containers(spec) if _sc(c).get("privileged") is True]
    if bad:
        return "privileged", (f'{pluralize("container", "containers", len(bad))} {join_quote(bad)} must not set '
                              "securityContext.privileged=true")
    return None


def proc_mount(md: dict, spec: dict):
    """check_procMount.go: unset or Default."""
    bad, kinds = [], set()
    for c in containers(spec):
        pm = _sc(c).get("procMount")
        if pm is not None and pm != "Default":
            bad.append(c.get("name", ""))
            kinds.add(pm)
    if bad:
        return "procMount", (f'{pluralize("container", "containers", len(bad))} {join_quote(bad)} must not set '
                             f"securityContext.procMount to {join_quote(sorted(kinds))}")
    return None


SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t"}


def se_linux_options(md: dict, spec: dict):
    """check_seLinuxOptions.go (its wording too: user and role are named only beside a bad type)."""
    setters, bad_types, user, role = [], set(), False, False

    def valid(opts: dict) -> bool:
        nonlocal user, role
        ok = True
        if (opts.get("type") or "") not in SELINUX_TYPES:
            ok = False
            bad_types.add(opts["type"])
        if opts.get("user"):
            ok, user = False, True
        if opts.get("role"):
            ok, role = False, True
        return ok

    if _pod_sc(spec).get("seLinuxOptions") is not None and not valid(_pod_sc(spec)["seLinuxOptions"]):
        setters.append("pod")
    bad = [c.get("name", "") for c in containers(spec)
           if _sc(c).get("seLinuxOptions") is not None and not valid(_sc(c)["seLinuxOptions"])]
    if bad:
        setters.append(f'{pluralize("container", "containers", len(bad))} {join_quote(bad)}')
    if not setters:
        return None
    data = []
    if bad_types:
        data.append(f'{pluralize("type", "types", len(bad_types))} {join_quote(sorted(bad_types))}')
        if user:
            data.append("user may not be set")
        if role:
            data.append("role may not be set")
    return "seLinuxOptions", f'{" and ".join(setters)} set forbidden securityContext.seLinuxOptions: {"; ".join(data)}'


SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"}


def sysctls(md: dict, spec: dict):
    """check_sysctls.go (the 1.0 safe set)."""
    bad = [s.get("name", "") for s in _pod_sc(spec).get("sysctls") or [] if s.get("name") not in SAFE_SYSCTLS]
    return ("forbidden sysctls", ", ".join(bad)) if bad else None


DEFAULT_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def capabilities_baseline(md: dict, spec: dict):
    """check_capabilities_baseline.go: only the container runtime's default set may be added."""
    bad, caps = [], set()
    for c in containers(spec):
        extra = [a for a in (_sc(c).get("capabilities") or {}).get("add") or [] if a not in DEFAULT_CAPABILITIES]
        if extra:
            bad.append(c.get("name", ""))
            caps.update(extra)
    if bad:
        return "non-default capabilities", (f'{pluralize("container", "containers", len(bad))} {join_quote(bad)} '
                                            f"must not include {join_quote(sorted(caps))} in "
                                            "securityContext.capabilities.add")
    return None


def host_path_volumes(md: dict, spec: dict):
    """check_hostPathVolumes.go."""
    bad = [v.get("name", "") for v in spec.get("volumes") or [] if v.get("hostPath") is not None]
    return ("hostPath volumes", f'{pluralize("volume", "volumes", len(bad))} {join_quote(bad)}') if bad else None


def _seccomp_setters(spec: dict, *, required: bool):
    """The shared part of check_seccompProfile_{baseline,restricted}.go: who sets a bad type, with which
    values, and (restricted) which containers are left without any."""
    setters, values, pod_set = [], set(), False
    prof = _pod_sc(spec).get("seccompProfile")
    if prof is not None:
        if prof.get("type") in ("RuntimeDefault", "Localhost"):
            pod_set = True
        else:
            setters.append("pod")
            values.add(prof.get("type") or "")
    bad, unset = [], []
    for c in containers(spec):
        cp = _sc(c).get("seccompProfile")
        if cp is not None:
            if cp.get("type") not in ("RuntimeDefault", "Localhost"):
                bad.append(c.get("name", ""))
                values.add(cp.get("type") or "")
        elif required and not pod_set:
            unset.append(c.get("name", ""))
    if bad:
        setters.append(f'{pluralize("container", "containers", len(bad))} {join_quote(bad)}')
    if setters:
        return "seccompProfile", (f'{" and ".join(setters)} must not set securityContext.seccompProfile.type to '
                                  f"{join_quote(sorted(values))}")
    if unset:
        return "seccompProfile", (f'pod or {pluralize("container", "containers", len(unset))} {join_quote(unset)} '
                                  'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
    return None


def seccomp_baseline(md: dict, spec: dict):
    """check_seccompProfile_baseline.go (1.19+: the fields): if set, RuntimeDefault or Localhost."""
    return _seccomp_setters(spec, required=False)


# ---- restricted ------------------------------------------------------------------------------------------

def allow_privilege_escalation(md: dict, spec: dict):
    """check_allowPrivilegeEscalation.go: every container sets it to false."""
    bad = [c.get("name", "") for c in containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
    if bad:
        return "allowPrivilegeEscalation != false", (
            f'{pluralize("container", "containers", len(bad))} {join_quote(bad)} must set '
            "securityContext.allowPrivilegeEscalation=false")
    return None


def capabilities_restricted(md: dict, spec: dict):
    """check_capabilities_restricted.go: drop ALL; add nothing but NET_BIND_SERVICE."""
    missing, adding, caps = [], [], set()
    for c in containers(spec):
        cap = _sc(c).get("capabilities")
        if cap is None:
            missing.append(c.get("name", ""))
            continue
        if "ALL" not in (cap.get("drop") or []):
            missing.append(c.get("name", ""))
        extra = [a for a in cap.get("add") or [] if a != "NET_BIND_SERVICE"]
        if extra:
            adding.append(c.get("name", ""))
            caps.update(extra)
    details = []
    if missing:
        details.append(f'{pluralize("container", "containers", len(missing))} {join_quote(missing)} must set '
                       'securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f'{pluralize("container", "containers", len(adding))} {join_quote(adding)} must not include '
                       f"{join_quote(sorted(caps))} in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


ALLOWED_VOLUME_SOURCES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                          "projected", "secret")


def restricted_volumes(md: dict, spec: dict):
    """check_volumes_restricted.go: only the inline sources a PersistentVolume cannot stand behind."""
    bad, kinds = [], set()
    for v in spec.get("volumes") or []:
        if any(v.get(k) is not None for k in ALLOWED_VOLUME_SOURCES):
            continue
        bad.append(v.get("name", ""))
        kinds.add(next((k for k in v if k != "name"), "unknown"))
    if not bad:
        return None
    return "restricted volume types", (
        f'{pluralize("volume", "volumes", len(bad))} {join_quote(bad)} {pluralize("uses", "use", len(bad))} '
        f'{pluralize("restricted volume type", "restricted volume types", len(kinds))} {join_quote(sorted(kinds))}')


def run_as_non_root(md: dict, spec: dict):
    """check_runAsNonRoot.go: the pod, or every container, sets runAsNonRoot=true; none sets false."""
    setters, pod_true = [], False
    pod_v = _pod_sc(spec).get("runAsNonRoot")
    if pod_v is False:
        setters.append("pod")
    elif pod_v is True:
        pod_true = True
    explicit, implicit = [], []
    for c in containers(spec):
        v = _sc(c).get("runAsNonRoot")
        if v is False:
            explicit.append(c.get("name", ""))
        elif v is None and not pod_true:
            implicit.append(c.get("name", ""))
    if explicit:
        setters.append(f'{pluralize("container", "containers", len(explicit))} {join_quote(explicit)}')
    if setters:
        return "runAsNonRoot != true", f'{" and ".join(setters)} must not set securityContext.runAsNonRoot=false'
    if implicit:
        return "runAsNonRoot != true", (f'pod or {pluralize("container", "containers", len(implicit))} '
                                        f"{join_quote(implicit)} must set securityContext.runAsNonRoot=true")
    return None


def run_as_user(md: dict, spec: dict):
    """check_runAsUser.go: nobody sets runAsUser=0."""
    setters = ["pod"] if _pod_sc(spec).get("runAsUser") == 0 else []
    bad = [c.get("name", "") for c in containers(spec) if _sc(c).get("runAsUser") == 0]
    if bad:
        setters.append(f'{pluralize("container", "containers", len(bad))} {join_quote(bad)}')
    return ("runAsUser=0", f'{" and ".join(setters)} must not set runAsUser=0') if setters else None


def seccomp_restricted(md: dict, spec: dict):
    """check_seccompProfile_restricted.go: RuntimeDefault or Localhost, on the pod or every container."""
    return _seccomp_setters(spec, required=True)


Check = Callable[[dict, dict], "tuple[str, str] | None"]

# (check, minimum minor version), in upstream's order within each group
BASELINE: list[tuple[Check, int]] = [(app_armor, 0), (host_namespaces, 0), (host_ports, 0), (privileged, 0),
                                     (proc_mount, 0), (se_linux_options, 0), (sysctls, 0)]
BASELINE_OVERLAPPING: list[tuple[Check, int]] = [(capabilities_baseline, 0), (host_path_volumes, 0),
                                                 (seccomp_baseline, 19)]
RESTRICTED: list[tuple[Check, int]] = [(allow_privilege_escalation, 8), (capabilities_restricted, 22),
                                       (restricted_volumes, 0), (run_as_non_root, 0), (run_as_user, 23),
                                       (seccomp_restricted, 19)]


def evaluate(level: str, minor: int | None, md: dict, spec: dict) -> list[tuple[str, str]]:
    """The failed checks of `level` at version 1.`minor` (None: latest): `[(reason, detail)]`."""
    if level == "privileged":
        return []
    checks = BASELINE + (BASELINE_OVERLAPPING if level == "baseline" else RESTRICTED)
    out = []
    for check, since in checks:
        if minor is None or minor >= since:
            r = check(md, spec)
            if r is not None:
                out.append(r)
    return out


def forbidden_detail(failures: list[tuple[str, str]]) -> str:
    """checks.go AggregateCheckResult.ForbiddenDetail: `reason (detail), reason (detail)`."""
    return ", ".join(f"{r} ({d})" if d else r for r, d in failures)
