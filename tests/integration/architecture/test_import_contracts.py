"""The layers of kubesim and operators, checked by import-linter (its contracts: pyproject.toml
``[tool.importlinter]``; also run by ``make lint``). The tool reads every import, inside functions and under
TYPE_CHECKING too; these tests run it on the checkout, show it fails on an upward import planted in a copy, and
check each top-level part of both packages has a place in a layers contract (one left out would go unchecked)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-logo", "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_the_checkout_keeps_every_contract():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"Contracts: {len(CONTRACTS['contracts'])} kept, 0 broken." in done.stdout


@pytest.mark.parametrize(("where", "planted", "said"), [
    # the bottom of kubesim reaching for the kubelet
    ("kubesim/apimachinery/errors.py", "from kubesim.kubelet import kubelet",
     "kubesim.apimachinery is not allowed to import kubesim.kubelet"),
    # a function-level import counts too: the API server's registry reaching for a controller
    ("kubesim/apiserver/registry/store.py", "def _planted():\n    from kubesim.controllers import gc",
     "kubesim.apiserver is not allowed to import kubesim.controllers"),
    # a feature importing a sibling
    ("operators/sedna/desired.py", "from operators.training import spec",
     "operators.sedna is not allowed to import operators.training"),
])
def test_a_planted_upward_import_breaks_a_contract(tmp_path, where, planted, said):
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(ROOT / "pyproject.toml", copy)
    for package in CONTRACTS["root_packages"]:
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert lint_imports(copy).returncode == 0      # the copy alone is analysed, and it is clean
    with open(copy / where, "a", encoding="utf-8") as f:
        f.write(f"\n\n{planted}  # planted\n")
    done = lint_imports(copy)
    assert done.returncode == 1 and said in " ".join(done.stdout.split()), done.stdout[-3000:]


@pytest.mark.parametrize("package", ["kubesim", "operators"])
def test_every_top_level_part_has_a_layer(package):
    layers = next(c["layers"] for c in CONTRACTS["contracts"] if c["type"] == "layers" and c["containers"] == [package])
    named = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    parts = {p.stem if p.is_file() else p.name for p in (ROOT / package).iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file()}
    assert parts - named == set(), f"a new part of {package} needs a place in its layers contract (pyproject.toml)"
    assert named - parts == set(), "the layers contract names a part that does not exist"
