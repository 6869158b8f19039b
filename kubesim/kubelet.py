"""The kubelets: run bound pods on the cluster clock, report schema-complete status, serve logs, emit Events.

A bound pod goes Pending (ContainerCreating) -> Running after `Timing.pod_start` -> its containers exit
after `kubesim.io/duration` (default `Timing.container_run`) with the scripted outcome (INTERNALS.md).
Pods with `restartPolicy: Always` and no scripted duration run until deleted (like a server). On exit:
`Never` -> Succeeded/Failed; `OnFailure` (non-zero exit) and `Always` -> the container restarts after a
CrashLoopBackOff wait (restartCount+1, lastState.terminated). Deleting a pod removes it at once (no
graceful termination: the store has no grace period); its log streams end.
"""
from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kubesim.clock import rfc3339nano
from kubesim.controller import Controller, ControllerContext, EventRecorder, Key, key_of
from kubesim.errors import ApiError
from kubesim.qos import qos_class

ANN = "kubesim.io/"
WAITING_REASONS = ("ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError", "InvalidImageName",
                   "CreateContainerError")
TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Script:
    """A pod's scripted outcome, from its `kubesim.io/*` annotations."""
    duration: float | None
    exit_code: int
    reason: str | None
    lines: tuple[str, ...]
    message: str | None

    @classmethod
    def of(cls, pod: dict) -> Script:
        """Read the annotations (validation.check_script_annotations has refused bad values)."""
        ann = pod["metadata"].get("annotations") or {}
        duration = float(ann[ANN + "duration"]) if ann.get(ANN + "duration") not in (None, "") else None
        reason = ann.get(ANN + "reason") or None
        if reason == "OOMKilled":
            default_exit = 137
        elif reason and reason != "Completed" and reason not in WAITING_REASONS:
            default_exit = 1      # a terminated reason such as Error implies a failure
        else:
            default_exit = 0
        exit_code = int(ann.get(ANN + "exit-code") or default_exit)
        if ann.get(ANN + "logs") is not None:
            lines = tuple(ann[ANN + "logs"].splitlines())
        elif ann.get(ANN + "log-lines"):
            lines = tuple(f"line {i}" for i in range(1, int(ann[ANN + "log-lines"]) + 1))
        else:
            lines = ()
        return cls(duration, exit_code, reason, lines, ann.get(ANN + "message"))

    @property
    def waiting(self) -> bool:
        return self.reason in WAITING_REASONS


def image_id(image: str) -> str:
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


@dataclass
class Attempt:
    """One run of one container: its log lines on the loop clock (due time, wall time, text)."""
    container_id: str
    started: datetime
    started_mono: float
    lines: list[tuple[float, datetime, str]]
    finished_mono: float | None = None
    terminated: dict | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def written(self, now_mono: float) -> list[tuple[float, datetime, str]]:
        if self.finished_mono is not None:
            return self.lines
        return [ln for ln in self.lines if ln[0] <= now_mono]


@dataclass
class ContainerRun:
    name: str
    image: str
    state: dict
    restart_count: int = 0
    last_state: dict = field(default_factory=dict)
    attempt: Attempt | None = None
    previous: Attempt | None = None

    @property
    def running(self) -> bool:
        return "running" in self.state


@dataclass
class PodRun:
    key: Key
    uid: str
    node: str
    script: Script
    restart_policy: str
    containers: dict[str, ContainerRun]
    pod_ip: str
    host_ip: str
    start_time: str
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    timers: list[asyncio.TimerHandle] = field(default_factory=list)
    backoff: float = 0.0
    blocked: bool = False      # waiting for a ConfigMap/Secret/PVC it references to exist

    def cancel(self) -> None:
        for t in self.timers:
            t.cancel()
        self.timers.clear()


class Kubelet(Controller):
    """All nodes' kubelets in one: a pod bound to a node is run by that node's kubelet."""

    name = "kubelet"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.pods_rt = cluster.rt("pods")
        self.nodes_rt = cluster.rt("nodes")
        self.runs: dict[Key, PodRun] = {}
        self.recorder = EventRecorder(self.store, "kubelet")
        self._ip = 0
        self.logs = LogProvider(self)

    def reset(self) -> None:
        for run in self.runs.values():
            self._end_streams(run)
            run.cancel()
        self.runs.clear()

    async def stop(self) -> None:
        self.reset()
        await super().stop()

    # --- events ---------------------------------------------------------------------------------
    def on_event(self, event_type, rt, obj, old):
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
        self.runs[key] = run
        self._write_status(run)
        rec = self.recorder
        for c in pod["spec"].get("containers") or []:
            if self._pull_policy(c) == "IfNotPresent" and not run.script.waiting:
                continue
            rec.record(pod, "Normal", "Pulling", f'Pulling image "{c.get("image")}"', host=node_name,
                       field_path=f"spec.containers{{{c['name']}}}")
        self._later(run, self.cluster.timing.pod_start, self._start, run)
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
        restart = run.restart_policy == "Always" or (run.restart_policy == "OnFailure" and code != 0)
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


