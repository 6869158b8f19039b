"""`Cluster`: kubesim's controller-manager, scheduler and kubelets, wired onto a `Store`.

Like the real components, everything here is an API client of the store: it reads what the store notifies
(an informer-like cache fed by `store.subscribe`) and writes through the store's public verbs, so watches
see every change. All work runs on the one asyncio loop, in event-driven work queues (no polling loops).

Admission order on a write: validation.Validator (defaulting, schema, semantic checks, CR pruning) ->
serviceaccount_admission.ServiceAccountAdmission (a missing ServiceAccount is refused; pods get its imagePullSecrets)
-> quota_admission.LimitRanger -> podsecurity.PodSecurityAdmission (the namespace's Pod Security Standards level)
-> quota_admission.QuotaAdmission. Components: scheduler.KubeScheduler, kubelet.Kubelet (+ logs),
gc.GarbageCollector, resourcequota.QuotaController, serviceaccounts.ServiceAccountController, workloads.* (Job, Deployment, ReplicaSet, StatefulSet, PVC
binder, Endpoints, HPA), bootstrap.KubernetesService (the API server's `kubernetes` Service), heartbeats.NodeHeartbeats (node Leases
and heartbeats).

What it does not simulate (differences from a real cluster): on scripted nodes (the default) no containers
run (outcomes are scripted by `kubesim.io/*` annotations) and a deleted pod goes at once (with finalizers its
containers are killed with exit 137); process nodes (`runtime: process`) really run pods (kubesim/kubelet/procrt) and
delete them gracefully and run their probes; no probes on scripted nodes (a running container is ready); no metrics server (HPAs
only keep their target within bounds); no preemption, pod/node affinity between pods, topology spread,
DaemonSets, CronJobs, PersistentVolumes or storage classes (a PVC is Bound at once with the capacity it
asks for); a failed Job pod is replaced at once (no 10 s exponential back-off); nodes never fail or get
NoExecute-evicted; ControllerRevisions are not created.
"""
from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterable

from kubesim import kueue
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.admission import podsecurity, validation
from kubesim.apiserver.admission import resourcequota as quota_admission
from kubesim.apiserver.admission import serviceaccount as serviceaccount_admission
from kubesim.controllers import bootstrap, gc, resourcequota, scheduler, serviceaccounts, workloads
from kubesim.controllers.framework import Cache, Controller, Timing  # noqa: F401  (kubesim.cluster.Controller, .Timing still work)
from kubesim.kubelet import heartbeats, kubelet
from kubesim.kubelet.nodes import load_nodes_file, node_manifests
from kubesim.kubelet.procrt.pods import is_process_node
from kubesim.kubeproxy.services import LoopbackServices

log = logging.getLogger("kubesim.cluster")


