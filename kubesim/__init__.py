"""kubesim: a simulated Kubernetes API server and cluster for Skiff's tests and local demo.

`KubeSim` runs it in-process; `python -m kubesim` runs it as a process. See INTERNALS.md.
"""
from kubesim.errors import ApiError
from kubesim.registry import Registry, ResourceType
from kubesim.server import KubeSim, write_kubeconfig
from kubesim.store import AdmissionRequest, Clock, Store

__all__ = ["AdmissionRequest", "ApiError", "Clock", "KubeSim", "Registry", "ResourceType", "Store",
           "write_kubeconfig"]
