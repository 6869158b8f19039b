"""Node pools (pure): how GPU nodes and the online (production) pool are marked, and the defaults.

A GPU step asks ``gpu_resource`` (the device plugin's extended resource) and tolerates the GPU taint; an
online step tolerates the online pool's taint and prefers its label. The platform file's ``node_pools`` may
name others (``example.com/tpu``); the page counts GPUs by the same name. Written here once: the platform file's
defaults, the ``[skiff] online_pool_key/value`` fallback and the manifests all start from these values.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_ONLINE_KEY = "node.netease.com/node-pool"
DEFAULT_ONLINE_VALUE = "online"


@dataclass(frozen=True)
class NodePools:
    gpu_resource: str = GPU_RESOURCE
    gpu_taint_key: str = GPU_RESOURCE
    gpu_taint_value: str = "true"
    gpu_taint_effect: str = "NoSchedule"
    online_key: str = DEFAULT_ONLINE_KEY
    online_value: str = DEFAULT_ONLINE_VALUE
    online_taint_effect: str = "NoSchedule"
