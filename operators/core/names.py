"""Kubernetes' name rules, image references and the one slug rule (pure).

The rules are kube-apiserver's (``k8s.io/apimachinery/pkg/util/validation/validation.go``: ``IsDNS1123Label``,
``IsDNS1123Subdomain``, ``IsValidLabelValue``, ``IsQualifiedName``), so Skiff refuses a name before the API
server would. ``slug`` is how a free-form name (an Airflow user, a DAG and task id) becomes a fragment of a
Kubernetes name; ``label_value`` how it becomes a label value. Names already written to clusters depend on both
(a user's StatefulSets and home PVC), so neither may change.
"""

from __future__ import annotations

import hashlib
import re

# the DNS-1123 label as a JSON-schema / HTML ``pattern`` (the development-instance form uses it)
DNS_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_KEY_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")
_NOT_LABEL = re.compile(r"[^A-Za-z0-9_.-]")
_LABEL_ENDS = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")
# an image reference has no user-info: '@' only introduces a digest ("<name>@sha256:<hex>"), per the
# distribution reference grammar (github.com/distribution/reference, regexp.go: ``digest``)
_CREDENTIALS = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?P<user>[^/@]+)@(?![A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$)")
_NATIVE_PREFIX = "kubernetes.io/"
# a DNS-safe name ending like a hashed one ("bob-1a2b3c4d") is hashed too, so the two forms never meet
_HASHED = re.compile(r"-[0-9a-f]{8}\Z")


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
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:        # "/app": IsQualifiedName's "prefix part must be non-empty"
        return False
    return (not prefix or is_dns_subdomain(prefix)) and len(name) <= 63 and bool(_LABEL_KEY_NAME.fullmatch(name))


def is_extended_resource(name: str) -> bool:
    """kube-apiserver's ``IsExtendedResourceName`` (pkg/apis/core/helper/helpers.go): domain-qualified, not
    a native resource (no '/', or in the ``kubernetes.io/`` domain: cpu, memory, hugepages-*...), not
    ``requests.*``, and ``requests.<name>`` a qualified name (it becomes a ResourceQuota key)."""
    if not isinstance(name, str) or "/" not in name or _NATIVE_PREFIX in name or name.startswith("requests."):
        return False
    return is_label_key("requests." + name)


def image_credentials(image: str) -> str | None:
    """``image`` with its credentials masked (``***@registry/x``) if it carries any, else None: an image
    reference is shown to every member (the page, ``kubectl describe``), never a place for a token."""
    m = _CREDENTIALS.match(image) if isinstance(image, str) else None
    return None if m is None else image[:m.start("user")] + "***" + image[m.end("user"):]


def slug(raw: str, max_len: int) -> str:
    """``"Alice.Smith"`` -> ``"alice-smith"``: lower case, every run of characters a DNS label may not hold
    becomes one ``-``, no ``-`` at either end, at most ``max_len`` characters. May be empty."""
    return _NOT_DNS.sub("-", raw.lower()).strip("-")[:max_len].strip("-")


def user_key(user: str, max_plain: int = 58, slug_len: int = 44, single_dashes: bool = False) -> str:
    """An injective, readable DNS-label form of a user name (home PVCs, development instances): ``user``
    itself when already DNS-safe (at most ``max_plain`` characters, not ending like a hashed key, and with
    ``single_dashes`` no ``--``), else its slug cut to ``slug_len`` plus 8 hex of the original's SHA-256, so
    "Bob.Smith" and "bob-smith" never meet and no plain name equals another user's hashed one."""
    plain = len(user) <= max_plain and is_dns_label(user) and not _HASHED.search(user)
    if plain and not (single_dashes and "--" in user):
        return user
    part = slug(user, len(user))
    part = (re.sub(r"-+", "-", part) if single_dashes else part)[:slug_len].strip("-") or "user"
    return f"{part}-{hashlib.sha256(user.encode('utf-8')).hexdigest()[:8]}"


def label_value(raw: str) -> str:
    """``raw`` made a valid label value: invalid characters become ``_``, at most 63 chars, alnum ends."""
    return _LABEL_ENDS.sub("", _NOT_LABEL.sub("_", str(raw))[:63])
