"""operators.core.names: kube-apiserver's name rules (k8s.io/apimachinery/pkg/util/validation/validation.go:
IsDNS1123Label, IsDNS1123Subdomain, IsValidLabelValue, IsQualifiedName; pkg/apis/core/helper/helpers.go
IsExtendedResourceName) and the slug rules names already on clusters depend on."""
from __future__ import annotations

import pytest

from operators.core.names import (
    image_credentials,
    is_dns_label,
    is_dns_subdomain,
    is_extended_resource,
    is_label_key,
    is_label_value,
    label_value,
    slug,
    user_key,
)


def test_dns_labels_and_subdomains():
    assert is_dns_label("a") and is_dns_label("a-1") and is_dns_label("a" * 63)
    assert not any(map(is_dns_label, ["", "A", "-a", "a-", "a.b", "a" * 64, "a_b"]))
    assert is_dns_subdomain("a.b-c.d") and is_dns_subdomain(".".join(["a" * 63] * 3))
    assert not any(map(is_dns_subdomain, ["a..b", ".a", "a.", "A.b", "a" * 254]))


def test_label_values_and_keys():
    assert is_label_value("") and is_label_value("A_b.c-1") and not is_label_value("-a")
    assert not is_label_value("a" * 64) and not is_label_value("a b")
    assert is_label_key("app") and is_label_key("example.com/app") and is_label_key("a/" + "b" * 63)
    # "/app": validation.go IsQualifiedName, "prefix part must be non-empty"
    assert not any(map(is_label_key, ["", "/app", "Example.com/app", "a/b/c", "a/" + "b" * 64, "a/-b"]))


@pytest.mark.parametrize(("name", "extended"), [
    ("nvidia.com/gpu", True), ("example.com/tpu", True), ("cpu", False), ("memory", False),
    ("kubernetes.io/foo", False), ("requests.example.com/x", False), ("nvidia.com/", False),
])
def test_extended_resources(name, extended):
    assert is_extended_resource(name) is extended


def test_credentials_in_an_image_are_masked_a_digest_is_not_credentials():
    assert image_credentials("user:token@registry.example.com/x:1") == "***@registry.example.com/x:1"
    assert image_credentials("registry.example.com/x@sha256:" + "a" * 64) is None
    assert image_credentials("busybox:1.36") is None


def test_slugs_and_keys_are_dns_safe_and_injective():
    assert slug("Alice.Smith", 63) == "alice-smith" and slug("--x--", 63) == "x" and slug("...", 63) == ""
    assert user_key("bob") == "bob"
    hashed = user_key("Bob.Smith")
    assert hashed.startswith("bob-smith-") and is_dns_label(hashed) and hashed != user_key("bob-smith")
    assert user_key("bob-1a2b3c4d") != "bob-1a2b3c4d"        # a plain name never looks like a hashed one
    assert label_value("a b/c") == "a_b_c" and label_value("-x-") == "x" and len(label_value("y" * 100)) == 63
