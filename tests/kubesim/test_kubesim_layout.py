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
    ("base", {"apimachinery.errors", "apimachinery.clock", "apimachinery.names", "apiserver.registry.kinds", "apimachinery.resources", "apimachinery.mergekeys", "kubelet.nodes", "apimachinery.qos", "apimachinery.selectors",
              "apiserver.auth.rbac", "apiserver.registry.views", "apiserver.endpoints.wire", "kubeconfig", "apimachinery.fielderrors", "apimachinery.gojson", "tls", "apiserver.endpoints.openapi", "apiserver.endpoints.openapi_proto",
              "apiserver.endpoints.printers", "apiserver.endpoints.printers_kinds", "apiserver.endpoints.field_validation", "apiserver.endpoints.spdy"}),
    ("storage", {"apiserver.registry.apply", "apiserver.registry.patch", "apiserver.storage.watch", "apiserver.storage.storage", "apiserver.storage.watchcache"}),
    ("registry", {"apiserver.registry.objectmeta", "apiserver.registry.deletion", "apiserver.registry.namespaces", "apiserver.registry.crds", "apiserver.registry.strategy", "apiserver.registry.viewstore", "apiserver.registry.store"}),
    ("admission and controllers", {"controllers.framework", "apiserver.admission.validation", "apiserver.admission.defaults", "apiserver.admission.builtin_schema", "apiserver.admission.kindvalidation",
                                   "apiserver.admission.crschema", "apiserver.admission.resourcequota", "apiserver.admission.serviceaccount", "controllers.scheduler", "kubelet.kubelet", "kubelet.podruns",
                                   "kubelet.podstatus", "kubelet.podlogs", "kubelet.procrt", "controllers.gc", "controllers.workloads", "kueue", "controllers.bootstrap"}),
    ("cluster", {"cluster"}),
    ("http", {"controls", "apiserver.endpoints.proxy", "apiserver.endpoints.routes_streams", "apiserver.endpoints.streams_spdy", "apiserver.endpoints.routes_discovery", "apiserver.endpoints.routes_logs", "apiserver.endpoints.routes_resources", "apiserver.endpoints.routes_openapi", "apiserver.auth.access_review", "apiserver.auth.authz",
              "apiserver.endpoints.app"}),
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
    assert "apimachinery.errors" in g["apiserver.endpoints.wire"]   # from kubesim.apimachinery.errors import ApiError
    assert {"controllers.gc", "kubelet.kubelet", "controllers.workloads"} <= g["cluster"]   # from kubesim.x import gc, ...
    assert "cluster" in g["server"]                    # imported inside a function
    assert g["apimachinery.errors"] == set()


def test_kubesim_has_no_import_cycle():
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_point_one_way():
    named = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
    mods = modules()
    assert set(named) - set(mods) == set(), "LAYERS names a module that does not exist"
    def layer(m: str) -> int | None:      # a module takes the layer of the longest LAYERS name it is under
        parts = m.split(".")
        for i in range(len(parts), 0, -1):
            if ".".join(parts[:i]) in named:
                return named[".".join(parts[:i])]
        return None
    rank = {m: layer(m) for m in mods if layer(m) is not None}
    upward = sorted(f"{a} ({LAYERS[rank[a]][0]}) imports {b} ({LAYERS[rank[b]][0]})"
                    for a, deps in graph().items() if a in rank
                    for b in deps if b in rank and rank[b] > rank[a])
    assert upward == []
