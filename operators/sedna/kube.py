"""The Sedna reconcile's resources. Requests go through the access layer's plain-JSON ``Kube``
(``operators.k8s.rest``): objects stay dicts end to end, every request is counted by (verb, resource) so the
benchmark and the summary can report them, and errors are ``KubeError``. ``Kube`` resolves lazily (PEP 562) so
that the trigger's module, imported when a DAG file is parsed, loads no Kubernetes client.
"""

from __future__ import annotations

from operators.k8s.resource import DEPLOYMENTS, EVENTS, HPAS, PODS, SERVICES, Resource

SECRETS = Resource("v1", "secrets")  # read (GET) for credentialName: key names and endpoint only
FL_JOBS = Resource("sedna.io/v1alpha1", "federatedlearningjobs")
JI_SERVICES = Resource("sedna.io/v1alpha1", "jointinferenceservices")
MODELS = Resource("sedna.io/v1alpha1", "models")
DATASETS = Resource("sedna.io/v1alpha1", "datasets")
BY_KIND = {"Pod": PODS, "Service": SERVICES, "Deployment": DEPLOYMENTS, "HorizontalPodAutoscaler": HPAS}

__all__ = ["BY_KIND", "DATASETS", "DEPLOYMENTS", "EVENTS", "FL_JOBS", "HPAS", "JI_SERVICES", "MODELS", "PODS",
           "SECRETS", "SERVICES", "Resource"]  # and Kube, below


def __getattr__(name: str):
    if name == "Kube":
        from operators.k8s.rest import Kube

        return Kube
    raise AttributeError(f"module 'operators.sedna.kube' has no attribute {name!r}")
