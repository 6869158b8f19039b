"""What the kubelet does for a pod on a process node, over `ProcessRuntime`: refuse what a process node
cannot run (writable hostPath volumes, privileged containers: kubelet.go `rejectPod`, a Failed pod with an Event),
set up the pod's volumes and sandbox, run the init containers one by one to completion, then start the
containers; report each exit back to the kubelet, stop containers (SIGTERM, grace, SIGKILL) on deletion, on
`activeDeadlineSeconds` and when the kubelet kills the pod.

Upstream: pkg/kubelet/kuberuntime/kuberuntime_manager.go (`SyncPod`: sandbox, then init containers in order,
then containers; `computePodActions`), pkg/kubelet/kuberuntime/kuberuntime_container.go (`startContainer`:
the `Created`/`Started`/`Failed` Events; `killContainer`: the grace period from deletionGracePeriodSeconds or
terminationGracePeriodSeconds, `Killing` Event), pkg/kubelet/kubelet_pods.go (`makeEnvironmentVariables`).
A container that cannot start is what containerd reports: terminated, reason StartError, exit code 128,
the runtime's message (pkg/kubelet/kuberuntime/kuberuntime_container.go `startContainer` records
`Error: <message>`; containerd pkg/cri/server/container_start.go sets exit code 128 / StartError).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
from dataclasses import dataclass, field

from kubesim.apimachinery.resources import qty
from kubesim.kubelet.podruns import TERMINAL, Attempt, ContainerRun, PodRun
from kubesim.kubelet.procrt import seccomp, security, storage, userns
from kubesim.kubelet.procrt.env import ConfigError, command_line, container_env
from kubesim.kubelet.procrt.layers import unmount_under
from kubesim.kubelet.procrt.podnet import PodNet, hosts_file, listeners, service_env
from kubesim.kubelet.procrt.probes import PROBES, probe_container, run_handler
from kubesim.kubelet.procrt.runtime import Container, ProcessRuntime, Sandbox, StartError, tool
from kubesim.kubelet.procrt.sandbox import Launch, Mount, image_paths, resolve
from kubesim.kubelet.procrt.volumes import VolumeDirs, config_files, host_path, refused

log = logging.getLogger("kubesim.kubelet.procrt")
RUNTIME_ANNOTATION = "kubesim.io/runtime"          # on a Node: "process" (nodes file `runtime: process`)
IMAGES_ANNOTATION = "kubesim.io/images"            # on a Node: JSON {image: host dir or virtualenv}
PIDS_ANNOTATION = "kubesim.io/pod-pids-limit"      # on a Node: the kubelet's podPidsLimit (nodes file)
SCRIPTED = ("duration", "exit-code", "reason", "logs", "log-lines", "message")
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"     # a Debian image's PATH
DEFAULT_GRACE = 30


def _hostname(pod: dict) -> str:
    """GeneratePodHostNameAndDomain (pkg/kubelet/kubelet_pods.go): spec.hostname when set, else the pod's name."""
    return pod["spec"].get("hostname") or pod["metadata"]["name"]


@dataclass
class PodProcs:
    """The runtime's side of one pod: its sandbox, volume directories and running containers."""
    sandbox: Sandbox | None = None
    volumes: dict[str, str] = field(default_factory=dict)
    containers: dict[str, Container] = field(default_factory=dict)
    tasks: list[asyncio.Task] = field(default_factory=list)
    net: PodNet | None = None                          # its Service names and listeners (podnet.py)
    key: tuple[str, str] | None = None
    base: int | None = None                            # host id of its container root (userns.py), None: no userns
    cgroup: str | None = None                          # its pod cgroup (pid limit)
    claims: set[str] = field(default_factory=set)      # volumes that are PersistentVolumes (idmapped)
    idmapped: dict[str, str] = field(default_factory=dict)   # volume -> its idmapped mount for this pod


def scripted(pod: dict) -> bool:
    """A pod with `kubesim.io/*` outcome annotations is scripted even on a process node (they win)."""
    ann = pod["metadata"].get("annotations") or {}
    return any(f"kubesim.io/{k}" in ann for k in SCRIPTED)


