"""The walls around a process pod (kubesim/kubelet/procrt: sandbox.py, userns.py, security.py), on real
processes: an image is a declared set of paths (a volume over the image's directory does not hide it; the
checkout, host files and sockets are not there), container root is an unprivileged host id in a user namespace
of the pod's own, runc's default capabilities and the container's own, the securityContext's user, the
kubelet's runAsNonRoot refusal, and a pod pid limit."""
from __future__ import annotations

import os
import socket
import sys

from tests.support.kubesim.procrt_support import log, phase_is, pod

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# containerd's defaultUnixCaps (pkg/oci/spec.go): CHOWN DAC_OVERRIDE FSETID FOWNER MKNOD NET_RAW SETGID SETUID
# SETFCAP SETPCAP NET_BIND_SERVICE SYS_CHROOT KILL AUDIT_WRITE
RUNC_DEFAULT = 0xa80425fb


def run(pcore, name: str, script: str, image: str = "debian:12", **spec) -> tuple[str, int]:
    container = {"image": image, **spec.pop("container", {})}
    pcore.create_namespaced_pod("default", pod(name, ["bash", "-c", script], container=container, **spec))
    done = phase_is(pcore, name, "Succeeded", "Failed", timeout=30)
    return log(pcore, name), done.status.container_statuses[0].state.terminated.exit_code


def test_a_volume_over_the_images_directory_does_not_hide_it_and_the_checkout_is_not_there(pcore):
    """The image (this run's virtualenv, wherever it lies) is bound above the pod's volumes: an emptyDir at its
    parent (as a home volume at /root over a clone under /root) leaves `python` working; the rest of the
    checkout, /var/tmp's host files and kubesim's state are not in the container."""
    parent = os.path.dirname(sys.prefix)
    out, code = run(pcore, "image", f"python -c 'import numpy; print(\"ok\")'; ls {CHECKOUT}/Makefile; "
                    "ls /var/tmp | wc -l", image="skiff/venv",
                    container={"volumeMounts": [{"name": "v", "mountPath": parent}]},
                    volumes=[{"name": "v", "emptyDir": {}}])
    assert out.splitlines()[0] == "ok"
    assert "No such file or directory" in out and out.splitlines()[-1] == "0"


def test_container_root_is_not_host_root_remount_then_write_fails(pcore):
    """Its own user namespace (KEP-127): container 0 is an unprivileged host id; `mount -o remount,rw` is
    refused (the mounts belong to the host's namespace) and nothing is written on the host."""
    out, code = run(pcore, "remount", "cat /proc/self/uid_map; mount -o remount,bind,rw /usr && touch /usr/wallsrt-x; "
                    "echo rc=$?")
    inside, host, count = out.split()[:3]
    assert inside == "0" and int(host) >= 65536 and count == "65536"
    assert "rc=0" not in out and not os.path.exists("/usr/wallsrt-x")


def test_a_host_0600_file_and_a_host_socket_are_out_of_reach(pcore, tmp_path):
    """A host file only root may read, visible through a read-only hostPath, is not readable by container root;
    a host unix socket (here one listening under the test's tmp dir) is not in the container at all."""
    secret = tmp_path / "kubeconfig"
    secret.write_text("token: s3cret\n")
    secret.chmod(0o600)
    tmp_path.chmod(0o755)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "db.sock"))
    server.listen(1)
    try:
        out, code = run(pcore, "secrets", f"cat /host/kubeconfig; python -c \"import socket; "
                        f"socket.socket(socket.AF_UNIX).connect('{tmp_path}/db.sock')\" 2>&1 | tail -1",
                        image="skiff/venv",
                        container={"volumeMounts": [{"name": "h", "mountPath": "/host", "readOnly": True}]},
                        volumes=[{"name": "h", "hostPath": {"path": str(tmp_path)}}])
    finally:
        server.close()
    assert "s3cret" not in out and "Permission denied" in out
    assert "FileNotFoundError" in out


