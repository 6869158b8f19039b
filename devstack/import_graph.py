"""A package's import graph read from its source with ``ast`` (what the layering tests of ``operators/`` and
kubesim check): every ``import`` statement counts, inside functions and ``TYPE_CHECKING`` blocks too, since
they are imports all the same; and the cycle finder both tests use.
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(root: Path, path: Path) -> str:
    """``<root>/operators/core/names.py`` -> ``operators.core.names``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path, package: str) -> dict[str, Path]:
    """Every module and package below ``<root>/<package>`` (a directory of modules without ``__init__.py`` is a
    namespace package: its path is the directory)."""
    top = root / package
    found = {module_name(root, d / "__init__.py"): d for d in [top, *top.rglob("*")]
             if d.is_dir() and any(d.glob("*.py"))}
    return found | {module_name(root, p): p for p in sorted(top.rglob("*.py"))}


def import_statements(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """(module, [module.name, ...]) per import in the file of module ``name``: ``import a.b`` -> ("a.b", []),
    ``from a import b`` -> ("a", ["a.b"]) (``b`` may be a submodule or a name); relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            out.append((base, [f"{base}.{alias.name}" for alias in node.names]))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
