"""kube-controller-manager's resourcequota controller: keeps each ResourceQuota's `status.hard` and `status.used`
current as objects come, end and go (pkg/controller/resourcequota). What it counts is the admission plugin's
(kubesim/apiserver/admission/resourcequota.py: `usage_of`), and so is the "status unknown" window it honours."""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.admission.resourcequota import ZERO, format_qty, usage_of
from kubesim.controllers.framework import Controller, ControllerContext


class QuotaController(Controller):
    """Keeps each ResourceQuota's `status.hard` and `status.used` current as objects come, end and go."""

    name = "resourcequota-controller"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.rq_rt = cluster.rt("resourcequotas")

    def on_event(self, event_type, rt, obj, old):
        ns = obj["metadata"].get("namespace")
        if not ns or (rt.group == "" and rt.plural == "events"):
            return
        if (rt.group, rt.plural) == ("", "resourcequotas"):
            if event_type != "DELETED":
                self.queue.add((ns, obj["metadata"]["name"]))
            return
        for quota in self.cluster.cache.list(self.rq_rt, ns):
            self.queue.add((ns, quota["metadata"]["name"]))

    def reconcile(self, key):
        ns, name = key
        try:
            quota = self.store.get(self.rq_rt, ns, name)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        lag = self.cluster.quota.lag_left(ns, name)
        if lag > 0:                     # the simulated controller is still "catching up" with this quota
            self.queue.add_after(key, lag)
            return
        hard_spec = (quota.get("spec") or {}).get("hard") or {}
        used = usage_of(self.store, ns, hard=hard_spec, lister=self.cluster.cache.list)
        status = {"hard": dict(hard_spec),
                  "used": {k: format_qty(k, used.get(k, ZERO)) for k in hard_spec}}
        if quota.get("status") == status:
            return
        quota["status"] = status
        try:
            self.cluster.observe(self.rq_rt, self.store.update(self.rq_rt, ns, name, quota, subresource="status"))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_rate_limited(key)
            elif e.code != 404:
                raise