def test_capabilities_are_runcs_default_set_and_none_with_drop_all(pcore):
    out, _ = run(pcore, "caps", "grep -E 'CapEff|NoNewPrivs' /proc/self/status")
    assert int(out.split()[1], 16) == RUNC_DEFAULT and out.split()[3] == "1"
    out, _ = run(pcore, "nocaps", "grep CapEff /proc/self/status",
                 container={"securityContext": {"capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": True}})
    assert int(out.split()[1], 16) == 0
    out, _ = run(pcore, "addcap", "grep CapEff /proc/self/status",
                 container={"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["KILL"]}}})
    assert int(out.split()[1], 16) == (RUNC_DEFAULT | 1 << 12) & ~(1 << 5)


def test_run_as_user_group_and_fs_group_are_honoured(pcore):
    out, _ = run(pcore, "user", "id -u; id -g; id -G; touch /v/f && stat -c %g /v/f",
                 securityContext={"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000},
                 container={"volumeMounts": [{"name": "v", "mountPath": "/v"}]}, volumes=[{"name": "v", "emptyDir": {}}])
    uid, gid, *groups, fgid = out.split()
    assert (uid, gid, fgid) == ("1000", "3000", "2000") and "2000" in groups


def test_read_only_root_filesystem_leaves_only_volumes_writable(pcore):
    out, _ = run(pcore, "rofs", "touch /root/x 2>&1 | grep -c 'Read-only'; touch /v/x && echo volume-ok",
                 container={"securityContext": {"readOnlyRootFilesystem": True},
                            "volumeMounts": [{"name": "v", "mountPath": "/v"}]}, volumes=[{"name": "v", "emptyDir": {}}])
    assert out.split() == ["1", "volume-ok"]


def test_run_as_non_root_refuses_a_root_container_with_the_kubelets_message(pcore):
    """verifyRunAsNonRoot (pkg/kubelet/kuberuntime/security_context_others.go): CreateContainerConfigError."""
    from kubesim.testing import wait_until
    pcore.create_namespaced_pod("default", pod("nonroot", ["true"], securityContext={"runAsNonRoot": True}))

    def waiting():
        p = pcore.read_namespaced_pod("nonroot", "default")
        s = (p.status.container_statuses or [None])[0]
        return s.state.waiting if s and s.state.waiting and s.state.waiting.reason != "ContainerCreating" else None
    w = wait_until(waiting, 15)
    uid = pcore.read_namespaced_pod("nonroot", "default").metadata.uid
    assert w.reason == "CreateContainerConfigError"
    assert w.message == f'container has runAsNonRoot and image will run as root (pod: "nonroot_default({uid})", ' \
                        "container: main)"


def test_a_fork_bomb_stops_at_the_pods_pid_limit(pcore):
    """podPidsLimit 256 (procrt_support's nodes): the 257th task of the pod cannot be made."""
    script = ("import subprocess\nn = 0\ntry:\n    while n < 1000:\n        subprocess.Popen(['sleep', '30'])\n"
              "        n += 1\nexcept OSError as e:\n    print(n, type(e).__name__)\n")
    out, _ = run(pcore, "bomb", f"python -c \"{script}\"", image="skiff/venv")
    started, error = out.split()[:2]
    assert int(started) < 256 and error == "BlockingIOError"


def test_a_pod_over_its_ephemeral_storage_limit_is_evicted_with_the_kubelets_reason(pcore):
    """eviction_manager.go podEphemeralStorageLimitEviction: 80 MiB written into /tmp (the writable layer) with a
    50Mi limit: Failed, reason Evicted, "Pod ephemeral local storage usage exceeds the total limit of
    containers 50Mi. " (helpers.go podEphemeralStorageMessageFmt)."""
    limits = {"resources": {"limits": {"ephemeral-storage": "50Mi"}}}
    pcore.create_namespaced_pod("default", pod("filler", ["bash", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=80 "
                                                          "2>/dev/null; sleep 60"], container=limits))
    done = phase_is(pcore, "filler", "Failed", timeout=30)
    assert done.status.reason == "Evicted"
    assert done.status.message == "Pod ephemeral local storage usage exceeds the total limit of containers 50Mi. "
    assert [e.message for e in pcore.list_namespaced_event("default").items
            if e.involved_object.name == "filler" and e.reason == "Evicted"] == [done.status.message]
    # a limit eviction carries no DisruptionTarget condition: eviction_manager.go podEphemeralStorageLimitEviction
    # calls evictPod(pod, 0, message, nil, nil); only node-pressure evictions (synchronize) add DisruptionTarget
    # (TerminationByKubelet), and PendingTermination needs the alpha PodPendingTerminationConditions gate
    assert sorted(c.type for c in done.status.conditions) == ["ContainersReady", "Initialized",
                                                              "PodReadyToStartContainers", "PodScheduled", "Ready"]


def test_a_claim_is_shared_by_pods_of_different_id_ranges_at_once(pcore):
    """A PersistentVolume is mounted idmapped through each pod's user namespace (KEP-127's volumes): a file
    container root of one running pod wrote is container root's (id 0) in another pod running beside it with
    another range, which appends to it."""
    from kubesim.testing import wait_until
    pcore.create_namespaced_persistent_volume_claim("default", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "shared"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    claim = {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "shared"}}]}
    mount = {"volumeMounts": [{"name": "d", "mountPath": "/data"}]}
    pcore.create_namespaced_pod("default", pod("writer", ["bash", "-c", "mkdir /data/x && echo a > /data/x/f; "
                                                          "cat /proc/self/uid_map; sleep 60"], container=mount, **claim))
    phase_is(pcore, "writer", "Running")
    wait_until(lambda: log(pcore, "writer").strip(), 15)
    out, code = run(pcore, "appender", "echo b >> /data/x/f && cat /data/x/f; stat -c %u /data/x/f; "
                    "cat /proc/self/uid_map", container=mount, **claim)
    lines = out.split("\n")
    assert code == 0 and lines[:3] == ["a", "b", "0"]
    assert lines[3].split()[1] != log(pcore, "writer").split()[1]          # two ranges
    pcore.delete_namespaced_pod("writer", "default", grace_period_seconds=0)


# add_key(2) then unshare(2) of a user namespace, by container root: both allowed without seccomp (a user
# namespace needs no capability; a user key none either), both outside containerd's default profile
SECCOMP_PROBE = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                 "key = libc.syscall(248, b'user', b'walls', b'x', 1, -2)\n"
                 "print('add_key', 'ok' if key >= 0 else os.strerror(ctypes.get_errno()))\n"
                 "rc = libc.unshare(0x10000000)\n"
                 "print('unshare', 'ok' if rc == 0 else os.strerror(ctypes.get_errno()))\n")


