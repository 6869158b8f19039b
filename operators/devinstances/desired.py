"""The desired objects of a development instance (pure): validated request + state -> manifests.

Every shape is a template in ``k8s_templates/devinstance/``; this module only computes the values. The
StatefulSet's annotations record what the UI and the culler read back without another lookup: the catalogue
image, the external ports, the resources and the last start/stop times.
"""

from __future__ import annotations

import base64
import json
from importlib.resources import files

from operators.devinstances import naming
from operators.devinstances.spec import InstanceRequest
from operators.templating import render

SCRIPT = "start-notebook.sh"


def startup_script() -> str:
    """The start-up script's text (``k8s_templates/devinstance/start-notebook.sh``)."""
    return files("k8s_templates").joinpath("devinstance", SCRIPT).read_text(encoding="utf-8")


def annotations(req: InstanceRequest, external: dict[int, int], started: str | None,
                stopped: str | None = None) -> dict[str, str]:
    out = {
        naming.ANN_OWNER: req.owner,
        naming.ANN_IMAGE_NAME: req.image.name,
        naming.ANN_IMAGE: req.image.image,
        naming.ANN_PORTS: json.dumps({name: external[port] for name, port in req.ports.items() if port in external},
                                     separators=(",", ":")),
        naming.ANN_RESOURCES: json.dumps({"cpu": req.cpu, "memory": f"{req.memory_gi}Gi", "gpu": req.gpu},
                                         separators=(",", ":")),
    }
    if started:
        out[naming.ANN_STARTED] = started
    if stopped:
        out[naming.ANN_STOPPED] = stopped
    return out


def statefulset(req: InstanceRequest, external: dict[int, int], *, replicas: int, started: str | None,
                queue_labels: dict[str, str] | None = None) -> dict:
    """``queue_labels``: the platform's Kueue labels (``Decision.queue_labels``) for a new instance's set."""
    labels = naming.labels(req.owner, req.name)
    return render(
        "devinstance/statefulset.yaml.j2",
        name=naming.statefulset_name(req.owner, req.name),
        namespace=req.namespace,
        labels=labels,
        set_labels={**labels, **(queue_labels or {})},
        annotations=annotations(req, external, started),
        replicas=replicas,
        image=req.image.image,
        image_name=req.image.name,
        owner=req.owner,
        cpu=req.cpu,
        memory_gi=req.memory_gi,
        gpu=req.gpu,
        home_pvc=req.home_pvc,
        mounts=[{"name": f"mount-{i}", "claim": m.pvc, "path": m.mount_path, "read_only": m.read_only}
                for i, m in enumerate(req.mounts)],
        ports=req.ports,
        secret=naming.secret_name(req.owner, req.name),
        startup=naming.startup_configmap_name(req.owner, req.name),
        service_account=req.service_account,
        pull_secrets=list(req.pull_secrets),
        node_pools=req.node_pools,
        timezone=req.timezone,
    )


def owner_reference(sts_name: str, uid: str) -> dict:
    return render("devinstance/owner-reference.yaml.j2", name=sts_name, uid=uid)


# ``sts``: the StatefulSet's name when it exists (an instance named by the first rule keeps its names)
def service(req: InstanceRequest, sts_uid: str, sts: str | None = None) -> dict:
    sts = sts or naming.statefulset_name(req.owner, req.name)
    return render("devinstance/service.yaml.j2", name=naming.service_of(sts), namespace=req.namespace,
                  labels=naming.labels(req.owner, req.name), ports=req.ports, owner_ref=owner_reference(sts, sts_uid))


def startup_configmap(owner: str, name: str, namespace: str, sts_uid: str, sts: str | None = None) -> dict:
    sts = sts or naming.statefulset_name(owner, name)
    return render("devinstance/startup-configmap.yaml.j2", name=naming.startup_configmap_of(sts),
                  namespace=namespace, labels=naming.labels(owner, name), script=startup_script(),
                  owner_ref=owner_reference(sts, sts_uid))


def secret(owner: str, name: str, namespace: str, sts_uid: str, password: str, sts: str | None = None) -> dict:
    sts = sts or naming.statefulset_name(owner, name)
    return render("devinstance/secret.yaml.j2", name=naming.secret_of(sts), namespace=namespace,
                  labels=naming.labels(owner, name), owner_ref=owner_reference(sts, sts_uid),
                  password_b64=base64.b64encode(password.encode()).decode())


def tcp_services_configmap(namespace: str, name: str) -> dict:
    return render("devinstance/tcp-services.yaml.j2", namespace=namespace, name=name)
