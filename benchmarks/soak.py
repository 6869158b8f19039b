"""Benchmark section ``soak``: the table of the last ``make soak`` (``devstack.soak``: the production profile
under kubesim's rate-based faults and SIGKILLed components, then the audit), read from ``.artifacts/soak.md``
which the soak writes. Without that file (or with ``SKIFF_SOAK_MINUTES`` set) it runs a soak first, for
``SKIFF_SOAK_MINUTES`` minutes (default 10) with seed ``SKIFF_SOAK_SEED`` (default 1)."""

from __future__ import annotations

import os

from devstack.soak import ARTIFACT, main


def run() -> str:
    if "SKIFF_SOAK_MINUTES" in os.environ or not ARTIFACT.exists():
        main(["--minutes", os.environ.get("SKIFF_SOAK_MINUTES", "10"),
              "--seed", os.environ.get("SKIFF_SOAK_SEED", "1")])
    return ARTIFACT.read_text()
