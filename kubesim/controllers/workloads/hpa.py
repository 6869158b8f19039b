"""The HorizontalPodAutoscaler controller without a metrics server: metrics cannot be read
(ScalingActive=False), and the target's replicas are kept within [minReplicas, maxReplicas].

Upstream: pkg/controller/podautoscaler/horizontal.go (`normalizeDesiredReplicas`, the ScalingLimited
reasons TooManyReplicas/TooFewReplicas/DesiredWithinRange).
"""
from __future__ import annotations

from kubesim.apimachinery.errors import ApiError
from kubesim.controllers.framework import Controller, ControllerContext, EventRecorder, Key, key_of


def hpa_decision(spec: dict, current: int) -> tuple[int, str, str, str]:
    """(desired replicas, ScalingLimited status, reason, message) as the HPA controller decides without a
    metrics server: the replica count is only brought within [minReplicas, maxReplicas]."""
    low, high = int(spec.get("minReplicas") or 1), int(spec["maxReplicas"])
    if current > high:
        return high, "True", "TooManyReplicas", "the desired replica count is more than the maximum replica count"
    if current < low:
        return low, "True", "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    return current, "False", "DesiredWithinRange", "the desired count is within the acceptable range"


class HorizontalPodAutoscalerController(Controller):
    """autoscaling/v2 HPAs. kubesim has no metrics server, so (as a real cluster without one) metrics cannot
    be read — `ScalingActive=False/FailedGetResourceMetric` — but the target is kept within
    [minReplicas, maxReplicas] (scaled through its spec.replicas, with a `SuccessfulRescale` event)."""

    name = "horizontal-pod-autoscaler"

    def __init__(self, cluster: ControllerContext):
        super().__init__(cluster)
        self.rt = cluster.rt("horizontalpodautoscalers", "autoscaling", "v2")
        self.events = EventRecorder(self.store, "horizontal-pod-autoscaler")
        self.targets: dict[tuple[str, str, str], set[Key]] = {}    # (namespace, kind, name) -> HPA keys

    def on_event(self, event_type, rt, obj, old):
        if (rt.group, rt.plural) == ("autoscaling", "horizontalpodautoscalers"):
            key = key_of(obj)
            for keys in self.targets.values():
                keys.discard(key)
            ref = (obj.get("spec") or {}).get("scaleTargetRef") or {}
            if event_type != "DELETED":
                self.targets.setdefault((key[0], ref.get("kind", ""), ref.get("name", "")), set()).add(key)
                self.queue.add(key)
        elif rt.group == "apps" and rt.plural in ("deployments", "statefulsets", "replicasets"):
            for key in self.targets.get((obj["metadata"].get("namespace"), rt.kind, obj["metadata"]["name"]), ()):
                self.queue.add(key)

    def reconcile(self, key: Key) -> None:
        try:
            hpa = self.store.get(self.rt, *key)
        except ApiError as e:
            if e.code == 404:
                return
            raise
        spec, now = hpa.get("spec") or {}, self.cluster.now()
        ref = spec.get("scaleTargetRef") or {}
        trt = self.store.registry.by_kind(ref.get("apiVersion", "apps/v1"), ref.get("kind", ""))
        target = None
        if trt is not None:
            try:
                target = self.store.get(trt, key[0], ref.get("name", ""))
            except ApiError as e:
                if e.code != 404:
                    raise
        old = {c["type"]: c for c in (hpa.get("status") or {}).get("conditions") or []}

        def cond(type_, status, reason, message):
            c = {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": now}
            if old.get(type_, {}).get("status") == status:
                c["lastTransitionTime"] = old[type_].get("lastTransitionTime", now)
            return c
        status = {k: v for k, v in (hpa.get("status") or {}).items() if k == "lastScaleTime"}
        if target is None:
            plural = f"{trt.plural}.{trt.group}" if trt else ref.get("kind", "").lower()
            status.update(currentReplicas=0, desiredReplicas=0, conditions=[cond(
                "AbleToScale", "False", "FailedGetScale", "the HPA controller was unable to get the target's current "
                f'scale: {plural} "{ref.get("name")}" not found')])
            self._write(hpa, status)
            return
        current = int((target.get("spec") or {}).get("replicas", 1))
        desired, limited, why, message = hpa_decision(spec, current)
        if current == 0:
            desired, limited, why, message = 0, "False", "DesiredWithinRange", message
        if desired != current:
            target["spec"]["replicas"] = desired
            try:
                self.store.update(trt, key[0], target["metadata"]["name"], target)
            except ApiError as e:
                if e.code in (404, 409):
                    self.queue.add_rate_limited(key)
                    return
                raise
            status["lastScaleTime"] = now
            below = "below Spec.MinReplicas" if desired > current else "above Spec.MaxReplicas"
            self.events.record(hpa, "Normal", "SuccessfulRescale",
                               f"New size: {desired}; reason: Current number of replicas {below}")
        status.update(
            currentReplicas=int((target.get("status") or {}).get("replicas", current)), desiredReplicas=desired,
            conditions=[
                cond("AbleToScale", "True", "SucceededGetScale",
                     "the HPA controller was able to get the target's current scale"),
                cond("ScalingActive", "False", "ScalingDisabled", "scaling is disabled since the replica count of "
                     "the target is zero") if current == 0 else
                cond("ScalingActive", "False", "FailedGetResourceMetric", "the HPA was unable to compute the "
                     "replica count: failed to get cpu utilization: unable to get metrics for resource cpu: no "
                     "metrics returned from resource metrics API"),
                cond("ScalingLimited", limited, why, message)])
        self._write(hpa, status)

    def _write(self, hpa: dict, status: dict) -> None:
        if hpa.get("status") == status:
            return
        hpa["status"] = status
        try:
            self.cluster.observe(self.rt, self.store.update(self.rt, *key_of(hpa), hpa, subresource="status"))
        except ApiError as e:
            if e.code == 409:
                self.queue.add_rate_limited(key_of(hpa))
            elif e.code != 404:
                raise
