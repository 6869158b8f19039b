"""Ephemeral-storage limits on a process pod, as the kubelet's eviction manager enforces them: a pod's local
ephemeral storage is its containers' writable layers (here each container's `<pod>/layers/<container>-<n>`:
its root directory with /tmp, /var/tmp, /root..., and its /etc upper layer), its logs and its local
ephemeral volumes (emptyDir, configMap, secret, downwardAPI, projected: `<pod>/volumes`); over the sum of its
containers' `limits.ephemeral-storage`, the pod is evicted: killed at once (grace 0), Failed, reason `Evicted`,
the manager's message.

Upstream: pkg/kubelet/eviction/eviction_manager.go (`localStorageEviction` -> `podEphemeralStorageLimitEviction`:
usage from the pod's stats (`podLocalEphemeralStorageUsage`: rootfs + logs + local volumes) against
`resourcehelper.PodLimits(pod)[ephemeral-storage]`, then `evictPod(pod, 0, message, ...)`), and
pkg/kubelet/eviction/helpers.go (`podEphemeralStorageMessageFmt`:
"Pod ephemeral local storage usage exceeds the total limit of containers %s. "; `Reason = "Evicted"`). The
kubelet checks every housekeeping period (10 s); kubesim every `PERIOD` seconds.
"""
from __future__ import annotations

import os
from decimal import Decimal

from kubesim.apimachinery.resources import format_qty, qty

PERIOD = 1.0
MESSAGE = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "


def pod_limit(pod: dict) -> Decimal | None:
    """The sum of the containers' ephemeral-storage limits (PodLimits), None when no container sets one."""
    limits = [((c.get("resources") or {}).get("limits") or {}).get("ephemeral-storage")
              for c in pod["spec"].get("containers") or []]
    limits = [qty(str(v)) for v in limits if v is not None]
    return sum(limits, Decimal(0)) if limits else None


def usage(pod_dir: str) -> int:
    """Bytes under the pod's layers and volumes (mount points, e.g. a mounted /etc overlay, not entered)."""
    total = 0
    for top in ("layers", "volumes"):
        for root, dirs, files in os.walk(os.path.join(pod_dir, top)):
            dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(root, d))]
            for name in files:
                try:
                    total += os.lstat(os.path.join(root, name)).st_blocks * 512
                except OSError:
                    pass
    return total


def over_limit(pod: dict, used: int) -> str | None:
    """The eviction message when `used` bytes exceed the pod's limit, else None."""
    limit = pod_limit(pod)
    if limit is None or used <= limit:
        return None
    return MESSAGE.format(format_qty("ephemeral-storage", limit))
