"""The layering of ``operators/``, read from the source with ``ast`` (every import, inside functions too).

Layers point one way (docs: the developers' guide; ``operators/core/__init__.py``)::

    core (+ templating, settings)  <  k8s  <  platform (+ rbac, teams)  <  features (training, devinstances,
    sedna)  <  ui

* ``operators.core``, ``operators.templating`` and ``operators.settings``: shared by everyone, importing
  nothing above the core (templating renders ``k8s_templates/`` for every layer that writes a manifest; settings
  declares every ``[skiff]`` option, read by the access layer as by the features).
* ``operators.k8s``: the access layer, the only code that touches the Kubernetes client and its exceptions.
* ``operators.platform``, ``operators.rbac`` and ``operators.teams``: policy. ``rbac`` renders and applies the
  permissions of every feature and the platform's people (it reads ``platform.desired``), ``teams`` holds the
  short names over the platform file; both sit with the platform, below the features that use them (Sedna's
  install binds its roles through ``rbac``).
* the features never import a sibling or the UI; the UI may read them all.

``operators/__init__.py`` is the facade DAG authors import from: it names its exports as strings, resolved
lazily, so it has no static edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from devstack.import_graph import cycles, import_statements
from devstack.import_graph import modules as graph_modules

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operators"
FEATURES = ("training", "devinstances", "sedna")
LAYER = {"core": 0, "templating": 0, "settings": 0, "metrics": 0, "k8s": 1, "platform": 2, "rbac": 2, "teams": 2,
         **dict.fromkeys(FEATURES, 3), "ui": 4, "exporter": 4}
# the client and its exceptions belong to operators.k8s; kubernetes.utils (pure helpers) is anyone's
CLIENT_PACKAGES = ("kubernetes", "kubernetes_asyncio")
CLIENT_ALLOWED = ("kubernetes.utils",)
# No exception: every feature receives an ``operators.k8s.Kube`` (issue 21); a new entry is a regression
CLIENT_EXCEPTIONS: set[tuple[str, str]] = set()


def modules() -> dict[str, Path]:
    return graph_modules(ROOT, "operators")


def imported_names(path: Path, name: str) -> set[str]:
    """Every module name an import in the file names (``from a import b``: ``a`` and ``a.b``)."""
    return {target for base, names in import_statements(path, name) for target in (base, *names)}


def facade_exports() -> dict[str, str]:
    """``operators/__init__.py``'s ``_EXPORTS``: name -> the module it resolves from (lazily, PEP 562)."""
    for node in ast.walk(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "_EXPORTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("operators/__init__.py has no _EXPORTS")


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the ``operators`` modules it imports, module -> the outside modules it imports). ``from
    operators import X`` is an edge to the module X resolves from (the facade itself loads nothing)."""
    known, exports = modules(), facade_exports()
    inside: dict[str, set[str]] = {m: set() for m in known}
    outside: dict[str, set[str]] = {m: set() for m in known}
    for name, path in known.items():
        if not path.is_file():
            continue
        outside[name] = {base for base, _ in import_statements(path, name) if base.split(".")[0] != "operators"}
        for target in imported_names(path, name):
            if target.split(".")[0] != "operators" or target == "operators":
                continue
            target = exports.get(target.removeprefix("operators."), target) if target.count(".") == 1 else target
            while target and target not in known:  # operators.x.y.Name -> operators.x.y
                target = target.rpartition(".")[0]
            if target and target != name:
                inside[name].add(target)
    return inside, outside


def part(module: str) -> str:
    """``operators.training.spec`` -> ``training``; ``operators`` (the facade) -> ``""``."""
    return module.split(".")[1] if "." in module else ""


GRAPH, OUTSIDE = import_graph()


def test_every_module_has_a_layer():
    assert {part(m) for m in GRAPH} - {""} <= set(LAYER), "a new top-level module needs a place in LAYER"


def test_the_graph_is_read_whole():
    """Imports inside functions count (they are how a light module defers a heavy one, not an exemption), and
    a name imported through the facade is an edge to where it lives."""
    assert facade_exports()["TrainingJobOperator"] == "operators.training.operator"
    assert "operators.settings" in GRAPH["operators.platform"]          # from operators import settings
    # operators.k8s.connection is imported only inside TrainingJobOperator.poll_until_complete
    assert "operators.k8s.connection" in GRAPH["operators.training.operator"]
    assert len(GRAPH) >= 60 and sum(map(len, GRAPH.values())) >= 200


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_operators():
    assert cycles(GRAPH) == []


def test_layers_point_one_way():
    upward = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() for t in targets
                    if part(m) and LAYER[part(t)] > LAYER[part(m)])
    assert upward == []


@pytest.mark.parametrize("feature", FEATURES)
def test_a_feature_imports_no_sibling_and_not_the_ui(feature):
    crossing = sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if part(m) == feature for t in targets
                      if part(t) in (*FEATURES, "ui") and part(t) != feature)
    assert crossing == []


def test_platform_imports_no_feature():
    assert sorted(f"{m} -> {t}" for m, targets in GRAPH.items() if LAYER.get(part(m)) == 2 for t in targets
                  if LAYER[part(t)] > 2) == []


def test_only_the_access_layer_imports_the_kubernetes_client():
    found = {(m, t) for m, targets in OUTSIDE.items() if part(m) != "k8s" for t in targets
             if t.split(".")[0] in CLIENT_PACKAGES and not t.startswith(CLIENT_ALLOWED)}
    assert found - CLIENT_EXCEPTIONS == set()
    assert CLIENT_EXCEPTIONS - found == set(), "an exception that no longer applies: remove it from the list"
