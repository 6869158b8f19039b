"""Names, labels and annotations of a development instance (pure functions).

One instance ``<name>`` of owner ``<owner>`` in a team namespace is the StatefulSet ``<key>--<name>`` plus, with
the same labels, the headless Service ``<key>--<name>``, the Secret ``<key>--<name>-password`` and the start-up
script ConfigMap ``<key>--<name>-startup``. The StatefulSet's name is at most 52 characters because its pods'
``controller-revision-hash`` label (``<sts>-<10 hex>``) must stay a valid label value (<= 63).

``<key>`` is the owner's injective readable key (the home PVC's rule, ``core.names.user_key``: the name
itself when DNS-safe, else a slug plus a hash, so "Alice" and "alice" differ) with no ``--`` in it, and an
instance name has no ``--`` either: the first ``--`` splits a name back into (key, name), so no two owners'
instances share a name ("alice" + "x-nb" is ``alice--x-nb``, "alice-x" + "nb" is ``alice-x--nb``).

Instances created before this rule are named ``<owner slug>-<name>`` (``legacy_statefulset_name``): they are
found under that name too, acted on only when their ``skiff.io/owner`` annotation is exactly the owner, and
keep their names until deleted (``lifecycle.read_instance``; docs/security.md).

The owner is an Airflow user name; its slug is the ``skiff.io/owner`` label (a coarse selector: every reader
also compares the verbatim ``skiff.io/owner`` annotation).
"""

from __future__ import annotations

from operators.core.checks import invalid
from operators.core.names import is_dns_label, slug, user_key

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
SEPARATOR = "--"


def owner_key(owner: str) -> str:
    """The owner's part of its objects' names: injective, at most 30 characters, no ``--``."""
    owner_slug(owner)  # the same refusal for a non-string or an empty slug
    return user_key(owner, max_plain=30, slug_len=21, single_dashes=True)


def owner_slug(owner: str) -> str:
    """``Alice.Smith`` -> ``alice-smith``; raises if nothing usable is left (field ``owner``)."""
    if not isinstance(owner, str):
        raise ValueError(f"owner={owner!r}: must be an Airflow user name")
    owner_part = slug(owner, 40)
    if not owner_part:
        raise ValueError(f"owner={owner!r}: has no character usable in a Kubernetes name")
    return owner_part


def check_name(owner: str, name: str) -> str:
    """``name`` must be a DNS label without ``--`` such that ``<key>--<name>`` fits in 52 characters."""
    if not isinstance(name, str) or not is_dns_label(name) or SEPARATOR in name:
        raise invalid("name", name, "must be a DNS label (lower-case letters, digits and single '-', "
                      "starting and ending with a letter or digit)")
    room = MAX_STS_NAME - len(owner_key(owner)) - len(SEPARATOR)
    if len(name) > room:
        raise ValueError(f"name={name!r}: at most {room} characters for owner {owner!r}")
    return name


def statefulset_name(owner: str, name: str) -> str:
    return f"{owner_key(owner)}{SEPARATOR}{check_name(owner, name)}"


def legacy_statefulset_name(owner: str, name: str) -> str | None:
    """The name the first rule gave (``<owner slug>-<name>``, not injective), None if it cannot be one."""
    legacy = f"{owner_slug(owner)}-{name}"
    return legacy if is_dns_label(legacy) and len(legacy) <= MAX_STS_NAME else None


def service_of(sts_name: str) -> str:
    return sts_name


def secret_of(sts_name: str) -> str:
    return f"{sts_name}-password"


def startup_configmap_of(sts_name: str) -> str:
    return f"{sts_name}-startup"


def service_name(owner: str, name: str) -> str:
    return statefulset_name(owner, name)


def secret_name(owner: str, name: str) -> str:
    return secret_of(statefulset_name(owner, name))


def startup_configmap_name(owner: str, name: str) -> str:
    return startup_configmap_of(statefulset_name(owner, name))


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
