"""Follow one training Job to its end by WATCHING it (async; used by the trigger and by sync mode).

``follow_job(api_client, namespace, name, settings, log)`` returns a JSON-able result dict::

    {"status": "success" | "failed", "namespace", "name", "uid", "reason", "kind", "log_tail": [...],
     "noticed_at": unix time the end was seen}

A handful of long-lived requests instead of a poll every N seconds: the Job and its pods come from the
process's shared informers (the triggerer: one Job and one pod watch per namespace, label
``skiff.io/job-name``) or, without them, from two ``list_and_watch`` of its own (fieldSelector
metadata.name / label ``skiff.io/job-name=<job>``); plus a followed log stream per
pod once its container starts, so every pod the Job creates shows up in the task log while it runs (the last
``log_tail_lines`` lines are kept for the alert). What to do is decided by ``waiting.decide`` (pure) on every
change and on a local 1-second tick (no I/O); this module only performs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections import deque
from collections.abc import Callable

import aiohttp

from operators.k8s.errors import KubeError
from operators.k8s.resource import EVENTS, JOBS, LOCALQUEUES, PODS, WORKLOADS
from operators.k8s.rest import MERGE_PATCH, AsyncKube, lines
from operators.k8s.retry import RETRY, classify
from operators.k8s.watch import WatchEvent, list_and_watch
from operators.platform.kueue import not_served
from operators.training import checkpoint, failure, queued
from operators.training.failure import pod_name
from operators.training.metrics import job_times
from operators.training.naming import LABEL_JOB
from operators.training.queued import JOB_UID_LABEL
from operators.training.usage import UsageWatch
from operators.training.waiting import FollowSettings, Outcome, Seen, Timers, decide, started

__all__ = ["FollowSettings", "follow_job"]

CONTAINER = "train"             # the training container (k8s_templates/training/job.yaml.j2)
OLD_CONTAINERS = ("jupyter-job",)  # its name before issue 29: a Job made then and still running is followed too


def container_name(pod: dict) -> str:
    """The pod's training container, read from the pod (a Job created under the old name keeps it)."""
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    return next((n for n in (CONTAINER, *OLD_CONTAINERS) if n in names), names[0] if names else CONTAINER)
# a queued Job's follower whose Workload watch finds Kueue's API gone (uninstalled while the step waited)
KUEUE_GONE = "the step's suspended Job is deleted (no queue would ever start it)"
LOG_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=30, sock_connect=30, sock_read=None)


class _Observed:
    """The Job and pods as the watches report them; ``changed`` wakes the decision loop."""

    def __init__(self, name: str, uid: str | None) -> None:
        self.name, self.uid = name, uid
        self.job: dict | None = None
        self.pods: dict[str, dict] = {}
        self.events: list[dict] = []
        self.workload: dict | None = None       # Kueue: the Job's Workload
        self.queues: dict[str, dict] = {}       # Kueue: the namespace's LocalQueues by name
        self.changed = asyncio.Event()

    def set_job(self, obj: dict | None, deleted: bool = False) -> None:
        obj = obj or {"metadata": {"name": self.name}}
        replaced = self.uid is not None and obj.get("metadata", {}).get("uid") not in (None, self.uid)
        self.job = {"deleted": True, **obj} if deleted or replaced else obj
        self.changed.set()

    def set_pod(self, obj: dict, deleted: bool = False) -> None:
        if deleted:
            self.pods.pop(obj["metadata"]["name"], None)
        else:
            self.pods[obj["metadata"]["name"]] = obj
        self.changed.set()

    def set_workload(self, obj: dict, deleted: bool = False) -> None:
        if deleted:
            if self.workload and self.workload["metadata"]["name"] == obj["metadata"]["name"]:
                self.workload = None
        else:
            self.workload = obj
        self.changed.set()

    def set_queue(self, obj: dict, deleted: bool = False) -> None:
        if deleted:
            self.queues.pop(obj["metadata"]["name"], None)
        else:
            self.queues[obj["metadata"]["name"]] = obj
        self.changed.set()

    def owns(self, workload: dict) -> bool:
        """Kueue's Workload of this Job: its controller owner reference names the Job (and its uid, if known)."""
        return any(r.get("kind") == "Job" and r.get("name") == self.name and self.uid in (None, r.get("uid"))
                   for r in workload["metadata"].get("ownerReferences") or [])

    def seen(self) -> Seen:
        queue = self.queues.get(queued.queue_name(self.job) or "") if self.job else None
        return Seen(self.job, tuple(self.pods.values()), tuple(self.events), self.workload, queue)


