"""Kueue's manager Configuration (config.kueue.x-k8s.io/v1beta2): which workloads without a queue name
Kueue takes over.

The Helm chart keeps it in the ConfigMap `kueue-system/kueue-manager-config`, key
`controller_manager_config.yaml` (`managerConfig.controllerManagerConfigYaml`); kubesim reads the same object,
live (the real manager reads it when it starts: there a change needs `kubectl rollout restart`). Two fields are
simulated, as apis/config/v1beta2 documents them and pkg/controller/jobframework/defaults.go
`WorkloadShouldBeSuspended` applies them:
- `manageJobsWithoutQueueName` (default false): a Job without the `kueue.x-k8s.io/queue-name` label is
  Kueue's too - suspended when created, given a Workload whose queue name is empty, which no LocalQueue
  serves, so it is never admitted ("LocalQueue  doesn't exist"; pkg/controller/core/workload_controller.go);
  a bare pod (no controller) is gated (`kueue.x-k8s.io/admission`) by the pod integration, never scheduled;
- `managedJobsNamespaceSelector` (default: every namespace but kube-system and kueue-system, by
  `kubernetes.io/metadata.name`): only there.
A missing ConfigMap or an unreadable document is the default Configuration (nothing taken over).

`waitForPodsReady` (`wait_for_pods_ready`) is read as apis/config/v1beta2/defaults.go (v0.19) defaults it: present
whether or not the document has it (v0.19 enables it by default, CHANGELOG-0.19 #11855) unless the feature gate
`DisableWaitForPodsReady` is on (`featureGates: {DisableWaitForPodsReady: true}`;
pkg/util/waitforpodsready `Enabled`); `timeout` 30m when absent or zero, `recoveryTimeout` = `timeout` when
absent ("0s" turns it off), `blockAdmission` false, `requeuingStrategy.timestamp` Eviction,
`backoffBaseSeconds` 60, `backoffMaxSeconds` 3600, `backoffLimitCount` none (requeued forever).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.selectors import label_selector_from_dict

NAMESPACE, NAME, KEY = "kueue-system", "kueue-manager-config", "controller_manager_config.yaml"
DEFAULT_SELECTOR = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                          "values": ["kube-system", "kueue-system"]}]}


def manager_config(store) -> dict:
    """The Configuration document, {} when there is none."""
    try:
        cm = store.get(store.registry.lookup("", "v1", "configmaps"), NAMESPACE, NAME)
    except ApiError:
        return {}
    try:
        doc = yaml.safe_load((cm.get("data") or {}).get(KEY) or "")
    except yaml.YAMLError:
        return {}
    return doc if isinstance(doc, dict) else {}


def manages_without_queue_name(store, namespace: str) -> bool:
    """Kueue takes over a workload without a queue name in `namespace`."""
    cfg = manager_config(store)
    if not cfg.get("manageJobsWithoutQueueName"):
        return False
    try:
        ns = store.get(store.registry.lookup("", "v1", "namespaces"), None, namespace)
    except ApiError:
        return False
    labels = {**(ns["metadata"].get("labels") or {}), "kubernetes.io/metadata.name": namespace}
    return label_selector_from_dict(cfg.get("managedJobsNamespaceSelector") or DEFAULT_SELECTOR).matches(labels)


# apis/config/v1beta2/defaults.go
DEFAULT_PODS_READY_TIMEOUT = 30 * 60.0
DEFAULT_BACKOFF_BASE_SECONDS = 60
DEFAULT_BACKOFF_MAX_SECONDS = 3600
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text) -> float | None:
    """A metav1.Duration ("30m", "1m30s", "500ms", "0s") in seconds; None when it is not one."""
    if not isinstance(text, str) or not text:
        return None
    if text == "0":
        return 0.0
    at, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != at:
            return None
        total += float(m.group(1)) * _UNIT[m.group(2)]
        at = m.end()
    return total if at == len(text) else None


@dataclass(frozen=True)
class PodsReady:
    """Configuration.waitForPodsReady after defaulting (seconds)."""
    timeout: float = DEFAULT_PODS_READY_TIMEOUT
    recovery_timeout: float | None = DEFAULT_PODS_READY_TIMEOUT     # None: recovery not timed ("0s")
    block_admission: bool = False
    timestamp: str = "Eviction"                                      # or Creation: the queue order after a timeout
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_max_seconds: int = DEFAULT_BACKOFF_MAX_SECONDS


def wait_for_pods_ready(store) -> PodsReady | None:
    """waitForPodsReady as Kueue v0.19 runs with the cluster's Configuration (`pods_ready_of`)."""
    return pods_ready_of(manager_config(store))


def pods_ready_of(cfg: dict) -> PodsReady | None:
    """waitForPodsReady of a Configuration document, defaulted; None when the feature gate disables it. A field of
    the wrong shape is its default (the real manager would refuse to start: kubesim keeps going)."""
    if (cfg.get("featureGates") or {}).get("DisableWaitForPodsReady") is True:
        return None
    w = cfg.get("waitForPodsReady")
    w = w if isinstance(w, dict) else {}
    timeout = go_duration(w.get("timeout")) or DEFAULT_PODS_READY_TIMEOUT
    recovery = go_duration(w.get("recoveryTimeout"))
    strategy = w.get("requeuingStrategy") if isinstance(w.get("requeuingStrategy"), dict) else {}

    def whole(name: str, default):
        v = strategy.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else default
    return PodsReady(
        timeout=timeout, recovery_timeout=timeout if recovery is None else (recovery or None),
        block_admission=w.get("blockAdmission") is True,
        timestamp="Creation" if strategy.get("timestamp") == "Creation" else "Eviction",
        backoff_limit_count=whole("backoffLimitCount", None),
        backoff_base_seconds=whole("backoffBaseSeconds", DEFAULT_BACKOFF_BASE_SECONDS) or DEFAULT_BACKOFF_BASE_SECONDS,
        backoff_max_seconds=whole("backoffMaxSeconds", DEFAULT_BACKOFF_MAX_SECONDS) or DEFAULT_BACKOFF_MAX_SECONDS)
