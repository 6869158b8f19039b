"""Small dead ends a newcomer met (issue 29 item 5): commands that should just work."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from devstack.airflow_env import REPO


def test_benchmarks_help_prints_the_usage_and_every_section():
    from benchmarks.__main__ import SECTIONS

    done = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m benchmarks") and "--write" in done.stdout
    assert all(s in done.stdout for s in SECTIONS)


def test_the_licence_is_an_spdx_expression_with_its_file_so_setuptools_does_not_warn():
    """setuptools >= 77 warns "`project.license` as a TOML table is deprecated" on every install (three times
    in `make demo`); PEP 639's form is a string and ``license-files``."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["license"] == "Apache-2.0"
    assert [f for f in project["project"]["license-files"] if (REPO / f).is_file()] == ["LICENSE"]
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in project["build-system"]["requires"])
