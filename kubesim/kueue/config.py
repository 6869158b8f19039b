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
"""
from __future__ import annotations

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
