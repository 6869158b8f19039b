"""Skiff's Prometheus endpoint: ``GET <api-server>/skiff-metrics/metrics``, the cluster-state gauges.

Where: a FastAPI app the Skiff plugin registers in Airflow's api-server (its own ``fastapi_apps`` entry,
beside the page's). The api-server already runs everywhere Skiff does, replicated, as the ``skiff``
ServiceAccount with the list rights these reads need, and its Service is what Prometheus can reach; a new
Deployment would add nothing but an image to run. Each replica answers from its own cache; the values are the
cluster's, so any replica's answer is the same.

Who: a plugin app gets no Airflow auth by default, so every request must carry either
``Authorization: Bearer <[skiff] metrics_token>`` (compared in constant time; set from a Kubernetes Secret
through Airflow's environment override: what Prometheus' ``authorization.credentials_file`` sends) or
an Airflow admin's login (Airflow's own ``get_user``: 401 anonymous, 403 a bad token; 403 any other user,
who would see every team's figures). No token configured: Airflow admins only.

Cost: a scrape reads the cache; when the cache is older than ``[skiff] metrics_cache_seconds`` (15 s) the
scrape that notices refreshes it first with five cluster-wide lists (quotas, training Jobs, instance
StatefulSets, the two Sedna CR kinds, Skiff's pods for ``skiff_pod_info``; with ``queueing: kueue`` two more:
Skiff's ClusterQueues and the Workloads), one request each whatever the number of teams, Jobs and pods: at
most 7 (9) requests per scrape, 0 for scrapes within the cache age, and one refresh at a time (concurrent scrapes wait
for it). A failed refresh keeps serving the last good state and counts the error.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections.abc import Callable

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import Response

from operators import settings
from operators.exporter.cluster import Sample, gauges
from operators.metrics import catalogue as c

TRAINING_SELECTOR = "app.kubernetes.io/managed-by=skiff,app.kubernetes.io/name=skiff-training"
# Skiff's pods: training steps, instances and Sedna's federated-learning workers carry managed-by; a
# joint-inference worker (its Deployment's template keeps the user's labels and Sedna's) does not: see
# POD_SELECTORS' second entry
POD_SELECTORS = ("app.kubernetes.io/managed-by=skiff", "jointinferenceservice.sedna.io/name")




def read_cluster(kube) -> list[Sample]:
    """The lists (``kube``: an ``operators.k8s.Kube``) and their gauges. Sedna not installed (its CRDs
    answer 404): no Sedna samples."""
    from operators.devinstances.naming import all_selector
    from operators.k8s import KubeError
    from operators.k8s.resource import JOBS, PODS, RESOURCEQUOTAS, STATEFULSETS
    from operators.platform.model import QUOTA_NAME
    from operators.sedna.desired import FL_KIND, JI_KIND
    from operators.sedna.kube import FL_JOBS, JI_SERVICES

    quotas = kube.list(RESOURCEQUOTAS, None, field_selector=f"metadata.name={QUOTA_NAME}")
    jobs = kube.list(JOBS, None, label_selector=TRAINING_SELECTOR)
    instances = kube.list(STATEFULSETS, None, label_selector=all_selector())
    crs: dict[str, list[dict]] = {}
    for kind, res in ((FL_KIND, FL_JOBS), (JI_KIND, JI_SERVICES)):
        try:
            crs[kind] = kube.list(res, None)
        except KubeError as exc:
            if exc.status != 404:
                raise
    pods = {p["metadata"].get("uid") or id(p): p for sel in POD_SELECTORS
            for p in kube.list(PODS, None, label_selector=sel)}
    gpu_resource, queueing, owners = _platform_facts()
    kueue = read_kueue(kube, gpu_resource) if queueing == "kueue" else []
    return gauges(quotas, jobs, instances, crs, gpu_resource, kueue, list(pods.values()), owners)


def read_kueue(kube, gpu_resource: str) -> list[Sample]:
    """With ``queueing: kueue``: two more lists (Skiff's ClusterQueues, every Workload); Kueue not installed
    (404): none."""
    from operators.exporter.cluster import kueue_samples
    from operators.k8s import KubeError
    from operators.k8s.resource import CLUSTERQUEUES, WORKLOADS

    try:
        cqs = kube.list(CLUSTERQUEUES, None, label_selector="app.kubernetes.io/managed-by=skiff")
        workloads = kube.list(WORKLOADS, None)
    except KubeError as exc:
        if exc.status != 404:
            raise
        return []
    return kueue_samples(cqs, workloads, gpu_resource)


def _platform_facts() -> tuple[str, str, dict[str, str]]:
    """The platform file's GPU resource name (``node_pools.gpu.resource``), ``queueing`` and its users' home
    claims (claim -> user: whose step or instance a pod is); without a platform file ``nvidia.com/gpu``, quotas
    and no users (an instance's user is then its owner label)."""
    from operators.core.nodepools import GPU_RESOURCE

    try:
        from operators.platform import load_platform

        platform = load_platform()
        owners = {platform.home_pvc(u): u for u in platform.users()}
        return platform.node_pools.gpu_resource, platform.queueing, owners
    except Exception:  # noqa: BLE001 - no platform file: the defaults
        return GPU_RESOURCE, "quota", {}


class ClusterCache:
    """The last cluster read, refreshed by the scrape that finds it older than ``max_age`` seconds."""

    def __init__(self, read: Callable[[], list[Sample]], max_age: float, clock=time.monotonic) -> None:
        self.read, self.max_age, self.clock = read, max_age, clock
        self.samples: list[Sample] = []
        self.read_at: float | None = None  # clock time of the last good read
        self.last_refresh_unix = 0.0
        self.refresh_seconds = 0.0
        self.errors = 0
        self._attempt_at: float | None = None
        self._lock = threading.Lock()

    def get(self) -> list[Sample]:
        with self._lock:
            now = self.clock()
            if self._attempt_at is None or now - self._attempt_at >= self.max_age:
                self._attempt_at = now  # a failing cluster is retried once per max_age, not once per scrape
                started = time.monotonic()
                try:
                    self.samples = self.read()
                    self.read_at, self.last_refresh_unix = now, time.time()
                except Exception:  # noqa: BLE001 - counted, the last good state is served
                    self.errors += 1
                self.refresh_seconds = time.monotonic() - started
            return self.samples


def exposition(samples: list[Sample], cache: ClusterCache, cluster_requests: int) -> bytes:
    """Prometheus text format (prometheus_client's writer), HELP and TYPE from the catalogue."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    families: dict[str, object] = {}
    by_metric: dict[c.Metric, list[Sample]] = {}
    for s in samples:
        by_metric.setdefault(s.metric, []).append(s)
    for metric, group in by_metric.items():
        fam = families[metric.prom] = GaugeMetricFamily(metric.prom, metric.help, labels=list(metric.labels))
        for s in group:
            fam.add_metric([v for _, v in s.labels], s.value)
    own = ((c.EXPORTER_LAST_REFRESH, cache.last_refresh_unix), (c.EXPORTER_REFRESH_SECONDS, cache.refresh_seconds))
    for metric, value in own:
        families[metric.prom] = GaugeMetricFamily(metric.prom, metric.help, value=value)
    for metric, value in ((c.EXPORTER_REFRESH_ERRORS, cache.errors), (c.EXPORTER_REQUESTS, cluster_requests)):
        families[metric.prom] = CounterMetricFamily(metric.prom, metric.help, value=value)

    class _Collector:
        def collect(self):
            return list(families.values())

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector())
    return generate_latest(registry)


def token_matches(header: str, token: str) -> bool:
    scheme, _, given = header.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def authorize(request: Request) -> None:
    """The scrape token, or an Airflow admin's login: the gauges are every team's quota, usage, training and
    instances, while the page shows each user only their teams, so any other login is refused (403), a viewer
    in no team included (issue 30, class 6)."""
    if token_matches(request.headers.get("authorization", ""), settings.get("metrics_token") or ""):
        return
    from operators.auth import current_user

    caller = await current_user(request)  # Airflow's login, else 401 / 403
    if not caller.admin:
        raise HTTPException(403, "the metrics endpoint shows every team's figures: send the scrape token "
                                 "([skiff] metrics_token) or log in as an Airflow admin")


def create_app() -> FastAPI:
    app = FastAPI(title="Skiff metrics", docs_url=None, redoc_url=None, openapi_url=None)
    state: dict = {}
    state_lock = threading.Lock()

    def scrape() -> bytes:
        with state_lock:
            if "cache" not in state:  # first scrape: the connection exists by now (not at plugin load)
                from operators.k8s import Kube, api_client, conn_id
                from operators.k8s.retry import INTERACTIVE

                state["kube"] = Kube(api_client(conn_id()), policy=INTERACTIVE)  # its own: its requests counted
                state["cache"] = ClusterCache(lambda: read_cluster(state["kube"]), settings.get_float("metrics_cache_seconds"))
        cache = state["cache"]
        samples = cache.get()
        return exposition(samples, cache, sum(state["kube"].requests.values()))

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        await authorize(request)
        try:
            body = await asyncio.to_thread(scrape)  # blocking reads off the api-server's loop
        except Exception as exc:  # noqa: BLE001 - no connection at all: say so, Prometheus marks the target down
            raise HTTPException(503, f"cannot read the cluster: {type(exc).__name__}: {str(exc)[:200]}") from None
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})

    return app