class Cluster:
    """Controllers, scheduler and kubelets of a simulated cluster on `store`.

    `nodes`: Node manifests or compact node specs (see `kubesim.kubelet.nodes`), or the path of a `--nodes FILE`;
    default: `nodes.DEFAULT_NODES`.
    """

    def __init__(self, store, *, nodes: Iterable[dict] | str | os.PathLike | None = None,
                 timing: Timing | None = None):
        self.store = store
        self.timing = timing or Timing()
        if isinstance(nodes, (str, os.PathLike)):
            nodes = load_nodes_file(os.fspath(nodes))
        # build the manifests now: a bad nodes file fails here, before anything is served
        self._nodes = node_manifests(list(nodes) if nodes is not None else None)
        self.cache = Cache()
        self.controllers: list = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._subscribed = False
        self._started = False
        self._stopped = False

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        if not self._started:
            admission, self.controllers = components(self)
            self.store.admission.extend(admission)
            self.store.kubelet = self.kubelet    # the API server's KubeletClient (apiserver/kubeletclient.py)
            from kubesim.kubelet.stats import UsageSampler
            self.usage = UsageSampler(self.kubelet, self.timing.metric_resolution)
            self.controllers.append(self.usage)
            self.kubelet.stats = self.usage     # the metrics API and the kubelet's /metrics (KubeletClient.stats)
            self._started = True
        for c in self.controllers:
            c.start()
        if not self._subscribed:
            self.store.subscribe(self._notify)
            self._subscribed = True
        self._resync()
        self._create_nodes(self._nodes)

    def _create_nodes(self, manifests: list[dict]) -> None:
        rt = self.store.registry.lookup("", "v1", "nodes")
        now = self.now()
        for node in manifests:
            for c in (node.get("status") or {}).get("conditions") or []:   # the kubelet's first status report
                c.setdefault("lastHeartbeatTime", now)
                c.setdefault("lastTransitionTime", now)
            try:
                self.store.create(rt, None, node)
            except ApiError as e:
                if e.code != 409:
                    raise

    def _resync(self) -> None:
        """Feed the cache and the controllers what the store already holds (e.g. after `store.clear()`)."""
        for rt in self.store.registry.all():
            try:
                objs, _ = self.store.list(rt)
            except ApiError:
                continue
            for obj in objs:
                self._dispatch("ADDED", rt, obj, None)

    def _notify(self, event_type: str, rt, obj: dict, old: dict | None) -> None:
        # Called under the store lock on the writer's thread: only hand the event to the loop.
        loop = self.loop
        if loop is None or loop.is_closed() or self._stopped:
            return
        if threading.get_ident() == self._loop_thread:
            loop.call_soon(self._dispatch, event_type, rt, obj, old)
        else:
            loop.call_soon_threadsafe(self._dispatch, event_type, rt, obj, old)

    def _dispatch(self, event_type: str, rt, obj: dict, old: dict | None) -> None:
        if self._stopped:
            return
        self.cache.observe(rt, obj, deleted=event_type == "DELETED")
        for c in self.controllers:
            try:
                c.on_event(event_type, rt, obj, old)
            except Exception:
                log.exception("%s: error handling %s %s", type(c).__name__, event_type, rt.plural)

    async def stop(self) -> None:
        self._stopped = True
        for c in self.controllers:
            await c.stop()

    # helpers for the components
    def rt(self, plural: str, group: str = "", version: str = "v1"):
        return self.store.registry.lookup(group, version, plural)

    def observe(self, rt, obj: dict) -> dict:
        """Record the result of our own write, so the next reconcile sees it before its notification."""
        self.cache.observe(rt, obj)
        return obj

    def now(self) -> str:
        return self.store.clock.rfc3339(self.store.clock.now())


def components(cluster: Cluster) -> tuple[list, list]:
    """The admission plugins (in order) and the controllers of a cluster: the one place a new component
    is registered. An admission plugin is `plugin(AdmissionRequest)` (mutate `req.obj` or raise ApiError);
    a controller is a `kubesim.controllers.framework.Controller` (`on_event` enqueues keys, `reconcile(key)` acts)."""
    cluster.validator = validation.Validator(cluster.store)
    cluster.quota = quota_admission.QuotaAdmission(cluster.store)
    cluster.kubelet = kubelet.Kubelet(cluster)
    # the real order: mutating LimitRanger after validation/defaulting, then the validating PodSecurity,
    # ResourceQuota last
    # Kueue's mutating webhooks (inert until its CRDs are installed) before validation, as webhooks run
    admission = [*kueue.admission(cluster), cluster.validator, serviceaccount_admission.ServiceAccountAdmission(cluster.store),
                 quota_admission.LimitRanger(cluster.store),
                 podsecurity.PodSecurityAdmission(cluster.store), cluster.quota]
    controllers = [scheduler.KubeScheduler(cluster), cluster.kubelet, gc.GarbageCollector(cluster),
                   resourcequota.QuotaController(cluster), serviceaccounts.ServiceAccountController(cluster),
                   *workloads.controllers(cluster), *kueue.controllers(cluster),
                   bootstrap.KubernetesService(cluster), heartbeats.NodeHeartbeats(cluster)]
    if any(is_process_node(n) for n in getattr(cluster, "_nodes", [])):    # Services on the host's loopback
        controllers.append(LoopbackServices(cluster, cluster.kubelet))
    return admission, controllers