def _on_job(obs: _Observed) -> Callable[[WatchEvent], None]:
    def handle(ev: WatchEvent) -> None:
        if ev.type == "SYNC":  # a listing: the Job is in it, or gone
            obs.set_job(ev.items[0] if ev.items else None, deleted=not ev.items)
        else:
            obs.set_job(ev.object, deleted=ev.type == "DELETED")
    return handle


def _on_pod(obs: _Observed, started_pod: Callable[[dict], None]) -> Callable[[WatchEvent], None]:
    def handle(ev: WatchEvent) -> None:
        if ev.type == "SYNC":
            obs.pods.clear()
            obs.changed.set()
        for pod in ev.items if ev.type == "SYNC" else [ev.object]:
            obs.set_pod(pod, deleted=ev.type == "DELETED")
            started_pod(pod)
    return handle


def _on_each(setter: Callable[..., None]) -> Callable[[WatchEvent], None]:
    """A handler that hands every listed or changed object to ``setter`` (Kueue's Workload, LocalQueues)."""
    def handle(ev: WatchEvent) -> None:
        for obj in ev.items if ev.type == "SYNC" else [ev.object]:
            setter(obj, deleted=ev.type == "DELETED")
    return handle


async def _own_watch(kube: AsyncKube, res, namespace: str, handler: Callable[[WatchEvent], None], **selector) -> None:
    async for ev in list_and_watch(kube, res, namespace, **selector):
        handler(ev)


async def _observe(stack: contextlib.AsyncExitStack, kube: AsyncKube, namespace: str, obs: _Observed,
                   started_pod: Callable[[dict], None], informers, kueue: bool) -> list[Callable[[], None]]:
    """Start feeding ``obs``: the shared informers' Job and pod watches of the namespace if given, else two
    watches of its own; with ``kueue`` also the Job's Workload and the namespace's LocalQueues. Returns the
    checks that raise if a watch gave up. The handlers only record (they run in the informer's task)."""
    on_job, on_pod = _on_job(obs), _on_pod(obs, started_pod)
    on_workload, on_queue = _on_each(obs.set_workload), _on_each(obs.set_queue)
    if informers is not None:
        selector = LABEL_JOB  # every Skiff training Job and pod carries it: one watch each per namespace
        subs = [informers.subscribe(JOBS, namespace, selector, lambda o: o["metadata"]["name"] == obs.name, on_job),
                informers.subscribe(PODS, namespace, selector,
                                    lambda o: (o["metadata"].get("labels") or {}).get(LABEL_JOB) == obs.name, on_pod)]
        if kueue:  # every Job's Workload carries Kueue's job-uid label: one Workload watch per namespace
            subs += [informers.subscribe(WORKLOADS, namespace, JOB_UID_LABEL, obs.owns, on_workload),
                     informers.subscribe(LOCALQUEUES, namespace, None, lambda o: True, on_queue)]
        return [(await stack.enter_async_context(sub)).check for sub in subs]
    tasks = [asyncio.create_task(_own_watch(kube, JOBS, namespace, on_job, field_selector=f"metadata.name={obs.name}")),
             asyncio.create_task(_own_watch(kube, PODS, namespace, on_pod, label_selector=f"{LABEL_JOB}={obs.name}"))]
    if kueue:
        selector = f"{JOB_UID_LABEL}={obs.uid}" if obs.uid else JOB_UID_LABEL
        tasks += [asyncio.create_task(_own_watch(kube, WORKLOADS, namespace, _on_each(
                      lambda o, deleted=False: obs.owns(o) and obs.set_workload(o, deleted)), label_selector=selector)),
                  asyncio.create_task(_own_watch(kube, LOCALQUEUES, namespace, on_queue))]

    async def stop() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    stack.push_async_callback(stop)
    return [lambda t=t: t.result() if t.done() else None for t in tasks]


