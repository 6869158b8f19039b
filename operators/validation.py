"""What every request check in Skiff shares (pure): Kubernetes' name rules and the one error shape.

Training steps (``training.spec``), development instances (``devinstances.spec``) and the platform file
(``platform.loader``) all refuse bad input with ``field=value: why`` before anything is written, and all test
names against the same apiserver rules; these lived as copies in each before.
"""

from __future__ import annotations

import re
from typing import Any

# kube-apiserver's IsDNS1123Label / IsDNS1123Subdomain / IsValidLabelValue
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_KEY_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")


def is_dns_label(value: str) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.fullmatch(value))


def is_dns_subdomain(value: str) -> bool:
    return isinstance(value, str) and len(value) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(value))


def is_label_value(value: str) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_LABEL_VALUE.fullmatch(value))


def is_label_key(value: str) -> bool:
    """A label key or taint key (``[prefix/]name``: a DNS subdomain prefix, a name of at most 63)."""
    if not isinstance(value, str) or not value:
        return False
    prefix, _, name = value.rpartition("/")
    return (not prefix or is_dns_subdomain(prefix)) and len(name) <= 63 and bool(_LABEL_KEY_NAME.fullmatch(name))


# an image reference has no user-info: '@' only introduces a digest ("<name>@sha256:<hex>"), per the
# distribution reference grammar (github.com/distribution/reference, regexp.go: ``digest``)
_CREDENTIALS = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?P<user>[^/@]+)@(?![A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$)")
_NATIVE_PREFIX = "kubernetes.io/"


def image_credentials(image: str) -> str | None:
    """``image`` with its credentials masked (``***@registry/x``) if it carries any, else None: an image
    reference is shown to every member (the page, ``kubectl describe``), never a place for a token."""
    m = _CREDENTIALS.match(image) if isinstance(image, str) else None
    return None if m is None else image[:m.start("user")] + "***" + image[m.end("user"):]


def is_extended_resource(name: str) -> bool:
    """kube-apiserver's ``IsExtendedResourceName`` (pkg/apis/core/helper/helpers.go): domain-qualified, not
    a native resource (no '/', or in the ``kubernetes.io/`` domain: cpu, memory, hugepages-*...), not
    ``requests.*``, and ``requests.<name>`` a qualified name (it becomes a ResourceQuota key)."""
    if not isinstance(name, str) or "/" not in name or _NATIVE_PREFIX in name or name.startswith("requests."):
        return False
    return is_label_key("requests." + name)


def bounded(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters with its full length (a message part that may carry user text)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters with the full length, so a 1 MB value is not echoed."""
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, list | tuple | dict):
        return f"{text[:limit]}... ({len(value)} items)"
    return f"{text[:limit]}... ({len(value) if isinstance(value, str | bytes) else len(text)} characters)"


def invalid(field: str, value: Any, why: str) -> ValueError:
    """The error for a bad input: ``cpu='2x': must be a positive number...`` (raise it)."""
    return ValueError(f"{field}={short_repr(value)}: {why}")
