"""The kubelets: run bound pods on the cluster clock, report schema-complete status, serve logs, emit Events.

A bound pod goes Pending (ContainerCreating) -> Running after `Timing.pod_start` -> its containers exit
after `kubesim.io/duration` (default `Timing.container_run`) with the scripted outcome (INTERNALS.md).
Pods with `restartPolicy: Always` and no scripted duration run until deleted (like a server). On exit:
`Never` -> Succeeded/Failed; `OnFailure` (non-zero exit) and `Always` -> the container restarts after a
CrashLoopBackOff wait (restartCount+1, lastState.terminated). Deleting a scripted pod removes it at once; its
log streams end.

On a process node (`runtime: process` in the nodes file) a pod without `kubesim.io/*` outcome annotations
really runs: `kubesim/kubelet/procrt` starts its init containers and containers as sandboxed processes and reports
their exits here (the same restart, status and Event logic); deleting it is graceful (the API server keeps it
with a deletionTimestamp, the kubelet sends SIGTERM, waits the grace period, SIGKILLs, then removes it).

Upstream: pkg/kubelet/kubelet.go (`HandlePodAdditions`, `syncPod`), pkg/kubelet/pod_workers.go (one worker per
pod), pkg/kubelet/kuberuntime/kuberuntime_manager.go (`computePodActions`: restarts by restartPolicy) and
pkg/kubelet/images/image_manager.go (`imagePullPolicy`, ErrImagePull/ImagePullBackOff). The pod's run is
`podruns.py`, its reported status `podstatus.py`, its logs `podlogs.py`.
"""
from __future__ import annotations

import asyncio
import os
import secrets
import tempfile
from datetime import timedelta

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller, ControllerContext, EventRecorder, Key, key_of
from kubesim.kubelet.podlogs import LogProvider
from kubesim.kubelet.podruns import TERMINAL, Attempt, ContainerRun, PodRun, Script
from kubesim.kubelet.podstatus import pod_status
from kubesim.kubelet.procrt import pods as procrt