def is_process_node(node: dict | None) -> bool:
    return ((node or {}).get("metadata", {}).get("annotations") or {}).get(RUNTIME_ANNOTATION) == "process"


def refusal(pod: dict) -> tuple[str, str] | None:
    """(reason, message) when a process node refuses the pod, else None."""
    containers = (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or [])
    for v in pod["spec"].get("volumes") or []:
        mounts = [m for c in containers for m in c.get("volumeMounts") or [] if m.get("name") == v.get("name")]
        if refused(v, mounts):
            return ("HostPathNotAllowed", f'volume "{v.get("name")}": hostPath volumes are not allowed on '
                                          "kubesim process nodes unless every mount of them is readOnly "
                                          "(the node's own files)")
    for c in (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or []):
        if ((c.get("securityContext") or {}).get("privileged")):
            return ("PrivilegedNotAllowed", f'container "{c["name"]}": privileged containers are not allowed '
                                            "on kubesim process nodes")
    return None


def grace_seconds(pod: dict) -> float:
    md = pod["metadata"]
    if md.get("deletionGracePeriodSeconds") is not None and md.get("deletionTimestamp"):
        return float(md["deletionGracePeriodSeconds"])
    value = pod["spec"].get("terminationGracePeriodSeconds")
    return float(DEFAULT_GRACE if value is None else value)


def _limits(spec: dict) -> tuple[int | None, int | None]:
    limits = (spec.get("resources") or {}).get("limits") or {}
    mem = int(qty(str(limits["memory"]))) if limits.get("memory") else None
    cpu = int(qty(str(limits["cpu"])) * 1000) if limits.get("cpu") else None
    return mem, cpu


