"""kubesim's import graph, read from its source with `ast` (function-level and `TYPE_CHECKING` imports
included, since they are imports all the same): no module imports itself back through others, and the
layers point one way, as kube-apiserver's do (storage and the watch cache under the generic registry and
the per-kind strategies, admission and the controllers above them, the HTTP handlers and the process on top).

A new module goes into LAYERS (a subpackage's modules take its layer); one left out is still checked for
cycles.
"""
from __future__ import annotations

import ast
from pathlib import Path

import kubesim
from devstack.import_graph import cycles

PACKAGE = Path(kubesim.__file__).parent

# lowest first: a module may import its own layer and those below, never one above
LAYERS: list[tuple[str, set[str]]] = [
    ("base", {"errors", "clock", "names", "registry", "resources", "mergekeys", "nodes", "qos", "selectors",
              "rbac", "views", "wire", "kubeconfig", "fielderrors", "gojson", "tls", "openapi", "openapi_proto",
              "printers", "printers_kinds", "field_validation", "spdy"}),
    ("storage", {"apply", "patch", "watch", "storage", "watchcache"}),
    ("registry", {"objectmeta", "deletion", "namespaces", "crds", "strategy", "viewstore", "store"}),
    ("admission and controllers", {"controller", "validation", "defaults", "builtin_schema", "kindvalidation",
                                   "crschema", "quota", "serviceaccounts", "scheduler", "kubelet", "podruns",
                                   "podstatus", "podlogs", "procrt", "gc", "workloads", "kueue", "bootstrap"}),
    ("cluster", {"cluster"}),
    ("http", {"controls", "proxy", "routes_streams", "streams_spdy", "routes_discovery", "routes_logs", "routes_resources", "routes_openapi", "access_review", "authz",
              "app"}),
    ("process", {"server", "testing", "__main__", "__init__"}),
]


def module_name(path: Path) -> str:
    """`store`, `strategies.pod`, `strategies` (its __init__.py); the package's own __init__ is `__init__`."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, known: set[str]) -> set[str]:
    """The kubesim modules `path` imports, anywhere in the file (names relative to the package)."""
    this = module_name(path)
    package = list(path.relative_to(PACKAGE).parent.parts)     # what a relative import starts from
    out: set[str] = set()

    def add(dotted: str) -> None:
        # `kubesim.a.b` -> "a.b"; a name that is not a module (a class, a function) -> its module
        rel = dotted.removeprefix("kubesim").lstrip(".") or "__init__"
        while rel not in known and "." in rel:
            rel = rel.rsplit(".", 1)[0]
        if rel in known:
            out.add(rel)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "kubesim" or alias.name.startswith("kubesim."):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                module = ".".join(["kubesim", *base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module != "kubesim" and not module.startswith("kubesim."):
                continue
            for alias in node.names:
                add(f"{module}.{alias.name}")
    out.discard(this)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imported(path, known) for name, path in mods.items()}


def test_the_graph_sees_every_kind_of_import():
    """The reader itself: top-level, `from kubesim import x`, function-level and TYPE_CHECKING imports all count."""
    g = graph()
    assert "errors" in g["wire"]                       # from kubesim.errors import ApiError
    assert {"gc", "kubelet", "workloads"} <= g["cluster"]   # from kubesim import gc, kubelet, ...
    assert "cluster" in g["server"]                    # imported inside a function
    assert g["errors"] == set()


def test_kubesim_has_no_import_cycle():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_point_one_way():
    named = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
    mods = modules()
    assert set(named) - set(mods) == set(), "LAYERS names a module that does not exist"
    rank = {m: named[m.split(".")[0]] for m in mods if m.split(".")[0] in named}
    upward = sorted(f"{a} ({LAYERS[rank[a]][0]}) imports {b} ({LAYERS[rank[b]][0]})"
                    for a, deps in graph().items() if a in rank
                    for b in deps if b in rank and rank[b] > rank[a])
    assert upward == []
