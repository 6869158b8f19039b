"""Kueue objects for kubesim's Kueue tests, created through the real `kubernetes` client, as a user would."""
from __future__ import annotations

import kubernetes

from kubesim.testing import wait_until

G, V = "kueue.x-k8s.io", "v1beta2"
QUEUE, PRIORITY = "kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class"


class Kueue:
    def __init__(self, api_client):
        self.co = kubernetes.client.CustomObjectsApi(api_client)
        self.batch = kubernetes.client.BatchV1Api(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)

    def flavor(self, name, node_labels=None, node_taints=None, tolerations=None):
        spec = {}
        if node_labels:
            spec["nodeLabels"] = node_labels
        if node_taints:
            spec["nodeTaints"] = node_taints
        if tolerations:
            spec["tolerations"] = tolerations
        return self.co.create_cluster_custom_object(G, V, "resourceflavors", {
            "apiVersion": f"{G}/{V}", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec})

    def cluster_queue(self, name, flavors, cohort=None, preemption=None, covered=("cpu",), **spec_extra):
        """flavors: [(flavor name, {resource: nominal | {nominalQuota, borrowingLimit, lendingLimit}})]."""
        spec = {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": list(covered), "flavors": [
            {"name": f, "resources": [{"name": r, **(q if isinstance(q, dict) else {"nominalQuota": q})}
                                      for r, q in res.items()]} for f, res in flavors]}], **spec_extra}
        if cohort:
            spec["cohortName"] = cohort
        if preemption:
            spec["preemption"] = preemption
        return self.co.create_cluster_custom_object(G, V, "clusterqueues", {
            "apiVersion": f"{G}/{V}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec})

    def local_queue(self, namespace, name, cluster_queue):
        return self.co.create_namespaced_custom_object(G, V, namespace, "localqueues", {
            "apiVersion": f"{G}/{V}", "kind": "LocalQueue", "metadata": {"name": name},
            "spec": {"clusterQueue": cluster_queue}})

    def priority_class(self, name, value):
        return self.co.create_cluster_custom_object(G, V, "workloadpriorityclasses", {
            "apiVersion": f"{G}/{V}", "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value})

    def namespace(self, name):
        self.core.create_namespace({"metadata": {"name": name}})

    def job(self, namespace, name, queue, cpu="1", duration="600", priority=None, gpu=None, tolerations=None,
            exit_code=0, backoff_limit=None):
        labels = {QUEUE: queue}
        if priority:
            labels[PRIORITY] = priority
        requests = {"cpu": str(cpu)}
        if gpu:
            requests["nvidia.com/gpu"] = str(gpu)
        pod = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                                                           "resources": {"requests": requests, "limits": requests}}]}
        if tolerations:
            pod["tolerations"] = tolerations
        spec = {"template": {"metadata": {"annotations": {"kubesim.io/duration": str(duration),
                                                          "kubesim.io/exit-code": str(exit_code)}}, "spec": pod}}
        if backoff_limit is not None:
            spec["backoffLimit"] = backoff_limit
        return self.batch.create_namespaced_job(namespace, {
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels}, "spec": spec})

    # --- reads ---
    def workload_of(self, namespace, job_name):
        job = self.batch.read_namespaced_job(job_name, namespace)
        items = self.co.list_namespaced_custom_object(
            G, V, namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job.metadata.uid}")["items"]
        return items[0] if items else None

    def condition(self, namespace, job_name, type_):
        wl = self.workload_of(namespace, job_name)
        return next((c for c in ((wl or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), None)

    def admitted(self, namespace, job_name) -> bool:
        c = self.condition(namespace, job_name, "Admitted")
        return bool(c and c["status"] == "True")

    def running(self, namespace, job_name) -> bool:
        job = self.batch.read_namespaced_job(job_name, namespace)
        return not job.spec.suspend and bool(job.status.active)

    def suspended(self, namespace, job_name) -> bool:
        return bool(self.batch.read_namespaced_job(job_name, namespace).spec.suspend)

    def pending_message(self, namespace, job_name) -> str:
        c = self.condition(namespace, job_name, "QuotaReserved")
        return c["message"] if c and c["status"] == "False" else ""

    def wait_running(self, namespace, *names, timeout=10):
        for n in names:
            wait_until(lambda n=n: self.running(namespace, n), timeout, what=f"job {n} running")

    def wait_pending(self, namespace, name, timeout=10) -> str:
        return wait_until(lambda: self.pending_message(namespace, name), timeout, what=f"job {name} pending")

    def cluster_queue_usage(self, name, flavor, resource):
        st = self.co.get_cluster_custom_object(G, V, "clusterqueues", name).get("status") or {}
        for f in st.get("flavorsReservation") or []:
            if f["name"] == flavor:
                for r in f["resources"]:
                    if r["name"] == resource:
                        return r["total"], r["borrowed"]
        return None


def statefulset(kq, namespace, name, queue, cpu="1", replicas=1, priority=None):
    labels = {QUEUE: queue}
    if priority:
        labels[PRIORITY] = priority
    requests = {"cpu": str(cpu)}
    return kubernetes.client.AppsV1Api(kq.co.api_client).create_namespaced_stateful_set(namespace, {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "main", "image": "busybox",
                                                       "resources": {"requests": requests, "limits": requests}}]}}}})


def sts_pod(kq, namespace, name):
    pods = kq.core.list_namespaced_pod(namespace, label_selector=f"app={name}").items
    return pods[0] if pods else None


def sts_workload(kq, namespace, name):
    sts = kubernetes.client.AppsV1Api(kq.co.api_client).read_namespaced_stateful_set(name, namespace)
    items = kq.co.list_namespaced_custom_object(
        G, V, namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={sts.metadata.uid}")["items"]
    return items[0] if items else None
