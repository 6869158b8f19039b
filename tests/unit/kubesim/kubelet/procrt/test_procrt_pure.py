"""The pure parts of kubesim/kubelet/procrt: `$(VAR)` expansion as expand.go, the env as makeEnvironmentVariables,
config volume files, the probe thresholds, and a machine without a writable cgroup said out loud."""
from __future__ import annotations

import base64
import os

import pytest

from kubesim.kubelet.procrt.cgroups import Cgroups
from kubesim.kubelet.procrt.env import ConfigError, command_line, container_env, expand
from kubesim.kubelet.procrt.probes import Counter
from kubesim.kubelet.procrt.volumes import config_files

ENV = {"A": "alpha", "EMPTY": ""}


@pytest.mark.parametrize("text, out", [
    ("$(A)", "alpha"), ("x$(A)y", "xalphay"), ("$(MISSING)", "$(MISSING)"), ("$$(A)", "$(A)"), ("$$", "$"),
    ("$(A", "$(A"), ("$", "$"), ("$x", "$x"), ("$(EMPTY)-", "-"), ("$(A)$(A)", "alphaalpha"),
    ("$$$(A)", "$alpha"), ("()", "()"),
])
def test_expand_follows_expand_go(text, out):
    """third_party/forked/golang/expansion/expand_test.go cases: undefined kept, `$$` escapes, unclosed kept."""
    assert expand(text, ENV.get) == out


POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"a": "1"}},
       "spec": {"nodeName": "n1"}, "status": {"podIP": "10.0.0.5"}}


def lookup(objects):
    return lambda kind, ns, name: objects.get((kind, ns, name))


