"""Names, labels and annotations of a development instance (pure functions).

One instance ``<name>`` of owner ``<owner>`` in a team namespace is the StatefulSet ``<owner>-<name>`` plus, with
the same labels, the headless Service ``<owner>-<name>``, the Secret ``<owner>-<name>-password`` and the start-up
script ConfigMap ``<owner>-<name>-startup``. The StatefulSet's name is at most 52 characters because its pods'
``controller-revision-hash`` label (``<sts>-<10 hex>``) must stay a valid label value (<= 63).

The owner is an Airflow user name; it is slugged (lower case, DNS characters) for names and label values, and
kept verbatim in the ``skiff.io/owner`` annotation.
"""

from __future__ import annotations

from operators.core.checks import invalid
from operators.core.names import is_dns_label, slug

MANAGED_BY = "skiff"
KIND = "dev-instance"
LABEL_KIND = "skiff.io/kind"
LABEL_OWNER = "skiff.io/owner"
LABEL_INSTANCE = "skiff.io/instance"
ANN_OWNER = "skiff.io/owner"
ANN_IMAGE = "skiff.io/image"
ANN_IMAGE_NAME = "skiff.io/image-name"
ANN_PORTS = "skiff.io/ports"
ANN_RESOURCES = "skiff.io/resources"
ANN_STARTED = "skiff.io/last-started"
ANN_STOPPED = "skiff.io/last-stopped"
MAX_STS_NAME = 52


def owner_slug(owner: str) -> str:
    """``Alice.Smith`` -> ``alice-smith``; raises if nothing usable is left (field ``owner``)."""
    if not isinstance(owner, str):
        raise ValueError(f"owner={owner!r}: must be an Airflow user name")
    owner_part = slug(owner, 40)
    if not owner_part:
        raise ValueError(f"owner={owner!r}: has no character usable in a Kubernetes name")
    return owner_part


def check_name(owner: str, name: str) -> str:
    """``name`` must be a DNS label such that ``<owner>-<name>`` fits in 52 characters."""
    if not isinstance(name, str) or not is_dns_label(name):
        raise invalid("name", name, "must be a DNS label (lower-case letters, digits and '-', "
                      "starting and ending with a letter or digit)")
    room = MAX_STS_NAME - len(owner_slug(owner)) - 1
    if len(name) > room:
        raise ValueError(f"name={name!r}: at most {room} characters for owner {owner!r}")
    return name


def statefulset_name(owner: str, name: str) -> str:
    return f"{owner_slug(owner)}-{check_name(owner, name)}"


def service_name(owner: str, name: str) -> str:
    return statefulset_name(owner, name)


def secret_name(owner: str, name: str) -> str:
    return f"{statefulset_name(owner, name)}-password"


def startup_configmap_name(owner: str, name: str) -> str:
    return f"{statefulset_name(owner, name)}-startup"


def pod_name(owner: str, name: str) -> str:
    return f"{statefulset_name(owner, name)}-0"


def labels(owner: str, name: str) -> dict[str, str]:
    """The common labels of every object of the instance (also its pods' selector)."""
    return {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        LABEL_KIND: KIND,
        LABEL_OWNER: owner_slug(owner),
        LABEL_INSTANCE: check_name(owner, name),
    }


def owner_selector(owner: str) -> str:
    """Label selector for every instance of ``owner`` (in any namespace)."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{LABEL_KIND}={KIND},{LABEL_OWNER}={owner_slug(owner)}"


def all_selector() -> str:
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{LABEL_KIND}={KIND}"