class Kubelet(Controller):
    """All nodes' kubelets in one: a pod bound to a node is run by that node's kubelet."""

    name = "kubelet"
    services_net = None      # procrt.network.LoopbackServices, when the cluster runs it (pod-to-Service traffic)

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.pods_rt = cluster.rt("pods")
        self.nodes_rt = cluster.rt("nodes")
        self.runs: dict[Key, PodRun] = {}
        self.recorder = EventRecorder(self.store, "kubelet")
        self._ip = 0
        self.logs = LogProvider(self)
        self.stats = None       # the usage sampler (kubelet/stats.py), set by the cluster that runs one
        self._procs: procrt.ProcessPods | None = None
        # the event loop keeps only weak references to tasks: an unreferenced pending one can be collected mid-run
        # (asyncio docs, create_task: "Save a reference to the result of this function"); a pod then stayed
        # ContainerCreating for good ("Task was destroyed but it is pending!")
        self._background: set[asyncio.Future] = set()

    def _in_background(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def procs(self) -> procrt.ProcessPods:
        """The process runtime, made on first use (its state under $KUBESIM_STATE_DIR or a temp dir)."""
        if self._procs is None:
            given = os.environ.get("KUBESIM_STATE_DIR")
            self._procs = procrt.ProcessPods(self, given or tempfile.mkdtemp(prefix="kubesim-state-"),
                                             remove_state=not given)
        return self._procs

    @property
    def procs_if_any(self) -> procrt.ProcessPods | None:
        """The process runtime if a process pod has run (for the service proxy, exec, port-forward)."""
        return self._procs

    def process_pods(self) -> procrt.ProcessPods | None:
        """KubeletClient (kubesim/apiserver/kubeletclient.py): the process runtime, if a process pod has run."""
        return self._procs

    def graceful(self, pod: dict) -> bool:
        """KubeletClient: whether a DELETE of `pod` is graceful: running on a process node (pod strategy CheckGracefulDelete;
        scripted pods keep going at once)."""
        run = self.runs.get(key_of(pod))
        return run is not None and run.process and run.uid == pod["metadata"]["uid"]

    def reset(self) -> None:
        for run in self.runs.values():
            self._end_streams(run)
            run.cancel()
        self.runs.clear()

    async def stop(self) -> None:
        self.reset()
        if self._procs is not None:
            await self._procs.aclose()
            self._procs = None
        await super().stop()

    # --- events ---------------------------------------------------------------------------------
    def on_event(self, event_type, rt, obj, old):
        if rt.group == "" and rt.plural == "persistentvolumes" and event_type == "DELETED" and self._procs and \
                (obj.get("spec") or {}).get("persistentVolumeReclaimPolicy") == "Delete":
            self._procs.dirs.remove_pv(obj["metadata"]["name"])     # the volume's data goes with it
            return
        if rt.group == "" and rt.plural in ("configmaps", "secrets", "persistentvolumeclaims") and \
                event_type != "DELETED":
            ns = obj["metadata"].get("namespace")
            for run in list(self.runs.values()):      # the kubelet retries pods waiting for this object
                if run.blocked and run.key[0] == ns:
                    run.blocked = False
                    self._later(run, 0, self._start, run)
            return
        if rt.plural == "nodes" and rt.group == "" and event_type == "ADDED":
            for key, _pod in self._unstarted_on(obj["metadata"]["name"]):
                self.queue.add(key)
            return
        if rt.plural != "pods" or rt.group != "":
            return
        key = key_of(obj)
        run = self.runs.get(key)
        if event_type == "DELETED":
            if run is not None and run.uid == obj["metadata"]["uid"]:
                self._kill(run, obj)
            return
        if obj["spec"].get("nodeName") and (run is None or run.uid != obj["metadata"]["uid"]):
            self.queue.add(key)
        elif (run is not None and run.uid == obj["metadata"]["uid"] and obj["metadata"].get("deletionTimestamp")
              and run.phase not in TERMINAL):
            self.queue.add(key)     # deleted but held by finalizers: stop its containers

    def _terminate(self, run: PodRun) -> None:
        """A pod marked for deletion (still held by finalizers): its containers are killed (exit 137) and
        it reaches a terminal phase, as a kubelet does before the API server removes it."""
        pod = self._pod(run)
        if pod is None:
            return
        if run.process:
            if not run.terminating:
                run.terminating = True
                self._in_background(self._stop_gracefully(run, pod, remove=True))
            return
        run.phase = "Failed"
        for c in run.containers.values():
            if c.running:
                self.recorder.record(pod, "Normal", "Killing", f"Stopping container {c.name}", host=run.node,
                                     field_path=f"spec.containers{{{c.name}}}")
                self._exit(run, c.name, exit_code=137, reason="Error")
        run.cancel()
        self._end_streams(run)
        self._write_status(run)

    def _unstarted_on(self, node: str):
        for pod in self.cluster.cache.list(self.pods_rt):
            if pod["spec"].get("nodeName") == node and key_of(pod) not in self.runs:
                yield key_of(pod), pod

    def _kill(self, run: PodRun, pod: dict) -> None:
        run.cancel()
        if run.process:
            run.terminating = True
            self.procs.remove_later(run.uid)
        self._end_streams(run)
        del self.runs[run.key]
        for c in run.containers.values():
            if c.running:
                self.recorder.record(pod, "Normal", "Killing", f"Stopping container {c.name}",
                                     host=run.node, field_path=f"spec.containers{{{c.name}}}")

    def _end_streams(self, run: PodRun) -> None:
        now = self._mono()
        for c in run.containers.values():
            if c.attempt is not None and c.attempt.finished_mono is None:
                c.attempt.finished_mono = now
                c.attempt.changed.set()

    # --- lifecycle ------------------------------------------------------------------------------
    def reconcile(self, key: Key) -> None:
        pod = self.cluster.cache.get(self.pods_rt, *key)
        if pod is None or not pod["spec"].get("nodeName"):
            return
        run = self.runs.get(key)
        if run is not None and run.uid == pod["metadata"]["uid"]:
            if pod["metadata"].get("deletionTimestamp") and run.phase not in TERMINAL:
                self._terminate(run)
            return
        if run is not None:
            run.cancel()
        if (pod.get("status") or {}).get("phase") in TERMINAL or pod["metadata"].get("deletionTimestamp"):
            return
        if self.cluster.cache.get(self.nodes_rt, None, pod["spec"]["nodeName"]) is None:
            return     # bound to a node that does not exist: no kubelet runs it (it stays Pending)
        self._admit_pod(pod)

    def _mono(self) -> float:
        return asyncio.get_running_loop().time()

    def _later(self, run: PodRun, delay: float, fn, *args) -> None:
        loop = asyncio.get_running_loop()
        run.timers = [t for t in run.timers if t.when() > loop.time()]    # forget fired ones (crash loops)
        run.timers.append(loop.call_later(max(0.0, delay), fn, *args))

    def _admit_pod(self, pod: dict) -> None:
        key = key_of(pod)
        node_name = pod["spec"]["nodeName"]
        node = self.cluster.cache.get(self.nodes_rt, None, node_name)
        host_ip = "10.0.0.1"
        for addr in ((node or {}).get("status") or {}).get("addresses") or []:
            if addr.get("type") == "InternalIP":
                host_ip = addr["address"]
        self._ip += 1
        containers = {c["name"]: ContainerRun(c["name"], c.get("image", ""),
                                              {"waiting": {"reason": "ContainerCreating"}})
                      for c in pod["spec"].get("containers") or []}
        run = PodRun(key, pod["metadata"]["uid"], node_name, Script.of(pod),
                     pod["spec"].get("restartPolicy") or "Always", containers,
                     f"10.244.{(self._ip >> 8) & 255}.{self._ip & 255}", host_ip, self.cluster.now())
        run.process = procrt.is_process_node(node) and not procrt.scripted(pod)
        self.runs[key] = run
        if run.process:
            run.init_containers = {c["name"]: ContainerRun(c["name"], c.get("image", ""),
                                                           {"waiting": {"reason": "PodInitializing"}})
                                   for c in pod["spec"].get("initContainers") or []}
            refused = procrt.refusal(pod)
            if refused:       # kubelet.go rejectPod: Failed with the reason, and an Event
                run.phase, run.reason, run.message = "Failed", *refused
                self.recorder.record(pod, "Warning", refused[0], refused[1], host=node_name)
                self._write_status(run)
                return
        self._write_status(run)
        rec = self.recorder
        for c in pod["spec"].get("containers") or []:
            if self._pull_policy(c) == "IfNotPresent" and not run.script.waiting:
                continue
            rec.record(pod, "Normal", "Pulling", f'Pulling image "{c.get("image")}"', host=node_name,
                       field_path=f"spec.containers{{{c['name']}}}")
        self._later(run, 0 if run.process else self.cluster.timing.pod_start, self._start, run)
        deadline = pod["spec"].get("activeDeadlineSeconds")
        if deadline is not None:
            self._later(run, float(deadline), self._deadline, run)

    @staticmethod
    def _pull_policy(container: dict) -> str:
        return container.get("imagePullPolicy") or "IfNotPresent"

    def _pod(self, run: PodRun) -> dict | None:
        pod = self.cluster.cache.get(self.pods_rt, *run.key)
        if pod is None or pod["metadata"]["uid"] != run.uid or self.runs.get(run.key) is not run:
            return None
        return pod

    def _start(self, run: PodRun) -> None:
        pod = self._pod(run)
        if pod is None:
            return
        rec = self.recorder
        script = run.script
        volume, missing = self._missing_volume(pod)
        if missing:        # stays ContainerCreating, as the kubelet cannot mount the volume
            rec.record(pod, "Warning", "FailedMount", f'MountVolume.SetUp failed for volume "{volume}" : {missing}',
                       host=run.node)
            run.blocked = True
            return
        if run.process:
            self._in_background(self.procs.start_pod(run, pod))
            return
        for spec in pod["spec"].get("containers") or []:
            c = run.containers[spec["name"]]
            fp = f"spec.containers{{{c.name}}}"
            missing = self._missing_env_source(pod, spec)
            if missing:
                c.state = {"waiting": {"reason": "CreateContainerConfigError", "message": missing}}
                rec.record(pod, "Warning", "Failed", f"Error: {missing}", host=run.node, field_path=fp)
                run.blocked = True
                continue
            if c.attempt is not None:
                continue        # started before this retry
            if script.waiting:
                reason = script.reason
                if reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName"):
                    why = script.message or (f'rpc error: code = NotFound desc = failed to pull and unpack image '
                                             f'"{c.image}": failed to resolve reference "{c.image}": not found')
                    c.state = {"waiting": {"reason": reason, "message": why if reason == "ErrImagePull" else
                                           f'Back-off pulling image "{c.image}"'}}
                    rec.record(pod, "Warning", "Failed", f'Failed to pull image "{c.image}": {why}',
                               host=run.node, field_path=fp)
                    rec.record(pod, "Warning", "Failed", f"Error: {reason}", host=run.node, field_path=fp)
                    rec.record(pod, "Normal", "BackOff", f'Back-off pulling image "{c.image}"',
                               host=run.node, field_path=fp)
                else:
                    why = script.message or f'configmap "{c.name}-config" not found'
                    c.state = {"waiting": {"reason": reason, "message": why}}
                    rec.record(pod, "Warning", "Failed", f"Error: {why}", host=run.node, field_path=fp)
                continue
            if self._pull_policy(spec) == "IfNotPresent":
                rec.record(pod, "Normal", "Pulled", f'Container image "{c.image}" already present on machine',
                           host=run.node, field_path=fp)
            else:
                rec.record(pod, "Normal", "Pulled", f'Successfully pulled image "{c.image}" in 5ms (5ms '
                           f"including waiting). Image size: 1024 bytes.", host=run.node, field_path=fp)
            self._run_container(run, pod, c)
        if any(c.running for c in run.containers.values()):
            run.phase = "Running"
        self._write_status(run)

    def _exists(self, plural: str, namespace: str, name: str) -> bool:
        return self.cluster.cache.get(self.cluster.rt(plural), namespace, name) is not None

    def _missing_volume(self, pod: dict) -> tuple[str | None, str | None]:
        """The first volume whose ConfigMap/Secret/PVC does not exist: (volume, `configmap "x" not found`)."""
        ns = pod["metadata"]["namespace"]
        for v in pod["spec"].get("volumes") or []:
            for src, plural, key, what in (("configMap", "configmaps", "name", "configmap"),
                                           ("secret", "secrets", "secretName", "secret"),
                                           ("persistentVolumeClaim", "persistentvolumeclaims", "claimName",
                                            "persistentvolumeclaim")):
                ref = v.get(src)
                if isinstance(ref, dict) and ref.get(key) and not ref.get("optional") and \
                        not self._exists(plural, ns, ref[key]):
                    return v.get("name"), f'{what} "{ref[key]}" not found'
        return None, None

    def _missing_env_source(self, pod: dict, container: dict) -> str | None:
        """A ConfigMap/Secret an env var or envFrom refers to that does not exist (not optional)."""
        ns = pod["metadata"]["namespace"]
        refs = []
        for env in container.get("env") or []:
            src = env.get("valueFrom") or {}
            refs += [("configmaps", "configmap", src.get("configMapKeyRef")), ("secrets", "secret", src.get("secretKeyRef"))]
        for env in container.get("envFrom") or []:
            refs += [("configmaps", "configmap", env.get("configMapRef")), ("secrets", "secret", env.get("secretRef"))]
        for plural, what, ref in refs:
            if isinstance(ref, dict) and ref.get("name") and not ref.get("optional") and \
                    not self._exists(plural, ns, ref["name"]):
                return f'{what} "{ref["name"]}" not found'
        return None

    def _run_length(self, run: PodRun) -> float | None:
        if run.script.duration is not None:
            return run.script.duration
        if run.restart_policy == "Always":
            return None        # a server: runs until deleted
        return self.cluster.timing.container_run

    def _run_container(self, run: PodRun, pod: dict, c: ContainerRun) -> None:
        if run.process:
            spec = next(s for s in pod["spec"]["containers"] if s["name"] == c.name)
            self._in_background(self.procs.start_container(run, pod, c, spec))
            return
        rec = self.recorder
        fp = f"spec.containers{{{c.name}}}"
        rec.record(pod, "Normal", "Created", f"Created container {c.name}", host=run.node, field_path=fp)
        rec.record(pod, "Normal", "Started", f"Started container {c.name}", host=run.node, field_path=fp)
        now_dt, now_mono = self.store.clock.now(), self._mono()
        length = self._run_length(run)
        spread = length if length is not None else self.cluster.timing.container_run
        n = len(run.script.lines)
        lines = [(now_mono + spread * i / n, now_dt + timedelta(seconds=spread * i / n), text)
                 for i, text in enumerate(run.script.lines)] if n else []
        if c.attempt is not None:
            c.previous = c.attempt
        c.attempt = Attempt(f"containerd://{secrets.token_hex(32)}", now_dt, now_mono, lines)
        c.state = {"running": {"startedAt": self.store.clock.rfc3339(now_dt)}}
        if length is not None:
            self._later(run, length, self._exit, run, c.name)

    def _exit(self, run: PodRun, name: str, exit_code: int | None = None, reason: str | None = None,
              message: str | None = None) -> None:
        pod = self._pod(run)
        if pod is None:
            return
        c = run.containers[name]
        if not c.running:
            return
        script = run.script
        code = script.exit_code if exit_code is None else exit_code
        if reason is None:
            reason = script.reason if script.reason and not script.waiting else ("Completed" if code == 0 else "Error")
        now = self.store.clock.now()
        terminated = {"exitCode": code, "reason": reason, "startedAt": c.state["running"]["startedAt"],
                      "finishedAt": self.store.clock.rfc3339(now), "containerID": c.attempt.container_id}
        if message or (script.message and exit_code is None and not script.waiting):
            terminated["message"] = message or script.message
        c.attempt.finished_mono = self._mono()
        c.attempt.terminated = terminated
        c.attempt.changed.set()
        c.state = {"terminated": terminated}
        if run.phase in TERMINAL:
            self._write_status(run)
            return
        restart = not run.terminating and (run.restart_policy == "Always" or
                                           (run.restart_policy == "OnFailure" and code != 0))
        if restart:
            c.last_state = {"terminated": terminated}
            c.restart_count += 1
            backoff = min(self.cluster.timing.restart_backoff * (2 ** (c.restart_count - 1)),
                          self.cluster.timing.restart_backoff * 10)
            c.state = {"waiting": {"reason": "CrashLoopBackOff",
                                   "message": f"back-off {backoff:g}s restarting failed container={c.name} "
                                              f"pod={pod['metadata']['name']}_{run.key[0]}({run.uid})"}}
            self.recorder.record(
                pod, "Warning", "BackOff", f"Back-off restarting failed container {c.name} in pod "
                f"{pod['metadata']['name']}_{run.key[0]}({run.uid})", host=run.node,
                field_path=f"spec.containers{{{c.name}}}")
            self._later(run, backoff, self._restart, run, c.name)
        elif all("terminated" in x.state for x in run.containers.values()):
            failed = any(x.state["terminated"]["exitCode"] != 0 for x in run.containers.values())
            run.phase = "Failed" if failed else "Succeeded"
            run.cancel()
            if run.process:
                self.procs.release_later(run.uid)
        self._write_status(run)

    def _restart(self, run: PodRun, name: str) -> None:
        pod = self._pod(run)
        if pod is None or run.phase in TERMINAL:
            return
        self._run_container(run, pod, run.containers[name])
        self._write_status(run)

    def _deadline(self, run: PodRun) -> None:
        """activeDeadlineSeconds: the kubelet kills the pod and fails it with reason DeadlineExceeded."""
        pod = self._pod(run)
        if pod is None or run.phase in TERMINAL:
            return
        message = "Pod was active on the node longer than the specified deadline"
        run.phase, run.reason, run.message = "Failed", "DeadlineExceeded", message
        self.recorder.record(pod, "Normal", "DeadlineExceeded", message, host=run.node)
        if run.process:
            run.phase, run.terminating = "Running", True     # Failed once its containers are stopped
            self._in_background(self._stop_gracefully(run, pod, remove=False))
            return
        for c in run.containers.values():
            if c.running:
                self.recorder.record(pod, "Normal", "Killing", f"Stopping container {c.name}",
                                     host=run.node, field_path=f"spec.containers{{{c.name}}}")
                self._exit(run, c.name, exit_code=137, reason="Error")
            elif "waiting" in c.state:
                c.state = {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                          "message": "The container could not be located when the pod was "
                                                     "terminated", "startedAt": None, "finishedAt": None}}
        run.cancel()
        self._end_streams(run)
        self._write_status(run)

    def evict(self, run: PodRun, message: str) -> None:
        """The eviction manager evicts a pod (process pods over their ephemeral-storage limit: procrt/storage.py):
        killed with grace 0, Failed, reason Evicted, the manager's message and an `Evicted` Warning Event
        (pkg/kubelet/eviction/eviction_manager.go `evictPod`). No pod condition: upstream's local-storage limit
        evictions pass none (`podEphemeralStorageLimitEviction`: `evictPod(pod, 0, message, nil, nil)`); only a
        node-pressure eviction (`synchronize`) adds DisruptionTarget/TerminationByKubelet, and kubesim's nodes
        have no pressure."""
        pod = self._pod(run)
        if pod is None or run.phase in TERMINAL or run.terminating:
            return
        self.recorder.record(pod, "Warning", "Evicted", message, host=run.node)
        run.reason, run.message, run.terminating = "Evicted", message, True
        self._in_background(self._stop_gracefully(run, pod, remove=False, grace=0))

    async def _stop_gracefully(self, run: PodRun, pod: dict, remove: bool, grace: float | None = None) -> None:
        """killPod on a process pod: Killing Events, SIGTERM, the grace period, SIGKILL; then the terminal
        phase, and for a deleted pod the final DELETE with grace 0 (the status manager's, uid-preconditioned)."""
        for c in run.containers.values():
            if c.running:
                self.recorder.record(pod, "Normal", "Killing", f"Stopping container {c.name}", host=run.node,
                                     field_path=f"spec.containers{{{c.name}}}")
        await self.procs.stop_pod(run, procrt.grace_seconds(self._pod(run) or pod) if grace is None else grace)
        if self.runs.get(run.key) is not run:
            return
        codes = [c.state.get("terminated", {}).get("exitCode", 137) for c in run.containers.values()]
        run.phase = "Succeeded" if codes and all(code == 0 for code in codes) and not run.reason else "Failed"
        run.cancel()
        self.procs.release_later(run.uid)
        self._end_streams(run)
        self._write_status(run)
        if remove:
            try:
                self.store.delete(self.pods_rt, *run.key, grace_period_seconds=0,
                                  preconditions={"uid": run.uid})
            except ApiError as e:
                if e.code not in (404, 409):
                    raise

    # --- status ---------------------------------------------------------------------------------
    def _write_status(self, run: PodRun) -> None:
        try:
            pod = self.store.get(self.pods_rt, *run.key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        if pod["metadata"]["uid"] != run.uid:
            return
        pod["status"] = pod_status(pod, run, self.cluster.now())
        try:
            self.cluster.observe(self.pods_rt, self.store.update(self.pods_rt, *run.key, pod,
                                                                 subresource="status"))
        except ApiError as e:
            if e.code == 409:      # a concurrent writer: write again from the fresh object
                asyncio.get_running_loop().call_soon(self._write_status, run)
            elif e.code != 404:
                raise


