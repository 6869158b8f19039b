"""What import-linter cannot see (its contracts: pyproject.toml, run by test_import_contracts.py): the facade.

``operators/__init__.py`` is what DAG authors import from (``from operators import TrainingJobOperator``): it
names its exports as strings, resolved lazily (PEP 562), so ``from operators import X`` is no static edge to X's
module. Inside operators such an import would cross the layers unseen: every module imports the module a name
lives in instead, and every export resolves.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "operators"


def facade_exports() -> dict[str, str]:
    """``operators/__init__.py``'s ``_EXPORTS``: name -> the module it resolves from."""
    for node in ast.walk(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("operators/__init__.py has no _EXPORTS")


def through_the_facade(source: str) -> list[str]:
    """The facade's exports a module's source imports from ``operators`` (anywhere in the file)."""
    exports = facade_exports()
    return [f"line {node.lineno}: from operators import {alias.name}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module == "operators" and not node.level
            for alias in node.names if alias.name in exports]


@pytest.mark.parametrize("name", sorted(facade_exports()))
def test_every_export_resolves(name):
    import operators

    assert getattr(operators, name) is getattr(importlib.import_module(facade_exports()[name]), name)


def test_no_module_of_operators_imports_through_the_facade():
    found = {str(p.relative_to(ROOT)): hits for p in sorted(PACKAGE.rglob("*.py")) if p != PACKAGE / "__init__.py"
             if (hits := through_the_facade(p.read_text(encoding="utf-8")))}
    assert found == {}


def test_the_check_sees_a_facade_import_inside_a_function():
    source = "from operators import settings\n\ndef f():\n    from operators import TrainingJobOperator\n"
    assert through_the_facade(source) == ["line 4: from operators import TrainingJobOperator"]