def test_seccomp_runtime_default_refuses_what_containerds_profile_leaves_out_and_unconfined_does_not(pcore):
    """containerd's default profile (seccomp.py, seccomp_default.py) is a process node's default (its
    seccompDefault) and what RuntimeDefault asks for: add_key and unshare fail with EPERM; Unconfined: both work;
    Seccomp in /proc says which."""
    probe = f"python -c \"{SECCOMP_PROBE}\"; grep '^Seccomp:' /proc/self/status"
    unset, _ = run(pcore, "sc-unset", probe, image="skiff/venv")
    default, _ = run(pcore, "sc-default", probe, image="skiff/venv",
                     securityContext={"seccompProfile": {"type": "RuntimeDefault"}})
    unconfined, _ = run(pcore, "sc-unconfined", probe, image="skiff/venv",
                        container={"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                        securityContext={"seccompProfile": {"type": "RuntimeDefault"}})
    blocked = ["add_key Operation not permitted", "unshare Operation not permitted", "Seccomp:\t2"]
    assert unset.splitlines() == blocked and default.splitlines() == blocked
    assert unconfined.splitlines() == ["add_key ok", "unshare ok", "Seccomp:\t0"]


def test_seccomp_follows_the_containers_capabilities_as_containerds_profile_does(pcore):
    """CAP_SYS_ADMIN added: the profile allows unshare (DefaultProfile's CAP_SYS_ADMIN rule), add_key stays out."""
    out, _ = run(pcore, "sc-admin", f"python -c \"{SECCOMP_PROBE}\"", image="skiff/venv",
                 container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}})
    assert out.splitlines() == ["add_key Operation not permitted", "unshare ok"]


