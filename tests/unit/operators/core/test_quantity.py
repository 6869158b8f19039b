"""operators.core.quantity: Kubernetes quantities as k8s.io/apimachinery/pkg/api/resource/quantity.go reads them
(suffixes, exponents, the int64 bound), and what a request may ask (cpu, memory in GiB, whole GPUs)."""
from __future__ import annotations

from decimal import Decimal

import pytest

from operators.core.quantity import (
    cpu_quantity,
    gpu_count,
    human,
    is_quantity,
    memory_gi,
    parse_quantity,
    quantity_text,
)


@pytest.mark.parametrize(("text", "value"), [
    ("500m", Decimal("0.5")), ("2", Decimal(2)), ("16Gi", Decimal(16 * 2**30)), ("1k", Decimal(1000)),
    ("1e3", Decimal(1000)), ("1E3", Decimal(1000)), ("1E", Decimal(10**18)),   # E alone: exa, not an exponent
    (".5", Decimal("0.5")),
    ("+1", Decimal(1)), (1.5, Decimal("1.5")), (4, Decimal(4)),
])
def test_what_the_api_server_parses_parses_to_the_same_amount(text, value):
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["1K", "NaN", "Infinity", "1_000", "2x", "", "Gi", "9999Ei", "1e309", True, None])
def test_what_the_api_server_refuses_is_refused(text):
    """`K` is no suffix (only `Ki` and `k`); Decimal's words and digit separators are no quantity; 2^63-1 is the
    largest (quantity.go keeps an int64 with a scale, and kube-apiserver refuses what overflows it)."""
    with pytest.raises(ValueError):
        parse_quantity(text)
    assert not is_quantity(text)


def test_a_negative_quantity_parses_but_is_no_request():
    assert parse_quantity("-1") == -1 and not is_quantity("-1")


def test_text_and_messages():
    assert quantity_text(2.0) == "2" and quantity_text(0.5) == "0.5" and quantity_text(" 4Gi ") == "4Gi"
    assert human(Decimal(16 * 2**30), binary=True) == "16Gi" and human(Decimal("0.5"), binary=False) == "0.5"


def test_a_request_names_the_field_and_rounds_nothing_to_zero():
    assert cpu_quantity("500m") == "500m" and cpu_quantity(0.25) == "0.25"
    assert memory_gi(4) == "4" and memory_gi("0.5") == "0.5" and gpu_count("2") == 2
    for call, value, field in ((cpu_quantity, "0.1m", "cpu"), (cpu_quantity, 0, "cpu"), (memory_gi, 0.0001, "memory"),
                               (gpu_count, 0.5, "gpu"), (gpu_count, True, "gpu")):
        with pytest.raises(ValueError) as e:
            call(value)
        assert str(e.value).startswith(f"{field}={value!r}: ")