class ProcessPods:
    """The kubelet's process runtime half (one for all process nodes). `kubelet` is a `kubelet.Kubelet`."""

    def __init__(self, kubelet, state_dir: str, remove_state: bool = False):
        self.kubelet, self.state_dir, self.remove_state = kubelet, state_dir, remove_state
        self.runtime = ProcessRuntime(state_dir)
        self.dirs = VolumeDirs(state_dir)
        self.pods: dict[str, PodProcs] = {}            # pod uid -> its processes
        # id ranges free on the machine (flocks under RANGES_DIR), only where pods get a user namespace (root)
        self.ids = userns.IdRanges(None if self.runtime.userns_problem else userns.RANGES_DIR)
        if not self.runtime.userns_problem:
            userns.prune_images(userns.IMAGE_CACHE, userns.RANGES_DIR)
        self.filters = seccomp.Filters(state_dir, os.path.join(state_dir, "seccomp"))
        self.removals: set[asyncio.Task] = set()        # remove_later's, awaited by aclose
        unmount_under(os.path.join(state_dir, "pods"))     # layers a killed kubesim left on this state dir
        for problem in (self.runtime.cgroups.problem, self.runtime.userns_problem, seccomp.problem()):
            if problem:
                log.warning("kubesim process nodes: %s", problem)

    # --- lookups ----------------------------------------------------------------------------------
    def _lookup(self, kind: str, ns: str, name: str) -> dict | None:
        kl = self.kubelet
        return kl.cluster.cache.get(kl.cluster.rt(kind), ns, name)

    def _node(self, run: PodRun) -> dict:
        kl = self.kubelet
        return kl.cluster.cache.get(kl.nodes_rt, None, run.node) or {}

    def _image_root(self, run: PodRun, image: str) -> str | None:
        images = json.loads((self._node(run).get("metadata", {}).get("annotations") or {}).get(
            IMAGES_ANNOTATION) or "{}")
        root = images.get(image) or images.get("*")
        # `a/devstack/../.venv` on PATH would need a/devstack inside the container: only the image is there
        return os.path.normpath(root) if root else None

    def _base_env(self, run: PodRun, pod: dict, image: str) -> dict[str, str]:
        root = self._image_root(run, image)
        path = f"{os.path.join(root, 'bin')}:{root}:{HOST_PATH}" if root else HOST_PATH
        return {"PATH": path, "HOSTNAME": _hostname(pod), "HOME": "/root"}

    # --- the pod --------------------------------------------------------------------------------
    def _volume_dirs(self, pod: dict, allocatable: dict, base: int | None, claims: set[str]) -> dict[str, str]:
        """Each volume's directory, owned by the pod's ids (`base`: its container root on the host), then
        fsGroup (SetVolumeOwnership). A PV keeps container ids on disk (it is mounted idmapped: `_pv_mount`)."""
        out = {}
        uid = pod["metadata"]["uid"]
        fs_group = (pod["spec"].get("securityContext") or {}).get("fsGroup")
        for v in pod["spec"].get("volumes") or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if host_path(v):
                out[v["name"]] = host_path(v)
                continue
            if claim:
                pvc = self._lookup("persistentvolumeclaims", pod["metadata"]["namespace"], claim) or {}
                pv_name = (pvc.get("spec") or {}).get("volumeName") or f"pvc-{(pvc.get('metadata') or {}).get('uid')}"
                path = out[v["name"]] = self.dirs.pv_dir(pv_name)
                claims.add(v["name"])
            else:
                files = config_files(v, pod, self._lookup, allocatable)
                path = out[v["name"]] = self.dirs.volume_dir(uid, v["name"], files)
                if files is None:
                    os.chmod(path, 0o777)          # emptyDir: pkg/volume/emptydir/empty_dir.go, perm 0777
                if base is not None:
                    userns.shift_tree(path, None, base)
            if not _always_ro(pod, v["name"]):
                userns.volume_ownership(path, None if claim else base, fs_group)
        return out

    async def start_pod(self, run: PodRun, pod: dict) -> None:
        """SyncPod for a new pod: volumes, sandbox, init containers in order, then the containers."""
        try:
            await self._sync_pod(run, pod)
        except Exception as e:        # never a silent hang: the pod's Events say what broke
            log.exception("process pod %s/%s", *run.key)
            self.kubelet.recorder.record(pod, "Warning", "FailedCreatePodSandBox",
                                         f"kubesim process runtime: {type(e).__name__}: {str(e)[:300]}",
                                         host=run.node)

    async def _sync_pod(self, run: PodRun, pod: dict) -> None:
        kl, uid = self.kubelet, run.uid
        procs = self.pods.setdefault(uid, PodProcs())
        allocatable = (self._node(run).get("status") or {}).get("allocatable") or {}
        if procs.base is None and not self.runtime.userns_problem:
            procs.base = self.ids.allocate(uid)
        try:
            procs.volumes = self._volume_dirs(pod, allocatable, procs.base, procs.claims)
        except ConfigError as e:
            kl.recorder.record(pod, "Warning", "FailedMount", f"MountVolume.SetUp failed: {e}", host=run.node)
            run.blocked = True
            return
        if procs.sandbox is None:
            try:
                # GeneratePodHostNameAndDomain: spec.hostname when set, else the pod's name
                procs.sandbox = await self.runtime.run_sandbox(_hostname(pod),
                                                               os.path.join(self.dirs.pod_dir(uid), "run"),
                                                               procs.base)
            except StartError as e:
                kl.recorder.record(pod, "Warning", "FailedCreatePodSandBox", str(e), host=run.node)
                return
            procs.key = run.key
            procs.cgroup = self.runtime.cgroups.pod(f"pod{uid}", _pids_limit(self._node(run)))
            if storage.pod_limit(pod) is not None:
                procs.tasks.append(asyncio.ensure_future(self._watch_storage(run, pod)))
            procs.net = PodNet(procs.sandbox.run_dir, self._forward)
            await procs.net.start()
            await self._refresh_net(uid)
        if self.runtime.cgroups.problem and _limits_any(pod):
            kl.recorder.record(pod, "Warning", "LimitsNotEnforced", self.runtime.cgroups.problem, host=run.node)
        if not run.initialized:
            for spec in pod["spec"].get("initContainers") or []:
                if "terminated" not in run.init_containers[spec["name"]].state and \
                        not await self._run_init(run, pod, spec):
                    return
            run.initialized = True
        for spec in pod["spec"].get("containers") or []:
            if kl.runs.get(run.key) is not run or run.phase in TERMINAL:
                return
            c = run.containers[spec["name"]]
            if c.attempt is None or "waiting" in c.state and c.state["waiting"].get("reason") != "CrashLoopBackOff":
                await self.start_container(run, pod, c, spec)

    async def _run_init(self, run: PodRun, pod: dict, spec: dict) -> bool:
        """One init container to completion (restarted with back-off unless restartPolicy Never)."""
        kl = self.kubelet
        c = run.init_containers[spec["name"]]
        while True:
            if kl.runs.get(run.key) is not run or run.phase in TERMINAL:
                return False
            proc = await self.start_container(run, pod, c, spec, init=True)
            if proc is None:
                code = (c.state.get("terminated") or {}).get("exitCode")
                if code is None:       # config error: waits for the object
                    return False
            else:
                await proc.finished
                code = c.state.get("terminated", {}).get("exitCode", 1)
            if code == 0:
                return True
            if run.restart_policy == "Never":
                run.phase = "Failed"
                kl._write_status(run)
                self.release_later(run.uid)
                return False
            c.last_state, c.restart_count = {"terminated": c.state["terminated"]}, c.restart_count + 1
            await asyncio.sleep(min(kl.cluster.timing.restart_backoff * 2 ** (c.restart_count - 1),
                                    kl.cluster.timing.restart_backoff * 10))

    async def start_container(self, run: PodRun, pod: dict, c: ContainerRun, spec: dict, init: bool = False):
        """startContainer: env and argv, then the process; None when it did not start (its state says why)."""
        kl = self.kubelet
        procs = self.pods.get(run.uid)
        fp = f"spec.{'initContainers' if init else 'containers'}{{{c.name}}}"
        if procs is None or procs.sandbox is None:
            return None
        allocatable = (self._node(run).get("status") or {}).get("allocatable") or {}
        live = kl.cluster.cache.get(kl.pods_rt, *run.key) or pod
        services = kl.cluster.cache.list(kl.cluster.rt("services"))
        try:
            env = container_env(live, spec, self._lookup, allocatable, self._base_env(run, pod, c.image),
                                service_env(live, services))
        except ConfigError as e:
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            kl.recorder.record(pod, "Warning", "Failed", f"Error: {e}", host=run.node, field_path=fp)
            run.blocked = True
            kl._write_status(run)
            return None
        refusal_text = security.non_root_error(live, spec)
        if refusal_text:          # verifyRunAsNonRoot: CreateContainerConfigError, retried on every sync
            c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": refusal_text}}
            kl.recorder.record(pod, "Warning", "Failed", f"Error: {refusal_text}", host=run.node, field_path=fp)
            run.blocked = True
            kl._write_status(run)
            return None
        kind, localhost = seccomp.requested(live, spec, _seccomp_default(self._node(run)))
        try:
            bpf = await asyncio.get_running_loop().run_in_executor(None, self.filters.path, kind, localhost,
                                                                   security.capabilities(spec))
        except seccomp.ProfileError as e:     # containerd's CreateContainer failed: CreateContainerError, retried
            text = f"failed to generate seccomp spec opts: {e}"
            c.state = {"waiting": {"reason": "CreateContainerError", "message": text}}
            kl.recorder.record(pod, "Warning", "Failed", f"Error: {text}", host=run.node, field_path=fp)
            kl._write_status(run)
            # the pod worker syncs it again after a back-off (a Localhost profile written meanwhile is found)
            kl._later(run, kl.cluster.timing.restart_backoff * 10, kl._start, run)
            return None
        argv = command_line(spec, env)
        mounts = [Mount(_sub(self._pv_mount(run, procs, m["name"]), m.get("subPath")), m["mountPath"],
                        bool(m.get("readOnly")) or _always_ro(pod, m["name"]))
                  for m in spec.get("volumeMounts") or [] if m.get("name") in procs.volumes]
        image = image_paths(self._image_root(run, c.image))
        _premake_mount_points(mounts, image, {procs.idmapped[v]: procs.volumes[v] for v in procs.idmapped})
        if procs.net is not None and os.path.exists(procs.net.hosts_path) and \
                not any(m.target.rstrip("/") == "/etc/hosts" for m in mounts):
            mounts.append(Mount(procs.net.hosts_path, "/etc/hosts", read_only=True))     # makeMounts
        launch = Launch(argv, env, _hostname(pod), mounts, spec.get("workingDir") or None, image,
                        # without root, bwrap's own user namespace maps kubesim's id only: no ids to change
                        security.wrapper(tool("setpriv"), live, spec) if os.geteuid() == 0 else [],
                        security.read_only_root(spec), bpf)
        now_dt = kl.store.clock.now()
        kl.recorder.record(pod, "Normal", "Pulled", f'Container image "{c.image}" already present on machine',
                           host=run.node, field_path=fp)
        problem = "no command specified" if not argv else resolve(argv[0], env, [*mounts, *(Mount(p, p) for p in image)],
                                                                  launch.cwd)
        attempt = Attempt(f"containerd://{secrets.token_hex(32)}", now_dt, kl._mono(), [])
        if c.attempt is not None:
            c.previous = c.attempt
        c.attempt = attempt
        try:
            if problem:
                raise StartError("failed to create containerd task: failed to create shim task: OCI runtime create "
                                 "failed: runc create failed: unable to start container process: "
                                 f"{problem}: unknown")
            mem, cpu = _limits(spec)
            proc = await self.runtime.start(procs.sandbox, launch,
                                            os.path.join(self.dirs.pod_dir(run.uid), "layers",
                                                         f"{c.name}-{c.restart_count}"),
                                            f"{run.uid}-{c.name}-{c.restart_count}", mem, cpu,
                                            lambda _s, text: self._line(attempt, text), procs.cgroup)
        except StartError as e:
            kl.recorder.record(pod, "Warning", "Failed", f"Error: {e}", host=run.node, field_path=fp)
            c.state = {"running": {"startedAt": kl.store.clock.rfc3339(now_dt)}}
            self._finish(run, c, init, 128, "StartError", str(e), started=False)
            return None
        if proc.layer is not None and proc.layer.problem and c.restart_count == 0:
            kl.recorder.record(pod, "Warning", "WritableLayerUnavailable", proc.layer.problem, host=run.node,
                               field_path=fp)
        kl.recorder.record(pod, "Normal", "Created", f"Created container {c.name}", host=run.node, field_path=fp)
        kl.recorder.record(pod, "Normal", "Started", f"Started container {c.name}", host=run.node, field_path=fp)
        c.state = {"running": {"startedAt": kl.store.clock.rfc3339(now_dt)}}
        c.ready = False if spec.get("readinessProbe") and not init else None
        procs.containers[c.name] = proc
        if not init and run.phase == "Pending":
            run.phase = "Running"
        kl._write_status(run)
        proc.finished = asyncio.ensure_future(self._watch(run, c, proc, init))
        procs.tasks.append(proc.finished)
        if not init and any(spec.get(k) for k in PROBES):
            procs.tasks.append(asyncio.ensure_future(probe_container(self, run, pod, c, spec, proc,
                                                                    grace_seconds(pod))))
        return proc

    async def _watch_storage(self, run: PodRun, pod: dict) -> None:
        """The eviction manager's local-storage check for this pod, every storage.PERIOD seconds."""
        kl, loop = self.kubelet, asyncio.get_running_loop()
        pod_dir = self.dirs.pod_dir(run.uid)
        while kl.runs.get(run.key) is run and run.phase not in TERMINAL and not run.terminating:
            logs = sum(len(line[2]) + 1 for c in run.containers.values() for a in (c.attempt, c.previous)
                       if a is not None for line in a.lines)
            used = await loop.run_in_executor(None, storage.usage, pod_dir) + logs
            message = storage.over_limit(pod, used)
            if message:
                kl.evict(run, message)
                return
            await asyncio.sleep(storage.PERIOD)

    def _pv_mount(self, run: PodRun, procs: PodProcs, volume: str) -> str:
        """A volume's host directory for the container; a PersistentVolume's through an idmapped mount of the
        pod's user namespace (made once per pod), so pods with different ranges share its files, concurrently
        too. Where idmapped mounts fail, its files are shifted to this pod's range instead (userns.adopt)."""
        path = procs.volumes[volume]
        if volume not in procs.claims or procs.base is None or procs.sandbox is None or not procs.sandbox.userns:
            return path
        if volume not in procs.idmapped:
            target = os.path.join(self.dirs.pod_dir(run.uid), "idmapped", volume)
            problem = userns.idmapped_mount(path, target, procs.sandbox.userns)
            if problem:
                log.warning("volume %s of pod %s/%s: no idmapped mount (%s): its files are shifted to the pod's ids",
                            volume, *run.key, problem)
                userns.adopt(path, procs.base)
                target = path
            procs.idmapped[volume] = target
        return procs.idmapped[volume]

    def _line(self, attempt: Attempt, text: str) -> None:
        kl = self.kubelet
        attempt.lines.append((kl._mono(), kl.store.clock.now(), text))
        attempt.changed.set()

    async def _watch(self, run: PodRun, c: ContainerRun, proc: Container, init: bool) -> None:
        result = await proc.wait()
        reason = "OOMKilled" if result.oom else ("Completed" if result.code == 0 else "Error")
        self._finish(run, c, init, result.code, reason, None)

    def _finish(self, run: PodRun, c: ContainerRun, init: bool, code: int, reason: str, message: str | None,
                started: bool = True) -> None:
        kl = self.kubelet
        if init or not started:
            now = kl.store.clock.rfc3339(kl.store.clock.now())
            terminated = {"exitCode": code, "reason": reason, "startedAt": c.state.get("running", {}).get(
                "startedAt", now) if started else None, "finishedAt": now, "containerID": c.attempt.container_id}
            if message:
                terminated["message"] = message
            c.attempt.finished_mono, c.attempt.terminated = kl._mono(), terminated
            c.attempt.changed.set()
            if init:
                c.state = {"terminated": terminated}
                kl._write_status(run)
                return
        kl._exit(run, c.name, exit_code=code, reason=reason, message=message)

    # --- networking -------------------------------------------------------------------------------
    async def _forward(self, ip: str, port: int, reader, writer) -> None:
        services = self.kubelet.services_net
        if services is None:
            writer.close()
            return
        await services.forward_from_pod(ip, port, reader, writer)

    async def _refresh_net(self, uid: str) -> None:
        """The pod's hosts file and agent listeners from the Services in the cache now."""
        kl, procs = self.kubelet, self.pods.get(uid)
        if procs is None or procs.net is None or procs.sandbox is None:
            return
        run = kl.runs.get(procs.key)
        pod = kl.cluster.cache.get(kl.pods_rt, *procs.key)
        if run is None or pod is None or run.uid != uid:
            return

        def want():
            services = kl.cluster.cache.list(kl.cluster.rt("services"))
            pods = kl.cluster.cache.list(kl.pods_rt, pod["metadata"]["namespace"])
            return hosts_file(pod, run.pod_ip, services, pods), listeners(pod, services, pods)
        had = procs.net.problem
        try:
            await procs.net.refresh(procs.sandbox, want)
        except (ConnectionError, OSError) as e:     # the sandbox is going away
            log.debug("pod %s/%s: services not refreshed: %s", *procs.key, e)
            return
        if procs.net.problem and procs.net.problem != had:
            kl.recorder.record(pod, "Warning", "ServiceListenersFailed", procs.net.problem, host=run.node)

    def services_changed(self) -> None:
        """A Service came, changed or went: every running pod's names and listeners follow."""
        for uid in list(self.pods):
            task = asyncio.ensure_future(self._refresh_net(uid))
            self.removals.add(task)
            task.add_done_callback(self.removals.discard)

    def runs_pod(self, namespace: str, name: str) -> str | None:
        """The uid of the process pod `namespace/name` when its sandbox runs here, else None."""
        run = self.kubelet.runs.get((namespace, name))
        if run is None or not run.process or run.uid not in self.pods or self.pods[run.uid].sandbox is None:
            return None
        return run.uid

    async def connect(self, uid: str, port: int):
        """(reader, writer) to `port` in the pod's network namespace; ConnectionRefusedError if nothing listens."""
        procs = self.pods.get(uid)
        if procs is None or procs.sandbox is None:
            raise ConnectionRefusedError("pod not running")
        return await procs.sandbox.connect(port)

    async def exec(self, uid: str, container: str, argv: list[str]):
        """A process in the container's namespaces and cgroup with its environment (kubectl exec)."""
        procs = self.pods.get(uid)
        c = procs.containers.get(container) if procs else None
        if c is None or c.proc.returncode is not None or not argv:
            raise LookupError(f'container "{container}" is not running' if argv else "no command given")
        launch = c.launch
        wd = ["--wd=" + launch.cwd] if launch.cwd else []
        # the container's mount namespace belongs to the host's user namespace: enter it first, then (from
        # inside, where /proc/1 is the container's command) its user namespace, as its root, then the wrapper
        user = [tool("nsenter"), "--user=/proc/1/ns/user", "--"] if procs.base is not None else []
        # runc exec loads the container's seccomp filter too: bwrap (the image's /usr/bin) there, binding the
        # container's root onto itself in a mount namespace of its own, loads it before the wrapper runs
        fd = os.open(launch.seccomp, os.O_RDONLY) if launch.seccomp else None
        filt = [tool("bwrap"), "--dev-bind", "/", "/", "--seccomp", str(fd), "--"] if fd is not None else []
        try:
            return await asyncio.create_subprocess_exec(
                *c.group.exec_prefix(), tool("nsenter"), f"--target={c.pid}", "--root", "--mount", "--uts", "--ipc",
                "--net", "--pid", *wd, "--", *user, *filt, *launch.wrapper, *argv,
                env=launch.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, pass_fds=[fd] if fd is not None else [])
        finally:
            if fd is not None:
                os.close(fd)

    # --- stopping ---------------------------------------------------------------------------------
    async def stop_pod(self, run: PodRun, grace: float, remove: bool = False) -> None:
        """killPod: every running container gets SIGTERM, then SIGKILL after `grace`; with `remove` the
        sandbox and the pod's own directories go too (the pod object is gone)."""
        procs = self.pods.get(run.uid)
        if procs is None:
            return
        pod = self.kubelet.cluster.cache.get(self.kubelet.pods_rt, *run.key) or {"spec": {}}
        specs = {c["name"]: c for c in pod["spec"].get("containers") or []}
        await asyncio.gather(*(self._stop_one(run.uid, specs.get(n) or {}, p, grace)
                               for n, p in procs.containers.items()), return_exceptions=True)
        await asyncio.gather(*procs.tasks, return_exceptions=True)
        if remove:
            await self.remove_pod(run.uid)

    def release_later(self, uid: str) -> None:
        """The pod reached Succeeded/Failed: its sandbox (the agent holding its network) goes now, as the
        kubelet stops a terminated pod's sandbox; its logs and volume directories stay until it is deleted."""
        procs = self.pods.get(uid)
        if procs is None or procs.sandbox is None:
            return
        sandbox, procs.sandbox = procs.sandbox, None
        if procs.net is not None:
            procs.net.close()
        task = asyncio.ensure_future(sandbox.stop())
        self.removals.add(task)
        task.add_done_callback(self.removals.discard)

    def remove_later(self, uid: str) -> None:
        task = asyncio.ensure_future(self.remove_pod(uid))
        self.removals.add(task)
        task.add_done_callback(self.removals.discard)

    async def _stop_one(self, uid: str, spec: dict, proc: Container, grace: float) -> None:
        """killContainer: the preStop hook within the grace period, then SIGTERM, SIGKILL at its end."""
        hook = (spec.get("lifecycle") or {}).get("preStop")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        if hook and proc.proc.returncode is None and grace > 0:
            await run_handler(hook, spec, lambda argv: self.exec(uid, spec["name"], argv),
                              lambda port: self.connect(uid, port), grace)
        await proc.stop(max(0.0, grace - (loop.time() - t0)))

    async def remove_pod(self, uid: str) -> None:
        procs = self.pods.pop(uid, None)
        if procs is None:
            return
        for p in procs.containers.values():
            await p.stop(0)
        if procs.net is not None:
            procs.net.close()
        if procs.sandbox is not None:
            await procs.sandbox.stop()
        unmount_under(self.dirs.pod_dir(uid))      # a container's writable layer left mounted
        self.dirs.remove_pod(uid)
        self.runtime.cgroups.remove_pod(procs.cgroup)
        if self.ids.release(uid) is not None and self.ids.lock_dir is not None:
            await asyncio.get_running_loop().run_in_executor(None, userns.prune_images, userns.IMAGE_CACHE,
                                                             self.ids.lock_dir)

    async def aclose(self) -> None:
        """kubesim stops: every process of every pod is killed and reaped, the cgroups removed."""
        await asyncio.gather(*self.removals, return_exceptions=True)
        for uid in list(self.pods):
            procs = self.pods.pop(uid)
            for p in procs.containers.values():
                p.signal(9)
                p.group.kill_all()
            await asyncio.gather(*procs.tasks, *(p.proc.wait() for p in procs.containers.values()),
                                 return_exceptions=True)
            if procs.net is not None:
                procs.net.close()
            if procs.sandbox is not None:
                await procs.sandbox.stop()
            unmount_under(self.dirs.pod_dir(uid))
            self.runtime.cgroups.remove_pod(procs.cgroup)
        self.runtime.close()
        self.ids.close()
        if self.remove_state:          # a temp state dir of this kubesim (not $KUBESIM_STATE_DIR): its PVs too
            shutil.rmtree(self.state_dir, ignore_errors=True)


