"""The one home of apimachinery's name and label rules: object names per kind (DNS-1123 subdomain, DNS-1123
label, DNS-1035 label, RBAC path segment), qualified names (label and annotation keys), label values,
config keys (Secret/ConfigMap data), container port names, and ObjectMeta validation. Messages are the real server's.

Upstream: k8s.io/apimachinery/pkg/util/validation/validation.go (`IsDNS1123Subdomain`, `IsQualifiedName`,
`IsValidLabelValue`, `IsConfigMapKey`...), k8s.io/apimachinery/pkg/api/validation/objectmeta.go
(`ValidateObjectMeta`) and pkg/apis/core/validation/validation.go (which name rule each kind uses).
"""
from __future__ import annotations

import re

SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")          # RFC 1123 label
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# k8s.io/apimachinery/pkg/util/rand/rand.go `alphanums` (no vowels, no 0/1/3: no words, no look-alikes): the
# random part of a generated name (`utilrand.String`) and of a pod-template-hash (`SafeEncodeString`)
SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# k8s.io/apiserver/pkg/storage/names/generate.go: 5 random characters after generateName cut to 58
GENERATED_SUFFIX = 5
MAX_GENERATED_PREFIX = 63 - GENERATED_SUFFIX

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                 "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                 "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
DNS_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                 "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
               "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
               "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                 "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                 "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                   "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value', "
                   " or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
CONFIG_KEY_MSG = ("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  "
                  "or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')")
_RBAC_GROUP = "rbac.authorization.k8s.io"


def dns_label_error(value: str) -> str | None:
    """RFC 1123 label (namespace and container names): None if valid, else the message."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    return None if DNS_LABEL.match(value) else DNS_LABEL_MSG


def object_name_error(rt, name: str) -> str | None:
    """The apimachinery name validation for the kind, or None if the name is valid."""
    if rt.group == _RBAC_GROUP:
        if name in (".", "..") or "/" in name or "%" in name:
            return "may not contain '/' or '%' and may not be '.' or '..'"
        return None
    if rt.plural == "namespaces":
        return dns_label_error(name)
    if rt.plural == "services" and rt.group == "":
        regex, msg, limit = DNS1035, DNS1035_MSG, 63
    else:
        regex, msg, limit = SUBDOMAIN, SUBDOMAIN_MSG, 253
    if len(name) > limit:
        return f"must be no more than {limit} characters"
    return None if regex.match(name) else msg


def qualified_name_error(key: str) -> str | None:
    """apimachinery IsQualifiedName: optional DNS-subdomain prefix + '/' + a 63-char name part."""
    name = key
    if "/" in key:
        prefix, name = key.split("/", 1)
        if not prefix or len(prefix) > 253 or not SUBDOMAIN.match(prefix):
            return "prefix part " + SUBDOMAIN_MSG
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    return None if QUALIFIED_NAME.match(name) else QUALIFIED_MSG


def label_value_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    return None if LABEL_VALUE.match(value) else LABEL_VALUE_MSG


def port_name_error(name: str) -> str | None:
    """A container port's name (IsValidPortName, an IANA service name): None if valid, else the first of
    the real server's messages."""
    if len(name) > 15:
        return "must be no more than 15 characters"
    if not re.fullmatch(r"[-a-z0-9]+", name):
        return "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"
    if not re.search("[a-z]", name):
        return "must contain at least one letter (a-z)"
    if "--" in name:
        return "must not contain consecutive hyphens"
    if name.startswith("-") or name.endswith("-"):
        return "must not begin or end with a hyphen"
    return None


def config_key_error(key: str) -> str | None:
    """A Secret/ConfigMap data key (IsConfigMapKey)."""
    if len(key) > 253:
        return "must be no more than 253 characters"
    if not CONFIG_KEY.match(key):
        return CONFIG_KEY_MSG
    if key in (".", "..") or key.startswith(".."):
        return "must not be '.' or '..'" if key in (".", "..") else "must not start with '..'"
    return None


def metadata_causes(md: dict) -> list[tuple[str, str, str]]:
    """Generic ObjectMeta validation the apiserver does for every kind: label keys/values, annotation keys."""
    causes = []
    labels = md.get("labels") or {}
    annotations = md.get("annotations") or {}
    if not isinstance(labels, dict) or not isinstance(annotations, dict):
        return [("metadata", "FieldValueInvalid", "Invalid value: labels and annotations must be maps")]
    for k, v in labels.items():
        err = qualified_name_error(k)
        if err:
            causes.append(("metadata.labels", "FieldValueInvalid", f'Invalid value: "{k}": {err}'))
        if not isinstance(v, str):
            causes.append((f"metadata.labels[{k}]", "FieldValueInvalid", "Invalid value: must be a string"))
        elif label_value_error(v):
            causes.append(("metadata.labels", "FieldValueInvalid", f'Invalid value: "{v}": {label_value_error(v)}'))
    for k in annotations:
        err = qualified_name_error(k)
        if err:
            causes.append(("metadata.annotations", "FieldValueInvalid", f'Invalid value: "{k}": {err}'))
    return causes
