"""Workload controllers as kube-controller-manager runs them: Job, Deployment (via ReplicaSets),
ReplicaSet, StatefulSet, PVC binding (a PVC becomes Bound with its requested capacity), Endpoints,
EndpointSlices, and
HorizontalPodAutoscalers (bounds only: there is no metrics server).

Each controller owns what it creates with a controller ownerReference (`blockOwnerDeletion: true`), finds
its children by that reference, and reports status through the status subresource. A refused create (e.g.
quota) becomes a `FailedCreate` Warning event on the owner and is retried with back-off.
"""
from __future__ import annotations

from kubesim.controllers.framework import Controller, ControllerContext
from kubesim.controllers.workloads.deployment import DeploymentController, ReplicaSetController
from kubesim.controllers.workloads.endpoints import EndpointsController
from kubesim.controllers.workloads.endpointslice import EndpointSliceController
from kubesim.controllers.workloads.hpa import HorizontalPodAutoscalerController
from kubesim.controllers.workloads.job import JobController
from kubesim.controllers.workloads.pvcbinder import PVCBinder
from kubesim.controllers.workloads.statefulset import StatefulSetController


def controllers(cluster: ControllerContext) -> list[Controller]:
    return [JobController(cluster), DeploymentController(cluster), ReplicaSetController(cluster),
            StatefulSetController(cluster), PVCBinder(cluster), EndpointsController(cluster),
            EndpointSliceController(cluster), HorizontalPodAutoscalerController(cluster)]