def test_env_from_then_env_in_order_later_values_see_earlier_ones():
    objects = {("configmaps", "ns", "cm"): {"data": {"X": "from-cm", "bad-key!": "skipped", "B": "cm-b"}}}
    container = {"envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "P_"}, {"configMapRef": {"name": "cm"}}],
                 "env": [{"name": "B", "value": "$(X)+$(P_X)"},
                         {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
                         {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                 "command": ["run", "$(B)"], "args": ["$(N)", "$(NOPE)"]}
    env = container_env(POD, container, lookup(objects), {}, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "P_X": "from-cm", "P_B": "cm-b", "X": "from-cm", "B": "from-cm+from-cm",
                   "N": "1", "IP": "10.0.0.5"}
    assert command_line(container, env) == ["run", "from-cm+from-cm", "1", "$(NOPE)"]


def test_missing_keys_are_config_errors_with_the_kubelets_words_unless_optional():
    objects = {("secrets", "ns", "s"): {"data": {"k": base64.b64encode(b"v").decode()}}}
    ref = {"name": "T", "valueFrom": {"secretKeyRef": {"name": "s", "key": "nope"}}}
    with pytest.raises(ConfigError, match="^couldn't find key nope in Secret ns/s$"):
        container_env(POD, {"env": [ref]}, lookup(objects), {}, {})
    ref["valueFrom"]["secretKeyRef"]["optional"] = True
    assert container_env(POD, {"env": [ref]}, lookup(objects), {}, {}) == {}


def test_resource_field_ref_rounds_up_and_falls_back_to_allocatable():
    c = {"resources": {"limits": {"cpu": "1500m"}},
         "env": [{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                 {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Gi"}}}]}
    assert container_env(POD, c, lookup({}), {"memory": "32Gi"}, {}) == {"CPU": "2", "MEM": "32"}


def test_config_volume_items_paths_and_modes():
    objects = {("secrets", "ns", "s"): {"data": {"a": base64.b64encode(b"A").decode(),
                                                 "b": base64.b64encode(b"B").decode()}}}
    vol = {"name": "v", "secret": {"secretName": "s", "defaultMode": 0o400, "items": [
        {"key": "a", "path": "x/a"}, {"key": "b", "path": "b", "mode": 0o644}]}}
    assert config_files(vol, POD, lookup(objects), {}) == {"x/a": (b"A", 0o400), "b": (b"B", 0o644)}
    assert config_files({"name": "e", "emptyDir": {}}, POD, lookup(objects), {}) is None


def test_probe_results_flip_after_their_thresholds():
    c = Counter(success_threshold=2, failure_threshold=3)
    assert [c.observe(x) for x in (True, True, False, False, True, False, False, False)] == \
        [None, True, None, None, None, None, None, False]


def test_without_a_writable_memory_cgroup_limits_are_said_to_be_off(tmp_path):
    cg = Cgroups(root=str(tmp_path))
    assert cg.memory_base is None and "NOT enforced" in cg.problem
    group = cg.group("c1", 64 << 20, 500)
    assert group.dirs == [] and group.oom_kills() == 0


def test_a_probe_that_cannot_connect_says_so_in_the_kubelets_words():
    """pkg/probe/tcp/tcp.go and pkg/probe/http/http.go return Go's dial error (``err.Error()``), which the prober
    puts after "<Kind> probe failed: " (issue 36: the Event said Python's "[Errno 111] Connect call failed")."""
    import asyncio
    import errno

    from kubesim.kubelet.procrt.probes import run_handler

    async def refused(port):
        raise ConnectionRefusedError(errno.ECONNREFUSED, f"Connect call failed ('127.0.0.1', {port})")

    async def slow(port):
        raise TimeoutError

    def probe(handler, connect):
        return asyncio.run(run_handler(handler, {}, None, connect, 1))
    assert probe({"tcpSocket": {"port": 8888}}, refused) == (
        False, "dial tcp 127.0.0.1:8888: connect: connection refused")
    assert probe({"tcpSocket": {"port": 8888}}, slow) == (False, "dial tcp 127.0.0.1:8888: i/o timeout")
    assert probe({"httpGet": {"port": 8888, "path": "/login"}}, refused) == (
        False, 'Get "http://127.0.0.1:8888/login": dial tcp 127.0.0.1:8888: connect: connection refused')


def test_capabilities_follow_containerds_order_all_first_then_each_add_and_drop():
    """containerd WithCapabilities: add ALL, drop ALL, then each add, then each drop."""
    from kubesim.kubelet.procrt.security import ALL_CAPS, DEFAULT_CAPS, capabilities
    caps = lambda add=(), drop=(): capabilities({"securityContext": {"capabilities": {"add": list(add),  # noqa: E731
                                                                                      "drop": list(drop)}}})
    assert caps() == list(DEFAULT_CAPS)
    assert caps(add=["ALL"], drop=["CHOWN"]) == [c for c in ALL_CAPS if c != "CHOWN"]
    assert caps(add=["NET_ADMIN"], drop=["ALL"]) == ["NET_ADMIN"]
    assert caps(add=["CAP_SYS_TIME"]) == [*DEFAULT_CAPS, "SYS_TIME"]


def test_run_as_non_root_messages_are_the_kubelets():
    """security_context_others.go verifyRunAsNonRoot: an explicit 0 and an image's root differ."""
    from kubesim.kubelet.procrt.security import non_root_error
    p = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"securityContext": {"runAsNonRoot": True}}}
    where = '(pod: "p_ns(u1)", container: c)'
    assert non_root_error(p, {"name": "c"}) == f"container has runAsNonRoot and image will run as root {where}"
    assert non_root_error(p, {"name": "c", "securityContext": {"runAsUser": 0}}) == \
        f"container's runAsUser breaks non-root policy {where}"
    assert non_root_error(p, {"name": "c", "securityContext": {"runAsUser": 1000}}) is None


def test_a_process_nodes_pod_pid_limit_has_a_default_and_refuses_nonsense():
    from kubesim.kubelet.nodes import node_manifest
    ann = node_manifest({"name": "p", "runtime": "process"})["metadata"]["annotations"]
    assert ann["kubesim.io/pod-pids-limit"] == "4096"
    for bad in ("x", 0, -2, True):
        with pytest.raises(ValueError, match="podPidsLimit"):
            node_manifest({"name": "p", "runtime": "process", "podPidsLimit": bad})


def test_seccomp_default_profile_is_containerds_for_the_capabilities_and_compiles():
    """contrib/seccomp/seccomp_default.go: CAP_SYS_ADMIN allows mount/unshare/clone3; without it clone is allowed
    only without CLONE_NEW* flags and clone3 gives ENOSYS; the node's seccompDefault decides an unset profile."""
    from kubesim.kubelet.nodes import node_manifest
    from kubesim.kubelet.procrt import seccomp
    from kubesim.kubelet.procrt.seccomp_default import profile
    from kubesim.kubelet.procrt.security import DEFAULT_CAPS

    def allowed(p):
        return {n for r in p["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" and not r["args"] for n in r["names"]}
    plain, admin = profile(list(DEFAULT_CAPS), "x86_64"), profile([*DEFAULT_CAPS, "SYS_ADMIN"], "x86_64")
    assert "mount" not in allowed(plain) and {"mount", "unshare", "clone", "setns"} <= allowed(admin)
    assert {"chroot", "arch_prctl", "read", "ptrace"} <= allowed(plain) and "add_key" not in allowed(plain)
    assert {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "args": []} in plain["syscalls"]
    assert plain["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    if seccomp.problem() is None:
        program = seccomp.compile_bpf(plain)
        assert len(program) % 8 == 0 and len(program) > 8 * 300      # struct sock_filter: 8 bytes each
    pod = {"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}
    assert seccomp.requested(pod, {}, True) == ("Unconfined", None)
    assert seccomp.requested({"spec": {}}, {}, True) == ("RuntimeDefault", None)
    assert seccomp.requested({"spec": {}}, {}, False) == ("Unconfined", None)
    ann = node_manifest({"name": "p", "runtime": "process"})["metadata"]["annotations"]
    assert ann["kubesim.io/seccomp-default"] == "true"
    with pytest.raises(ValueError, match="seccompDefault"):
        node_manifest({"name": "p", "runtime": "process", "seccompDefault": "yes"})


def test_id_ranges_are_free_on_the_machine_and_a_dead_holders_come_back(tmp_path):
    """Two allocators on one lock directory (two kubesims) never hand out the same slot; a slot another process
    held is free once it exits (its flock goes with it)."""
    import subprocess
    import sys

    from kubesim.kubelet.procrt.userns import RANGE, IdRanges
    one, two = IdRanges(str(tmp_path)), IdRanges(str(tmp_path))
    assert (one.allocate("a"), two.allocate("b"), one.allocate("c")) == (RANGE, 2 * RANGE, 3 * RANGE)
    assert one.release("a") == RANGE and two.allocate("d") == RANGE
    # another process (another kubesim: the same flock on <slot>.lock) holds slot 4
    holder = subprocess.Popen([sys.executable, "-S", "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], "
                               "os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); "
                               "sys.stdin.read()", str(tmp_path / "4.lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    assert one.allocate("e") == 5 * RANGE
    holder.communicate("")
    assert two.allocate("f") == 4 * RANGE
    one.close(), two.close()


def test_image_copies_of_an_old_etc_are_pruned_unless_a_pod_holds_their_range(tmp_path):
    from kubesim.kubelet.procrt.userns import RANGE, IdRanges, _stamp, prune_images
    etc, cache, locks = tmp_path / "etc", tmp_path / "images", str(tmp_path / "ranges")
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/bash\n")
    now = _stamp(str(etc))
    for name in (f"etc-{RANGE}-{now}", f"etc-{RANGE}-1", f"etc-{2 * RANGE}-1", "etc-x.99999999.tmp", "other"):
        (cache / name).mkdir(parents=True)
    held = IdRanges(locks)
    held.allocate("a"), held.allocate("b")
    assert prune_images(str(cache), locks, str(etc)) == ["etc-x.99999999.tmp"]
    held.release("b")
    assert prune_images(str(cache), locks, str(etc)) == [f"etc-{2 * RANGE}-1"]
    held.close()
    assert prune_images(str(cache), locks, str(etc)) == [f"etc-{RANGE}-1"]
    assert sorted(os.listdir(cache)) == [f"etc-{RANGE}-{now}", "other"]


def test_without_libseccomp_a_filtered_container_is_refused_with_the_reason_never_run_unfiltered(tmp_path, monkeypatch):
    """A machine without libseccomp.so.2: RuntimeDefault (the default) and Localhost cannot be compiled, and the
    error names the missing library (the pod's CreateContainerError event carries it); Unconfined still runs."""
    import ctypes

    from kubesim.kubelet.procrt import seccomp

    def missing(name, *a, **kw):
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")
    monkeypatch.setattr(seccomp, "_lib", None)
    monkeypatch.setattr(seccomp, "_lib_problem", None)
    monkeypatch.setattr(ctypes, "CDLL", missing)
    filters = seccomp.Filters(str(tmp_path), str(tmp_path / "seccomp"))
    with pytest.raises(seccomp.ProfileError, match=r"libseccomp is missing \(libseccomp\.so\.2: .*install Debian's "
                                                   r"libseccomp2"):
        filters.path("RuntimeDefault", None, ["CHOWN"])
    assert seccomp.problem().startswith("libseccomp is missing")
    assert filters.path("Unconfined", None, []) is None
