"""Skiff's settings: every ``[skiff]`` option, declared once with its type, default and meaning.

Airflow reads them as it reads a provider's: ``get_provider_info()`` (the package's ``apache_airflow_provider``
entry point, the way apache-airflow-providers-cncf-kubernetes delivers its ``provider.yaml``) returns them as the
``config`` section, so ``airflow config list --section skiff`` and ``airflow config get-value skiff <option>``
show them with their defaults (Airflow's ``ProvidersManager`` loads provider config defaults lazily, see
``airflow/_shared/configuration/parser.py``). A value comes from Airflow's own lookup: the environment
(``AIRFLOW__SKIFF__<OPTION>``), then ``airflow.cfg``'s ``[skiff]``, then the default declared here. No other
environment variable configures Skiff.

Importing this module reads nothing (DAG files import it while they are parsed); ``get`` and friends read at
call time, so a changed environment applies to the next call. An empty value counts as unset.
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.core.nodepools import DEFAULT_ONLINE_KEY, DEFAULT_ONLINE_VALUE

SECTION = "skiff"


@dataclass(frozen=True)
class Option:
    name: str
    type: str  # Airflow's option types: "string", "integer", "float", "boolean"
    default: str | None  # None: no default (the option must be set where it is needed)
    description: str
    example: str | None = None


OPTIONS: dict[str, Option] = {o.name: o for o in (
    # ---- Kubernetes and Airflow connections
    Option("kubernetes_conn_id", "string", "kubernetes_default",
           "The Airflow connection (cncf-kubernetes provider) Skiff reaches Kubernetes through, when a task "
           "names none: training Jobs and their trigger, Sedna reconcile, development instances, platform DAGs.",
           "prod_cluster"),
    Option("airflow_api_conn_id", "string", "skiff_airflow_api",
           "The HTTP connection (http://user:password@host:port) platform_sync uses to size the teams' Airflow "
           "pools through Airflow's REST API."),
    Option("airflow_api_url", "string", "",
           "The Airflow REST API Skiff's page triggers lifecycle runs through. Empty: the address the page's "
           "request came in on (set it when a proxy or TLS set-up hides that address).",
           "https://airflow.example.com"),
    Option("ui_base_url", "string", "",
           "The Airflow UI address failure e-mails link to. Empty: [api] base_url.",
           "https://airflow.example.com"),
    # ---- the platform file
    Option("platform_file", "string", None,
           "Path of the platform file (teams, quotas, members, volumes, images, node pools). No default: "
           "set it to the reviewed file (make demo and the tests use operators/platform/example.yaml).",
           "/opt/skiff/platform/platform.yaml"),
    Option("platform_poll_seconds", "float", "5",
           "How often the platform file's watch trigger hashes the file (seconds)."),
    Option("usage_file", "string", "{AIRFLOW_HOME}/skiff/usage.json",
           "Where the usage_report DAG writes the usage JSON the page reads."),
    Option("online_pool_key", "string", DEFAULT_ONLINE_KEY,
           "Label key (and taint key) of the online node pool, unless the platform file's node_pools says."),
    Option("online_pool_value", "string", DEFAULT_ONLINE_VALUE,
           "Label value of the online node pool, unless the platform file's node_pools says."),
    # ---- training
    Option("defer_resume_guard_seconds", "float", "10",
           "A deferred training task holds a result that arrives sooner than this after deferring (Airflow 3.3 "
           "can fail a try whose deferral resumes within seconds)."),
    Option("usage_interval_seconds", "float", "15",
           "How often a training step's follower reads its pods' usage from the metrics API (metrics.k8s.io) for "
           "the summary at the step's end and the peak on its Job (skiff.io/usage-peak, the page's training row) "
           "(one request per step per interval; 0: neither)."),
    Option("usage_advice_share", "float", "0.25",
           "A step whose peak memory (or mean CPU) stayed under this share of its limit (request) gets one "
           "advice line at its end."),
    Option("training_grace_seconds", "integer", "60",
           "Seconds a training step's process has between SIGTERM (preemption, deletion, timeout) and SIGKILL to "
           "save a checkpoint (the pod's terminationGracePeriodSeconds), unless the operator's "
           "termination_grace_period says; Kubernetes' own default is 30."),
    # ---- Sedna reconcile
    Option("sedna_namespaces", "string", "",
           "Comma-separated namespaces whose Sedna CRs are watched and reconciled. Empty: all.", "default,team-a"),
    Option("sedna_resync_cron", "string", "*/5 * * * *",
           "Cron schedule of the Sedna reconcile DAGs' resync (besides the watch events)."),
    Option("sedna_lc_server", "string", "http://localhost:9100",
           "The Sedna LocalController URL given to workers (Sedna's default)."),
    Option("sedna_concurrency", "integer", "16", "How many Sedna CRs one reconcile run acts on at once."),
    # ---- development instances
    Option("devinstance_tcp_services", "string", "kube-system/tcp-services",
           "ingress-nginx's tcp-services ConfigMap, as namespace/name."),
    Option("devinstance_port_range", "string", "20000-29999", "External ports Skiff may hand out, as low-high."),
    Option("devinstance_host", "string", "localhost",
           "The host name users connect to (ingress-nginx's address).", "dev.example.com"),
    Option("devinstance_timezone", "string", "UTC",
           "The time zone of development instances (TZ, an IANA zone name). It replaces the node's "
           "/etc/localtime, a hostPath volume Pod Security's baseline level forbids.", "Asia/Shanghai"),
    Option("devinstance_max_per_owner", "integer", "3", "Development instances per user, stopped ones included."),
    Option("devinstance_idle_hours", "float", "8",
           "The culler stops instances idle for longer than this many hours."),
    Option("devinstance_usage_idle_hours", "float", "0",
           "Besides JupyterLab's own idleness, the culler also stops a running instance whose CPU (the metrics API's "
           "reading at each culler pass) stayed under devinstance_usage_idle_cpu for this many hours; an instance "
           "holding a GPU is left running (the metrics API reads no GPU). 0: off."),
    Option("devinstance_usage_idle_cpu", "float", "0.01",
           "CPU cores under which an instance counts as idle by usage (devinstance_usage_idle_hours)."),
    Option("devinstance_cull_cron", "string", "*/15 * * * *", "Cron schedule of the dev_instance_cull DAG."),
    Option("devinstance_admins", "string", "",
           "Comma-separated users who may act on others' instances, besides the simple auth manager's admins "
           "(a CLI `airflow dags trigger` runs as the OS user: list it here to let it pass owner).", "ops,root"),
    # ---- metrics (operators/exporter: Skiff's Prometheus endpoint in the api-server)
    Option("metrics_token", "string", "",
           "Bearer token Prometheus sends to Skiff's endpoint (/skiff-metrics/metrics); set it from a Kubernetes "
           "Secret (AIRFLOW__SKIFF__METRICS_TOKEN). Empty: only an Airflow admin's login may read the endpoint."),
    Option("prometheus_url", "string", "",
           "Prometheus' address (e.g. http://prometheus.monitoring:9090) for the usage report's GPU efficiency: "
           "GPU-hours held (skiff_pod_requests) and used (dcgm-exporter's DCGM_FI_DEV_GPU_UTIL) by every pod of "
           "Skiff's (training steps, instances, Sedna workers), joined with skiff_pod_info. Empty: the report says "
           "held and used GPU-hours are not known.", "http://prometheus.monitoring:9090"),
    Option("metrics_cache_seconds", "float", "15",
           "Skiff's endpoint re-reads the cluster (7 list requests, 9 with Kueue) at most this often; scrapes in between are "
           "answered from its cache."),
)}


def env_var(name: str) -> str:
    """The environment variable Airflow reads for option ``name``: ``AIRFLOW__SKIFF__<NAME>``."""
    return f"AIRFLOW__{SECTION.upper()}__{OPTIONS[name].name.upper()}"


def default(name: str) -> str | None:
    """The declared default of ``name`` (KeyError for an undeclared option: a typo fails loudly)."""
    return OPTIONS[name].default


def get(name: str) -> str | None:
    """The configured value of ``name``, else its default; None only for an option without one."""
    from airflow.configuration import AIRFLOW_HOME, conf

    fallback = default(name)
    if fallback is not None:  # the same expansion Airflow applies to declared defaults
        fallback = fallback.format(AIRFLOW_HOME=AIRFLOW_HOME)
    # fallback too: a checkout that is not installed has no entry point, so Airflow does not know the default
    return conf.get(SECTION, name, fallback=None) or fallback


def get_int(name: str) -> int:
    return int(_number(name, int))


def get_float(name: str) -> float:
    return float(_number(name, float))


def _number(name: str, kind: type) -> int | float:
    text = get(name)
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise ValueError(f"[{SECTION}] {name}={str(text)[:80]!r}: must be a{'n integer' if kind is int else ' number'}"
                         ) from None


def get_list(name: str) -> list[str]:
    """A comma-separated option as a list, blanks dropped."""
    return [part.strip() for part in (get(name) or "").split(",") if part.strip()]


def provider_config() -> dict:
    """The ``config`` section of provider info (Airflow's ``provider_info.schema.json`` ``option`` shape)."""
    return {SECTION: {
        "description": "Skiff: training Jobs, development instances, Sedna reconcile and the platform file.",
        "options": {o.name: {"description": o.description, "version_added": None, "type": o.type,
                             "example": o.example, "default": o.default} for o in OPTIONS.values()},
    }}


def markdown_table() -> str:
    """The settings table of docs/reference.md (``python -m operators.settings`` prints it; a test compares)."""
    rows = ["| option | type | default | meaning |", "| --- | --- | --- | --- |"]
    for o in OPTIONS.values():
        shown = "none: must be set" if o.default is None else f"`{o.default}`" if o.default else "empty"
        rows.append(f"| `{o.name}` | {o.type} | {shown.replace('{AIRFLOW_HOME}', '$AIRFLOW_HOME')} | "
                    f"{o.description.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"


def get_provider_info() -> dict:
    """Entry point ``apache_airflow_provider``: what ``ProvidersManager`` validates and loads."""
    return {"package-name": "skiff", "name": "Skiff",
            "description": "Skiff: an ML platform for algorithm teams on Apache Airflow and Kubernetes.",
            "config": provider_config()}


if __name__ == "__main__":
    print(markdown_table(), end="")