def log_prefix(pod: dict) -> str:
    """``[<pod>]``, or ``[rank <r> <pod>]`` for a gang's pod (its completion index)."""
    rank = failure.rank_of(pod)
    return f"[{pod['metadata']['name']}]" if rank is None else f"[rank {rank} {pod['metadata']['name']}]"


class _PodLines:
    """What reached the task log of each pod's container: lines said, and whether its stream read to the end;
    each pod's prefix (its rank in a gang) and its own last lines (a gang's failed rank's go into the alert)."""

    def __init__(self, tail: deque, log: Callable[[str], None], own_lines: int) -> None:
        self.tail, self.log, self.own_lines = tail, log, own_lines
        self.said: dict[str, int] = {}
        self.whole: set[str] = set()
        self.prefixes: dict[str, str] = {}
        self.own: dict[str, deque] = {}

    def know(self, pod: dict) -> None:
        name = pod["metadata"]["name"]
        self.prefixes.setdefault(name, log_prefix(pod))
        self.own.setdefault(name, deque(maxlen=self.own_lines))

    def prefix(self, pod: str) -> str:
        return self.prefixes.get(pod, f"[{pod}]")

    def say(self, pod: str, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace")
        self.tail.append(line)
        if pod in self.own:
            self.own[pod].append(line)
        self.log(f"{self.prefix(pod)} {line}")
        self.said[pod] = self.said.get(pod, 0) + 1


async def _stream_logs(kube: AsyncKube, namespace: str, pod: str, out: _PodLines, container: str = CONTAINER,
                       follow: bool = True) -> None:
    """The container's log into the task log: followed while it runs, or (``follow=False``) read once, each
    line after those already said for the pod."""
    query = [("container", container), ("follow", "true")] if follow else [("container", container)]
    log = out.log
    prefix = out.prefix(pod)
    for attempt in range(3):
        try:
            resp = await kube.open("GET", PODS.path(namespace, pod, "log"), query=query, timeout=LOG_TIMEOUT)
            try:
                skip = 0 if follow else out.said.get(pod, 0)
                async for raw in lines(resp):
                    if skip:
                        skip -= 1
                        continue
                    out.say(pod, raw)
            finally:
                resp.release()
            out.whole.add(pod)
            return
        except KubeError as exc:
            if exc.status == 400 and attempt < 2 and follow:  # container not started yet (race with the pod watch)
                await asyncio.sleep(1)
                continue
            log(f"{prefix} (logs unavailable: {exc})")
            return
        except (aiohttp.ClientError, OSError) as exc:  # OSError includes TimeoutError
            log(f"{prefix} (log stream interrupted: {exc!r})")
            return


def _missed(obs: _Observed, out: _PodLines) -> bool:
    """Some pod's log may not have reached the task log whole: a started pod seen but not streamed to its end,
    or fewer pods streamed whole than the Job counts as ended (a pod the watch never showed started). Only
    then are the pods listed: a healthy follower costs no request more than its watches."""
    status = (obs.job or {}).get("status") or {}
    ended = (status.get("succeeded") or 0) + (status.get("failed") or 0)
    return len(out.whole) < ended or any(started(p) and n not in out.whole for n, p in obs.pods.items())


async def _read_missed_logs(kube: AsyncKube, namespace: str, name: str, out: _PodLines) -> None:
    """The lines of every pod of the Job whose log was not streamed to its end (issue 37 item 8). The Job's
    watch and the pods' are two streams: a step that prints two lines and exits at once can be seen Complete
    before its pod is ever seen started, and then no stream ran and the task log and the e-mail had none of its
    lines; a stream slow to open (a busy API server) was cut at the end the same way. So once the end is seen
    the Job's pods are listed afresh and each one not streamed whole has its log read once, from the first line
    not yet said."""
    try:
        pods = await kube.list(PODS, namespace, label_selector=f"{LABEL_JOB}={name}")
    except KubeError as exc:
        out.log(f"(could not list the Job's pods to read their logs: {exc})")
        return
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp") or ""):
        if pod["metadata"]["name"] not in out.whole and started(pod):
            out.know(pod)
            await _stream_logs(kube, namespace, pod["metadata"]["name"], out, container_name(pod), follow=False)


async def _job_events(kube: AsyncKube, namespace: str, name: str) -> list[dict]:
    items = await kube.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


async def explain_failure(kube: AsyncKube, namespace: str, name: str, job: dict, seen_pods: list[dict]) -> str:
    """Why the failed Job failed, the same however late the watch started (issue 29 item 4): the cause is a pod's
    (OOMKilled, exit code), not the Job's ``BackoffLimitExceeded``. A follower that subscribed after the Job
    failed can see the Job before its pods (two watches, or a shared pod cache filled later), so when the pods
    it saw explain nothing they are listed now; a pod already gone is said as such, with what the Job and the
    events still know (``failure.failure_reason``)."""
    pods = seen_pods
    if not any(failure.terminated_reason(p) for p in pods):
        try:
            listed = await kube.list(PODS, namespace, label_selector=f"{LABEL_JOB}={name}")
        except KubeError as exc:
            if classify(exc.status) != RETRY:
                raise
            listed = []
        pods = listed or pods
    return failure.failure_reason(job, pods, await _job_events(kube, namespace, name))


async def _annotate_template(kube: AsyncKube, namespace: str, name: str, annotations: dict[str, str],
                             log: Callable[[str], None]) -> None:
    """Write the preemption count on a suspended Job's pod template (``checkpoint.py``), for its next pod."""
    body = {"spec": {"template": {"metadata": {"annotations": annotations}}}}
    try:
        await kube.request("PATCH", JOBS.path(namespace, name), body=body, content_type=MERGE_PATCH)
    except KubeError as exc:  # started again already (422), gone: its pod keeps the previous count
        log(f"Could not record the preemption on Job {namespace}/{name}'s pod template ({exc}): its next pod "
            f"may start with the previous {checkpoint.ENV_PREEMPTIONS}")


async def follow_job(api_client, namespace: str, name: str, settings: FollowSettings,
                     log: Callable[[str], None], uid: str | None = None, informers=None) -> dict:
    """``informers``: an ``operators.k8s.informer.Informers`` to share the Job and pod watches with other
    followers in the process (the triggerer); None opens two watches of its own (a worker, sync mode)."""
    kube = AsyncKube(api_client)
    obs = _Observed(name, uid)
    tail: deque[str] = deque(maxlen=settings.log_tail_lines)
    streams: dict[str, asyncio.Task] = {}
    # started_pod runs inside the shared informer's task, whose context is that of the trigger that started the
    # informer; the triggerer routes a log line to a trigger's file by contextvars (structlog's trigger_id), so a
    # stream created there would write into ANOTHER task's log. Streams run in this follower's context instead.
    own_context = contextvars.copy_context()

    out = _PodLines(tail, log, settings.log_tail_lines)
    ended = False  # once the end is seen no stream starts: a pod not streamed whole by then is read once instead

    def started_pod(pod: dict) -> None:  # one log stream per pod, from when its container starts
        pod_name = pod["metadata"]["name"]
        if not ended and pod_name not in streams and pod_name in obs.pods and started(pod):
            out.know(pod)
            streams[pod_name] = own_context.run(
                asyncio.create_task, _stream_logs(kube, namespace, pod_name, out, container_name(pod)))

    async with contextlib.AsyncExitStack() as stack:
        try:
            checks = await _observe(stack, kube, namespace, obs, started_pod, informers, settings.queued)
            watch = UsageWatch(kube, namespace, f"{LABEL_JOB}={name}", CONTAINER, settings.usage_interval, job=name)
            if settings.usage_interval > 0:
                watch.start()
                stack.push_async_callback(watch.stop)
            outcome = await _wait(kube, namespace, name, obs, settings, checks, log)
            noticed_at = time.time()
            ended = True
            if streams:  # let the log streams deliver the last lines (they end with the container)
                await asyncio.wait(list(streams.values()), timeout=5)
                for task in streams.values():
                    task.cancel()
                await asyncio.gather(*streams.values(), return_exceptions=True)
            if _missed(obs, out):
                await _read_missed_logs(kube, namespace, name, out)
            reason = outcome.reason
            if outcome.status == "failed" and reason is None:
                reason = await explain_failure(kube, namespace, name, obs.job or {}, list(obs.pods.values()))
            usage = []
            if settings.usage_interval > 0:
                unrecorded = await watch.finish(obs.pods.values())   # the final peak, on the Job for the page
                usage = watch.lines(obs.pods.values(), container_name, settings.usage_advice_share)
                for line in usage:
                    log(line)
                if unrecorded:
                    log(f"Could not record the usage peak on Job {namespace}/{name} for Skiff's page: {unrecorded}")
            log_tail = list(tail)
            culprit = failure.culprit(obs.job or {}, obs.pods.values()) if outcome.status == "failed" else None
            if culprit is not None and failure.rank_of(culprit) is not None and out.own.get(pod_name(culprit)):
                log_tail = [f"{log_prefix(culprit)} {line}" for line in out.own[pod_name(culprit)]]
            return {"status": outcome.status, "namespace": namespace, "name": name,
                    "uid": ((obs.job or {}).get("metadata") or {}).get("uid"), "reason": reason,
                    "kind": outcome.kind, "log_tail": log_tail, "noticed_at": noticed_at,
                    "preemptions": list(outcome.preemptions), "usage": usage,
                    "times": job_times(obs.job, obs.pods.values())}
        finally:
            for task in streams.values():
                task.cancel()
            await asyncio.gather(*streams.values(), return_exceptions=True)


async def _wait(kube: AsyncKube, namespace: str, name: str, obs: _Observed, settings: FollowSettings,
                checks: list[Callable[[], None]], log: Callable[[str], None]) -> Outcome:
    """Decide on every change and every second; read what the decision asks for, then decide again. Runs in
    the follower's own task, so what it says goes to this task's log."""
    loop = asyncio.get_running_loop()
    timers = Timers(start=loop.time())
    while True:
        decision, timers = decide(obs.seen(), timers, loop.time(), settings, f"{namespace}/{name}")
        if isinstance(decision, Outcome):
            return decision
        for line in decision.say:
            log(line)
        if decision.annotate:
            await _annotate_template(kube, namespace, name, decision.annotate, log)
            continue
        if decision.list_events or decision.read_job:
            try:
                if decision.list_events:
                    obs.events = await _job_events(kube, namespace, name)
                else:
                    job = await kube.get(JOBS, namespace, name)
                    obs.set_job(job, deleted=job is None)
            except KubeError as exc:
                if classify(exc.status) != RETRY:
                    raise
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(obs.changed.wait(), timeout=1.0)
        obs.changed.clear()
        for check in checks:
            try:
                check()  # a watch that gave up raises here
            except KubeError as exc:
                if exc.status == 404 and settings.queued:   # Kueue's kinds no longer served: nothing will admit it
                    return Outcome("failed", not_served("Workload", KUEUE_GONE), "queue")
                raise
