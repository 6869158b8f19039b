"""kubesim: a simulated Kubernetes API server and cluster for Skiff's tests and local demo.

`KubeSim` runs it in-process; `python -m kubesim` runs it as a process. See INTERNALS.md.
"""
from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.registry.kinds import Registry, ResourceType
from kubesim.apiserver.registry.store import AdmissionRequest, Clock, Store
from kubesim.server import KubeSim, write_kubeconfig

__all__ = ["AdmissionRequest", "ApiError", "Clock", "KubeSim", "Registry", "ResourceType", "Store",
           "write_kubeconfig"]