def test_a_localhost_seccomp_profile_is_loaded_from_the_nodes_profile_root_or_refused(pcore, procsim_server):
    """Localhost: the OCI profile at <state dir>/seccomp/<localhostProfile> (the kubelet's <root-dir>/seccomp);
    a missing one is a CreateContainerError in containerd's words."""
    from kubesim.testing import wait_until
    root = os.path.join(procsim_server.cluster.kubelet.procs.state_dir, "seccomp")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "no-mkdir.json"), "w") as f:
        f.write('{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], '
                '"action": "SCMP_ACT_ERRNO", "errnoRet": 13}]}')
    out, _ = run(pcore, "sc-local", "mkdir /tmp/d 2>&1; touch /tmp/f && echo touched",
                 securityContext={"seccompProfile": {"type": "Localhost", "localhostProfile": "no-mkdir.json"}})
    assert "Permission denied" in out and out.splitlines()[-1] == "touched"
    pcore.create_namespaced_pod("default", pod("sc-missing", ["true"], securityContext={
        "seccompProfile": {"type": "Localhost", "localhostProfile": "absent.json"}}))

    def waiting():
        s = (pcore.read_namespaced_pod("sc-missing", "default").status.container_statuses or [None])[0]
        return s.state.waiting if s and s.state.waiting and s.state.waiting.reason != "ContainerCreating" else None
    w = wait_until(waiting, 15)
    assert w.reason == "CreateContainerError"
    assert w.message == (f'failed to generate seccomp spec opts: cannot load seccomp profile '
                         f'"{os.path.realpath(root)}/absent.json": No such file or directory')
    with open(os.path.join(root, "absent.json"), "w") as f:       # retried: the profile is there now
        f.write('{"defaultAction": "SCMP_ACT_ALLOW"}')
    phase_is(pcore, "sc-missing", "Succeeded")


def test_two_kubesims_on_one_machine_never_share_an_id_range(pcore):
    """Ranges are held machine-wide (flocks under /var/lib/kubesim/ranges): a pod of a second kubesim running
    beside one of this kubesim gets another host range, though each is its kubesim's first pod."""
    from kubernetes.client import CoreV1Api

    from kubesim import KubeSim
    from kubesim.testing import sync_api_client
    from tests.support.kubesim.procrt_support import PROCESS_NODES
    pcore.create_namespaced_pod("default", pod("first", ["bash", "-c", "cat /proc/self/uid_map; sleep 60"]))
    phase_is(pcore, "first", "Running")
    other = KubeSim(nodes=PROCESS_NODES).start()
    api = sync_api_client(other.url)
    try:
        ocore = CoreV1Api(api)
        ocore.create_namespaced_pod("default", pod("second", ["cat", "/proc/self/uid_map"]))
        phase_is(ocore, "second", "Succeeded")
        second = log(ocore, "second").split()
    finally:
        api.close()
        other.stop()
    first = log(pcore, "first").split()
    assert first[0] == second[0] == "0" and first[2] == second[2] == "65536"
    assert int(first[1]) >= 65536 and int(second[1]) >= 65536 and first[1] != second[1]
