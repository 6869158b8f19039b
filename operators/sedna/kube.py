"""The thin I/O layer of the Sedna reconcile: raw JSON requests through a ``kubernetes.client.ApiClient``.

Objects stay plain dicts end to end: the reconcile compares labels and builds manifests as dicts, and
deserialising thousands of pods into ``kubernetes`` model objects would cost more than the whole pass.
Every request is counted by (verb, resource) so the benchmark and the summary can report them.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException


@dataclass(frozen=True)
class Resource:
    group_version: str  # "v1", "apps/v1", "sedna.io/v1alpha1"
    plural: str

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None) -> str:
        base = "/api/v1" if self.group_version == "v1" else f"/apis/{self.group_version}"
        path = base + (f"/namespaces/{namespace}" if namespace else "") + f"/{self.plural}"
        if name:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path


PODS = Resource("v1", "pods")
SERVICES = Resource("v1", "services")
EVENTS = Resource("v1", "events")
SECRETS = Resource("v1", "secrets")  # read (GET) for credentialName: key names and endpoint only
DEPLOYMENTS = Resource("apps/v1", "deployments")
HPAS = Resource("autoscaling/v2", "horizontalpodautoscalers")
FL_JOBS = Resource("sedna.io/v1alpha1", "federatedlearningjobs")
JI_SERVICES = Resource("sedna.io/v1alpha1", "jointinferenceservices")
MODELS = Resource("sedna.io/v1alpha1", "models")
DATASETS = Resource("sedna.io/v1alpha1", "datasets")
BY_KIND = {"Pod": PODS, "Service": SERVICES, "Deployment": DEPLOYMENTS, "HorizontalPodAutoscaler": HPAS}

MERGE_PATCH = "application/merge-patch+json"


class Kube:
    """JSON-in, JSON-out access to the API server; raises ``ApiException`` (``.status``) on errors."""

    def __init__(self, api: ApiClient):
        self.api = api
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()

    def request(self, method: str, path: str, *, query: list | None = None, body: object = None,
                content_type: str = "application/json") -> dict | None:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        resp = self.api.call_api(
            path, method, query_params=query or [], header_params=headers, body=body,
            auth_settings=["BearerToken"], _preload_content=False, _return_http_data_only=True,
        )
        data = resp.data
        return json.loads(data) if data else None

    def _count(self, verb: str, res: Resource) -> None:
        with self._lock:
            self.requests[f"{verb} {res.plural}"] += 1

    def list(self, res: Resource, namespace: str | None = None, label_selector: str | None = None) -> list[dict]:
        self._count("list", res)
        query = [("labelSelector", label_selector)] if label_selector else []
        return self.request("GET", res.path(namespace), query=query)["items"]

    def get(self, res: Resource, namespace: str, name: str) -> dict | None:
        self._count("get", res)
        try:
            return self.request("GET", res.path(namespace, name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def create(self, res: Resource, namespace: str, body: dict) -> dict | None:
        """The created object, or None if one with that name already exists (409: someone else did it)."""
        self._count("create", res)
        try:
            return self.request("POST", res.path(namespace), body=body)
        except ApiException as e:
            if e.status == 409:
                return None
            raise

    def replace(self, res: Resource, namespace: str, name: str, body: dict) -> dict:
        self._count("update", res)
        return self.request("PUT", res.path(namespace, name), body=body)

    def merge_patch(self, res: Resource, namespace: str, name: str, body: dict, sub: str | None = None) -> dict:
        self._count("patch" + (f"/{sub}" if sub else ""), res)
        return self.request("PATCH", res.path(namespace, name, sub), body=body, content_type=MERGE_PATCH)

    def delete(self, res: Resource, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete (only that incarnation if ``uid`` is given); False if it was already gone."""
        self._count("delete", res)
        body: dict = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            self.request("DELETE", res.path(namespace, name), body=body)
            return True
        except ApiException as e:
            if e.status in (404, 409):  # gone, or a newer incarnation we must not delete
                return False
            raise