def _condition(old: list[dict], type_: str, status: str, now: str, reason: str | None = None,
               message: str | None = None) -> dict:
    prev = next((c for c in old if c.get("type") == type_), None)
    since = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get(
        "lastTransitionTime") else now
    cond = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": since}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def pod_status(pod: dict, run: PodRun, now: str) -> dict:
    """The pod's status as its kubelet reports it (a pure function of the pod and its run)."""
    old = (pod.get("status") or {}).get("conditions") or []
    statuses = []
    for spec in pod["spec"].get("containers") or []:
        c = run.containers.get(spec["name"])
        if c is None:
            continue
        attempt = c.attempt
        cs = {"name": c.name, "image": c.image, "imageID": image_id(c.image) if attempt else "",
              "ready": c.running and run.phase == "Running", "started": c.running,
              "restartCount": c.restart_count, "state": c.state, "lastState": c.last_state}
        if attempt is not None:
            cs["containerID"] = attempt.container_id
        statuses.append(cs)
    not_ready = [s["name"] for s in statuses if not s["ready"]]
    ready = "False" if not_ready or run.phase != "Running" else "True"
    if run.phase in TERMINAL:
        why = ("PodCompleted", None) if run.phase == "Succeeded" else ("PodFailed", None)
    elif not_ready:
        why = ("ContainersNotReady", f"containers with unready status: [{' '.join(not_ready)}]")
    else:
        why = (None, None)
    scheduled = next((c for c in old if c.get("type") == "PodScheduled"), None) or _condition(
        old, "PodScheduled", "True", now)
    conditions = [
        _condition(old, "PodReadyToStartContainers", "True" if run.phase != "Pending" or any(
            s["imageID"] for s in statuses) else "False", now),
        _condition(old, "Initialized", "True", now),
        _condition(old, "Ready", ready, now, *why),
        _condition(old, "ContainersReady", ready, now, *why),
        scheduled,
    ]
    status = {"phase": run.phase, "conditions": conditions, "hostIP": run.host_ip,
              "hostIPs": [{"ip": run.host_ip}], "podIP": run.pod_ip, "podIPs": [{"ip": run.pod_ip}],
              "startTime": run.start_time, "qosClass": qos_class(pod["spec"]), "containerStatuses": statuses}
    if run.reason:
        status["reason"] = run.reason
        status["message"] = run.message
    if pod["spec"].get("initContainers"):
        status["initContainerStatuses"] = [
            {"name": c["name"], "image": c.get("image", ""), "imageID": image_id(c.get("image", "")),
             "containerID": f"containerd://{hashlib.sha256((run.uid + c['name']).encode()).hexdigest()}",
             "ready": True, "started": False, "restartCount": 0, "lastState": {},
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": run.start_time,
                                      "finishedAt": run.start_time}}}
            for c in pod["spec"]["initContainers"]]
    return status


class LogProvider:
    """Container logs as the kubelet serves them (INTERNALS.md `LogProvider`)."""

    def __init__(self, kubelet: Kubelet):
        self.kubelet = kubelet

    def _attempt(self, namespace: str, pod: str, container: str | None, previous: bool) -> Attempt:
        kubelet = self.kubelet
        obj = kubelet.store.get(kubelet.pods_rt, namespace, pod)     # 404 like the API server
        names = [c["name"] for c in obj["spec"].get("containers") or []]
        if container is None:
            if len(names) != 1:
                raise ApiError(400, f"a container name must be specified for pod {pod}, choose one of: "
                                    f"[{' '.join(names)}]", "BadRequest")
            container = names[0]
        if container not in names:
            raise ApiError(400, f"container {container} is not valid for pod {pod}", "BadRequest")
        run = kubelet.runs.get((namespace, pod))
        c = run.containers.get(container) if run is not None and run.uid == obj["metadata"]["uid"] else None
        if previous:
            if c is None or c.previous is None:
                raise ApiError(400, f'previous terminated container "{container}" in pod "{pod}" not found',
                               "BadRequest")
            return c.previous
        if c is None or c.attempt is None:
            reason = "ContainerCreating"
            if c is not None and "waiting" in c.state:
                reason = c.state["waiting"].get("reason", reason)
            raise ApiError(400, f'container "{container}" in pod "{pod}" is waiting to start: {reason}',
                           "BadRequest")
        return c.attempt

    @staticmethod
    def _format(lines, timestamps: bool) -> str:
        if timestamps:
            return "".join(f"{rfc3339nano(ts)} {text}\n" for _due, ts, text in lines)
        return "".join(f"{text}\n" for _due, _ts, text in lines)

    def snapshot(self, namespace, pod, container=None, *, tail_lines=None, timestamps=False,
                 previous=False) -> str:
        attempt = self._attempt(namespace, pod, container, previous)
        lines = attempt.written(asyncio.get_running_loop().time() if _in_loop() else float("inf"))
        if tail_lines is not None:
            lines = lines[-int(tail_lines):] if int(tail_lines) > 0 else []
        return self._format(lines, timestamps)

    async def stream(self, namespace, pod, container=None, *, tail_lines=None,
                     timestamps=False) -> AsyncIterator[bytes]:
        attempt = self._attempt(namespace, pod, container, False)
        loop = asyncio.get_running_loop()
        written = attempt.written(loop.time())
        start = max(0, len(written) - int(tail_lines)) if tail_lines is not None else 0
        sent = start
        while True:
            written = attempt.written(loop.time())
            if len(written) > sent:
                yield self._format(written[sent:], timestamps).encode()
                sent = len(written)
            if attempt.finished_mono is not None and sent >= len(attempt.lines):
                return
            nxt = attempt.lines[sent][0] - loop.time() if sent < len(attempt.lines) else None
            attempt.changed.clear()
            try:
                await asyncio.wait_for(attempt.changed.wait(), timeout=nxt if nxt is not None else None)
            except TimeoutError:
                pass


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False
