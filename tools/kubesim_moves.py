"""The kubesim-by-job move (issue 34): old module -> new module, and a rewriter for imports, dotted strings and
paths. Idempotent: running it again on a tree (or a branch made before the move) rewrites only old names.

    python tools/kubesim_moves.py --move      # git mv the files (once), then rewrite
    python tools/kubesim_moves.py             # rewrite references only
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MOVES: dict[str, str] = {
    # apimachinery: what every layer shares
    "errors": "apimachinery.errors",
    "names": "apimachinery.names",
    "selectors": "apimachinery.selectors",
    "resources": "apimachinery.resources",
    "clock": "apimachinery.clock",
    "gojson": "apimachinery.gojson",
    "fielderrors": "apimachinery.fielderrors",
    "mergekeys": "apimachinery.mergekeys",
    "qos": "apimachinery.qos",
    # apiserver/storage: etcd and the watch cache
    "storage": "apiserver.storage.storage",
    "watchcache": "apiserver.storage.watchcache",
    "watch": "apiserver.storage.watch",
    # apiserver/registry: the generic store and per-kind strategies
    "registry": "apiserver.registry.kinds",
    "store": "apiserver.registry.store",
    "strategy": "apiserver.registry.strategy",
    "patch": "apiserver.registry.patch",
    "apply": "apiserver.registry.apply",
    "namespaces": "apiserver.registry.namespaces",
    "crds": "apiserver.registry.crds",
    "objectmeta": "apiserver.registry.objectmeta",
    "deletion": "apiserver.registry.deletion",
    "viewstore": "apiserver.registry.viewstore",
    "views": "apiserver.registry.views",
    # apiserver/admission
    "validation": "apiserver.admission.validation",
    "defaults": "apiserver.admission.defaults",
    "builtin_schema": "apiserver.admission.builtin_schema",
    "kindvalidation": "apiserver.admission.kindvalidation",
    "crschema": "apiserver.admission.crschema",
    "quota": "apiserver.admission.resourcequota",
    "serviceaccounts": "apiserver.admission.serviceaccount",
    # apiserver/auth
    "authz": "apiserver.auth.authz",
    "rbac": "apiserver.auth.rbac",
    "access_review": "apiserver.auth.access_review",
    # apiserver/endpoints: HTTP
    "app": "apiserver.endpoints.app",
    "wire": "apiserver.endpoints.wire",
    "routes_discovery": "apiserver.endpoints.routes_discovery",
    "routes_logs": "apiserver.endpoints.routes_logs",
    "routes_openapi": "apiserver.endpoints.routes_openapi",
    "routes_resources": "apiserver.endpoints.routes_resources",
    "routes_streams": "apiserver.endpoints.routes_streams",
    "streams_spdy": "apiserver.endpoints.streams_spdy",
    "spdy": "apiserver.endpoints.spdy",
    "printers": "apiserver.endpoints.printers",
    "printers_kinds": "apiserver.endpoints.printers_kinds",
    "openapi": "apiserver.endpoints.openapi",
    "openapi_proto": "apiserver.endpoints.openapi_proto",
    "proxy": "apiserver.endpoints.proxy",
    "field_validation": "apiserver.endpoints.field_validation",
    # controllers (kube-controller-manager and kube-scheduler)
    "controller": "controllers.framework",
    "scheduler": "controllers.scheduler",
    "gc": "controllers.gc",
    "bootstrap": "controllers.bootstrap",
    "workloads": "controllers.workloads",
    # kubelet
    "kubelet": "kubelet.kubelet",
    "podruns": "kubelet.podruns",
    "podstatus": "kubelet.podstatus",
    "podlogs": "kubelet.podlogs",
    "nodes": "kubelet.nodes",
    "procrt.network": "kubeproxy.services",   # kube-proxy's job, out of the runtime
    "procrt": "kubelet.procrt",
}
# the harness stays at the top: server, __main__, testing, controls, cluster, kubeconfig, tls, kueue/
PACKAGES = ["apimachinery", "apiserver", "apiserver.storage", "apiserver.registry", "apiserver.admission",
            "apiserver.auth", "apiserver.endpoints", "controllers", "kubelet", "kubeproxy"]
DOCSTRINGS = {
    "apimachinery": "What every layer shares: errors, names, selectors, quantities, time (k8s.io/apimachinery).",
    "apiserver": "kube-apiserver: storage, registry, admission, authentication and authorization, HTTP endpoints.",
    "apiserver.storage": "kubesim's etcd and the watch cache (k8s.io/apiserver/pkg/storage).",
    "apiserver.registry": "The generic registry store and the per-kind strategies (k8s.io/apiserver/pkg/registry).",
    "apiserver.admission": "Admission: validation, defaulting, schemas and the admission plugins.",
    "apiserver.auth": "Authentication, RBAC authorization and the access reviews.",
    "apiserver.endpoints": "The HTTP side of the API server: routes, wire format, printers, OpenAPI, streams, proxy.",
    "controllers": "kube-controller-manager and kube-scheduler: the controller framework and each controller.",
    "kubelet": "The kubelet: the scripted kubelet, the process runtime (procrt), pod status and logs.",
    "kubeproxy": "kube-proxy: Services on the host's loopback for process pods.",
}
NEW_SUBMODULES = {"kubelet": {"kubelet", "podruns", "podstatus", "podlogs", "nodes", "procrt"}}

_ORDER = sorted(MOVES, key=len, reverse=True)
_ALT = "|".join(re.escape(k) for k in _ORDER)
# `kubesim.kubelet` is both an old module and a new package: don't touch `kubesim.kubelet.<new submodule>`;
# `kubesim.store.watch_count` is a `kubesim` fixture's store (the old module had no lowercase public names)
_DOTTED = re.compile(r"\bkubesim\.(?!store\.[a-z_])(" + _ALT + r")\b(?!\.(?:kubelet|podruns|podstatus|podlogs|nodes|procrt)\b)")
_PATHS = re.compile(r"\bkubesim/(" + "|".join(re.escape(k.replace(".", "/")) for k in _ORDER) + r")(\.py\b|/|\b)")
_FROM_PKG = re.compile(r"^(\s*)from kubesim import (\(?)([^\n()]+?)(\)?)\s*(#.*)?$", re.M)
_FROM_KUBELET = re.compile(r"^(\s*)from kubesim\.kubelet import ([^\n]+)$", re.M)


def _dotted(m: re.Match) -> str:
    return "kubesim." + MOVES[m.group(1)]


def _path(m: re.Match) -> str:
    old = m.group(1).replace("/", ".")
    return "kubesim/" + MOVES[old].replace(".", "/") + m.group(2)


def _from_pkg(m: re.Match) -> str:
    indent, names, comment = m.group(1), m.group(3), m.group(5)
    kept, moved = [], []
    for part in [p.strip() for p in names.split(",") if p.strip()]:
        name, _, alias = part.partition(" as ")
        name = name.strip()
        if name in MOVES:
            parent, _, leaf = MOVES[name].rpartition(".")
            as_ = alias.strip() or (name if leaf != name else "")
            moved.append(f"{indent}from kubesim.{parent} import {leaf}" + (f" as {as_}" if as_ and as_ != leaf else ""))
        else:
            kept.append(part)
    if not moved:
        return m.group(0)
    lines = ([f"{indent}from kubesim import {', '.join(kept)}"] if kept else []) + moved
    if comment:
        lines[0] += "  " + comment
    return "\n".join(lines)


def _from_kubelet(m: re.Match) -> str:
    names = [p.strip().split(" as ")[0].strip() for p in m.group(2).strip("() ").split(",") if p.strip()]
    if names and all(n in NEW_SUBMODULES["kubelet"] for n in names):
        return m.group(0)                      # already the new package
    return f"{m.group(1)}from kubesim.kubelet.kubelet import {m.group(2)}"


def rewrite(text: str, *, python: bool) -> str:
    if python:
        text = _FROM_PKG.sub(_from_pkg, text)
        text = _FROM_KUBELET.sub(_from_kubelet, text)
        # `from kubesim.kubelet import x` was handled above; keep _DOTTED off those lines
        out = []
        for line in text.split("\n"):
            if re.match(r"\s*from kubesim\.kubelet import ", line):
                out.append(line)
            else:
                out.append(_DOTTED.sub(_dotted, line))
        text = "\n".join(out)
    else:
        text = _DOTTED.sub(_dotted, text)
    return _PATHS.sub(_path, text)


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    skip = ("tools/kubesim_moves.py",)
    return [ROOT / f for f in out.splitlines()
            if f not in skip and f.rsplit(".", 1)[-1] in {"py", "md", "toml", "cfg", "ini", "txt", "yaml", "yml", "sh"}
            or f in ("Makefile", ".ci/run", "Dockerfile")]


def move() -> None:
    for pkg in PACKAGES:
        d = ROOT / "kubesim" / pkg.replace(".", "/")
        d.mkdir(parents=True, exist_ok=True)
        init = d / "__init__.py"
        if not init.exists():
            init.write_text(f'"""{DOCSTRINGS[pkg]}"""\n')
            subprocess.run(["git", "add", str(init)], cwd=ROOT, check=True)
    for old in _ORDER:
        src = ROOT / "kubesim" / (old.replace(".", "/") + ("" if old in ("workloads", "procrt") else ".py"))
        dst = ROOT / "kubesim" / (MOVES[old].replace(".", "/") + ("" if old in ("workloads", "procrt") else ".py"))
        if src.exists() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", str(src), str(dst)], cwd=ROOT, check=True)


def main(argv: list[str]) -> int:
    if "--move" in argv:
        move()
    changed = 0
    for f in tracked_files():
        if not f.exists():
            continue
        old = f.read_text()
        new = rewrite(old, python=f.suffix == ".py")
        if new != old:
            f.write_text(new)
            changed += 1
    print(f"rewrote {changed} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
