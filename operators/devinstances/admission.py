"""A development instance's admission: the request from the validated ``InstanceRequest``, the team's quota
observed through ``operators.k8s``, the platform's decision (``operators.platform.admission.decide``).

``lifecycle.create`` applies it: a refusal raises ``AdmissionError``; an instance is interactive, so one that
would only wait for quota is refused too, saying what is in use, instead of being queued.
"""

from __future__ import annotations

from operators.devinstances.spec import InstanceRequest
from operators.k8s.resource import RESOURCEQUOTAS
from operators.k8s.rest import Kube
from operators.platform.admission import AdmissionRequest, Decision, decide
from operators.platform.model import QUOTA_NAME, Platform


def admission_request(req: InstanceRequest) -> AdmissionRequest:
    return AdmissionRequest(team=req.namespace, user=req.owner, cpu=req.cpu, memory=f"{req.memory_gi}Gi",
                            gpu=req.gpu, home=req.home_pvc, volumes=req.mounts, instance=True)


def decision(kube: Kube, platform: Platform, req: InstanceRequest) -> Decision:
    """Observe the team's quota and decide."""
    status = (kube.get(RESOURCEQUOTAS, req.namespace, QUOTA_NAME) or {}).get("status")
    return decide(platform, admission_request(req), status)