def _premake_mount_points(mounts: list[Mount], image: list[str], idmapped: dict[str, str]) -> None:
    """Mount points inside an idmapped volume, made in its directory beforehand (as container root's: id 0
    on disk): bwrap, host root, is no id of that mount's map and could not make them (EOVERFLOW). runc makes
    them there too (a home volume at /root over a Python under /root/.pyenv)."""
    for m in mounts:
        base = next((idmapped[k] + m.host[len(k):] for k in idmapped if m.host == k or m.host.startswith(k + "/")),
                    None)
        if base is None:
            continue
        inner = [(t.host, t.target) for t in mounts if t.target.startswith(m.target.rstrip("/") + "/")]
        inner += [(p, p) for p in image if p.startswith(m.target.rstrip("/") + "/")]
        for source, target in inner:
            path = os.path.join(base, os.path.relpath(target, m.target))
            try:
                if os.path.isdir(source):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    if not os.path.lexists(path):
                        open(path, "a").close()
            except OSError as e:
                log.warning("mount point %s in volume %s: %s", target, m.target, e)


def _sub(path: str, sub_path: str | None) -> str:
    """The volume's directory, or its `subPath` (a hostPath may be a file: no trailing slash added)."""
    return os.path.join(path, sub_path) if sub_path else path


def _always_ro(pod: dict, volume: str) -> bool:
    """configMap, secret, downwardAPI and projected volumes are mounted read-only by the kubelet."""
    v = next((v for v in pod["spec"].get("volumes") or [] if v.get("name") == volume), {})
    return any(k in v for k in ("configMap", "secret", "downwardAPI", "projected"))


def _pids_limit(node: dict) -> int | None:
    """The node's podPidsLimit (nodes file `podPidsLimit`, annotation `kubesim.io/pod-pids-limit`)."""
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(PIDS_ANNOTATION)
    return int(value) if value and int(value) > 0 else None


def _seccomp_default(node: dict) -> bool:
    """The node's seccompDefault (nodes file `seccompDefault`, annotation `kubesim.io/seccomp-default`; on when
    absent: process nodes filter by default)."""
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(seccomp.DEFAULT_ANNOTATION)
    return value != "false"


def _limits_any(pod: dict) -> bool:
    return any((c.get("resources") or {}).get("limits") for c in pod["spec"].get("containers") or [])

