"""Tests by kind (issue 34): every file under tests/ -> its place in the new layout, and a rewriter for what names
test files (imports between test modules, conftests and helpers, paths in docs, the Makefile and pyproject).

    python tools/test_moves.py            # show the plan (old -> new, by rule or by exception); changes nothing
    python tools/test_moves.py --check    # exit 1 if a file under tests/ has no destination
    python tools/test_moves.py --apply    # git mv the files, write conftest shims and __init__.py, rewrite references

The layout (docs/development.md, "Tests by kind"):

    tests/unit/<package>/.../test_<module>.py   one module's tests: no server, no process, no Airflow DB
    tests/integration/<area>/test_*.py          parts together: kubesim over HTTP, real processes, dag.test() on
                                                 the SQLite DB, promtool/kubectl, the repository's own checks
    tests/e2e/<area>/test_*.py                  Airflow stacks (marker `stack`): standalone, prod, the demo
    tests/support/<area>/                       what an area's tests share: helper modules, fixtures.py (its old
                                                 conftest.py) and data; each folder holding tests of the area gets a
                                                 conftest.py that imports those fixtures
    tests/conftest.py, tests/e2e_dags/          unchanged

Rules, in order: a path under tests/unit/, tests/integration/, tests/e2e/ or tests/support/ is already in place; an
entry of UNIT (explicit: which module a test file is about) goes there; a test file named *_e2e.py or
*_in_browser.py, or listed in E2E, goes to tests/e2e/<area>/; any other test_*.py of a known AREA goes to
tests/integration/<area>/; an area's conftest.py goes to tests/support/<area>/fixtures.py and any other file of it
(helper modules, data) to tests/support/<area>/. A file matching none of them (a new top-level folder) is unmapped:
--check and --apply refuse until it is given a place here.

Idempotent: a second --apply (or one on a branch already moved) moves nothing and rewrites only old names left.
Test packages: every folder under tests/unit, integration, e2e and support gets an __init__.py (and tests/ one), so
two test_<module>.py of the same name in different packages (test_naming.py of training and of devinstances) do not
clash in pytest's default import mode, and helpers are imported by their full name (`tests.support.sedna...`)
instead of through the sys.path entry pytest adds for a test's own folder.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]

# the folders under tests/ whose files the rules place (a new one needs adding here: until then it is unmapped)
AREAS = {"architecture", "deploy", "devinstances", "devstack", "docs", "hostile", "k8s", "kubesim", "metrics",
         "platform", "rbac", "sedna", "settings", "teams", "training", "ui"}
IN_PLACE = ("tests/unit/", "tests/integration/", "tests/e2e/", "tests/support/", "tests/e2e_dags/")
KEEP = {"tests/conftest.py", "tests/__init__.py"}

# Unit tests: one module (or one package's pure part), no server or process. Named after the module they test, in
# the folder mirroring the source (as the Airflow providers' tests/unit/<provider>/<package>/test_<module>.py).
UNIT = {
    "tests/benchmarks/test_ui_bench_setup.py": "tests/unit/benchmarks/test_ui.py",
    "tests/devinstances/test_devinstance_spec.py": "tests/unit/operators/devinstances/test_spec.py",
    "tests/devstack/test_stack_scripted_nodes.py": "tests/unit/devstack/test_stack.py",
    "tests/k8s/test_k8s_retry.py": "tests/unit/operators/k8s/test_retry.py",
    "tests/kubesim/test_api_properties.py": "tests/unit/kubesim/apiserver/test_properties.py",
    "tests/kubesim/test_cluster_workqueue.py": "tests/unit/kubesim/controllers/test_framework.py",
    "tests/kubesim/test_kueue_cycle.py": "tests/unit/kubesim/kueue/test_cycle.py",
    "tests/kubesim/test_procrt_pure.py": "tests/unit/kubesim/kubelet/procrt/test_procrt_pure.py",
    "tests/metrics/test_metrics_cluster.py": "tests/unit/operators/exporter/test_cluster.py",
    "tests/metrics/test_metrics_events.py": "tests/unit/operators/metrics/test_catalogue.py",
    "tests/platform/test_admission_decision.py": "tests/unit/operators/platform/test_admission.py",
    "tests/platform/test_admission_kueue.py": "tests/unit/operators/platform/test_admission_kueue.py",
    "tests/platform/test_platform_file.py": "tests/unit/operators/platform/test_loader.py",
    "tests/platform/test_platform_rules.py": "tests/unit/operators/platform/test_rules.py",
    "tests/rbac/test_rbac_templates.py": "tests/unit/operators/test_rbac.py",
    "tests/sedna/test_sedna_desired.py": "tests/unit/operators/sedna/test_desired.py",
    "tests/sedna/test_sedna_plan.py": "tests/unit/operators/sedna/test_plan.py",
    "tests/training/test_training_alert_compose.py": "tests/unit/operators/training/test_alerts.py",
    "tests/training/test_training_failure.py": "tests/unit/operators/training/test_failure.py",
    "tests/training/test_training_kueue.py": "tests/unit/operators/training/test_kueue.py",
    "tests/training/test_training_manifest.py": "tests/unit/operators/training/test_manifest.py",
    "tests/training/test_training_templating.py": "tests/unit/operators/test_templating.py",
    "tests/training/test_training_waiting.py": "tests/unit/operators/training/test_waiting.py",
    "tests/training/test_training_waiting_kueue.py": "tests/unit/operators/training/test_waiting_kueue.py",
    "tests/ui/test_heap.py": "tests/unit/operators/ui/test_heap.py",
    "tests/ui/test_i18n.py": "tests/unit/operators/ui/test_i18n.py",
    "tests/ui/test_idle_times.py": "tests/unit/operators/ui/test_idle_times.py",
    "tests/ui/test_plugin.py": "tests/unit/operators/ui/test_plugin.py",
    "tests/ui/test_views.py": "tests/unit/operators/ui/test_views.py",
}
# Stack tests whose name does not say so (the rule takes *_e2e.py and *_in_browser.py)
E2E = {
    "tests/devstack/test_demo_dashboard.py",   # runs the demo
    "tests/ui/test_page_api.py",               # a real airflow api-server (fixture api_server)
    "tests/ui/test_page_gpu_resource.py",      # the same, with a TPU platform file (fixture tpu_server)
}
# Path pieces a moved file joins onto a parent folder by hand (not `tests/...` strings): old -> new
JOINS = [('/ "sedna" / "samples"', '/ "support" / "sedna" / "samples"')]


def destination(rel: str) -> str | None:
    """Where `rel` (a path under tests/, posix) goes; itself when in place; None when unmapped."""
    if rel in KEEP or rel.startswith(IN_PLACE):
        return rel
    if rel in UNIT:
        return UNIT[rel]
    parts = PurePosixPath(rel).parts
    if len(parts) < 3 or parts[0] != "tests" or parts[1] not in AREAS:
        return None
    area, rest, name = parts[1], "/".join(parts[2:]), parts[-1]
    if len(parts) == 3 and name.startswith("test_") and name.endswith(".py"):
        kind = "e2e" if rel in E2E or name.endswith(("_e2e.py", "_in_browser.py")) else "integration"
        return f"tests/{kind}/{area}/{name}"
    if rest == "conftest.py":
        return f"tests/support/{area}/fixtures.py"
    return f"tests/support/{area}/{rest}"


def test_files(root: Path) -> list[str]:
    """Every file under tests/ (tracked or not: a test added and not yet committed is placed too)."""
    return sorted(p.relative_to(root).as_posix() for p in (root / "tests").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"))


def plan(root: Path) -> tuple[dict[str, str], list[str]]:
    """(old -> new for every file that moves, unmapped files)."""
    moves, unmapped = {}, []
    for rel in test_files(root):
        new = destination(rel)
        if new is None:
            unmapped.append(rel)
        elif new != rel:
            moves[rel] = new
    targets = list(moves.values())
    dups = {t for t in targets if targets.count(t) > 1}
    if dups:
        raise SystemExit(f"two files would move to the same place: {sorted(dups)}")
    return moves, unmapped


def _dotted(rel: str) -> str:
    return rel[:-3].replace("/", ".")


def _depth(rel: str) -> int:
    """Folders between the repository and the file: tests/x/f.py -> 2 (Path(__file__).parents[2] is the repo)."""
    return len(PurePosixPath(rel).parts) - 1


class Rewriter:
    """The name and path changes of one plan, applied to a file's text."""

    def __init__(self, moves: dict[str, str], all_after: list[str]):
        self.moves = moves
        py = {o: n for o, n in moves.items() if o.endswith(".py")}
        self.dotted = {_dotted(o): _dotted(n) for o, n in py.items()}
        # bare imports (pytest's sys.path entry for a test's folder): the module's last name, when unique
        names: dict[str, list[str]] = {}
        for o, n in py.items():
            if PurePosixPath(o).name != "conftest.py":
                names.setdefault(PurePosixPath(o).stem, []).append(_dotted(n))
        self.bare = {k: v[0] for k, v in names.items() if len(v) == 1}
        alt = "|".join(re.escape(k) for k in sorted(self.dotted, key=len, reverse=True))
        self._dotted_re = re.compile(r"(?<![\w.])(" + alt + r")\b") if alt else None
        balt = "|".join(re.escape(k) for k in sorted(self.bare, key=len, reverse=True))
        self._from_bare = re.compile(r"^(\s*)from (" + balt + r") import ", re.M) if balt else None
        self._import_bare = re.compile(r"^(\s*)import (" + balt + r")(\s*(?:#.*)?)$", re.M) if balt else None
        # paths: files, then folders all of whose files go to one folder
        self.paths = dict(moves)
        folders: dict[str, set[str]] = {}
        for o, n in moves.items():     # a folder named is where its test files went (helpers are not its point)
            if PurePosixPath(o).name.startswith("test_") or not o.endswith(".py"):
                folders.setdefault(str(PurePosixPath(o).parent), set()).add(str(PurePosixPath(n).parent))
        after_dirs = {str(PurePosixPath(f).parent) for f in all_after}
        self.folders = {o: next(iter(n)) for o, n in folders.items() if len(n) == 1 and o not in after_dirs}
        self.split_folders = sorted(o for o, n in folders.items() if len(n) > 1 or o in after_dirs)
        palt = "|".join(re.escape(k) for k in sorted(self.paths, key=len, reverse=True))
        self._path_re = re.compile(r"(?<![\w/.-])(" + palt + r")(?![\w/])") if palt else None
        falt = "|".join(re.escape(k) for k in sorted(self.folders, key=len, reverse=True))
        self._folder_re = re.compile(r"(?<![\w/.-])(" + falt + r")(?![\w-])") if falt else None
        salt = "|".join(re.escape(k) for k in self.split_folders)
        self._split_re = re.compile(r"(?<![\w/.-])(" + salt + r")(?![\w])") if salt else None

    def text(self, text: str, *, python: bool, in_tests: bool) -> str:
        if python and in_tests and self._from_bare:
            text = self._from_bare.sub(lambda m: f"{m.group(1)}from {self.bare[m.group(2)]} import ", text)
            text = self._import_bare.sub(self._import_line, text)
        if python:     # `from tests.kubesim import kueue_tables as t`: the module is the last name
            text = self._FROM_PKG.sub(self._from_pkg, text)
        if self._dotted_re:
            text = self._dotted_re.sub(lambda m: self.dotted[m.group(1)], text)
        if self._path_re:
            text = self._path_re.sub(lambda m: self.paths[m.group(1)], text)
        if self._folder_re:
            text = self._folder_re.sub(lambda m: self.folders[m.group(1)], text)
        return text

    _FROM_PKG = re.compile(r"^(\s*)from (tests(?:\.\w+)*) import ([\w ,]+?)(\s*(?:#.*)?)$", re.M)

    def _from_pkg(self, m: re.Match) -> str:
        indent, pkg, names, tail = m.groups()
        lines, kept = [], []
        for part in [p.strip() for p in names.split(",") if p.strip()]:
            name, _, alias = part.partition(" as ")
            new = self.dotted.get(f"{pkg}.{name.strip()}")
            if new is None:
                kept.append(part)
            else:
                parent, _, leaf = new.rpartition(".")
                lines.append(f"{indent}from {parent} import {leaf}" + (f" as {alias.strip()}" if alias else ""))
        if not lines:
            return m.group(0)
        lines = ([f"{indent}from {pkg} import {', '.join(kept)}"] if kept else []) + lines
        lines[0] += tail
        return "\n".join(lines)

    def _import_line(self, m: re.Match) -> str:
        pkg, _, leaf = self.bare[m.group(2)].rpartition(".")
        return f"{m.group(1)}from {pkg} import {leaf}{m.group(3)}"

    def split_mentions(self, text: str) -> list[str]:
        """Mentions of a folder whose files went to several places: a person rewrites those."""
        return sorted({m.group(1) for m in self._split_re.finditer(text)}) if self._split_re else []

    def moved_file(self, old: str, new: str, text: str) -> str:
        """What changes inside a file because it now sits at another depth: Path(__file__).parents[k] and
        os.path.dirname chains that reach tests/ or above, and siblings it named that went elsewhere."""
        delta = _depth(new) - _depth(old)
        below = _depth(old) - 1          # parents[k] with k >= below points at tests/ or higher

        def parents(m: re.Match) -> str:
            k = int(m.group(2))
            return m.group(0) if k < below else f"{m.group(1)}parents[{k + delta}]"
        text = re.sub(r"(Path\(__file__\)(?:\.resolve\(\))?\.)parents\[(\d+)\]", parents, text)

        def dirnames(m: re.Match) -> str:
            n = m.group(1).count("os.path.dirname(")
            if n < _depth(old):
                return m.group(0)
            n += delta
            return "os.path.dirname(" * n + "os.path.abspath(__file__)" + ")" * n
        text = re.sub(r"((?:os\.path\.dirname\()+)os\.path\.abspath\(__file__\)\)+", dirnames, text)
        if delta and below > 0:
            # `Path(__file__).parent` only ever reaches the old folder: a sibling named there that moved elsewhere
            old_dir = str(PurePosixPath(old).parent)

            def sibling(m: re.Match) -> str:
                target = f"{old_dir}/{m.group(2)}"
                dest = self.moves.get(target)
                if not dest or PurePosixPath(dest).parent == PurePosixPath(new).parent:
                    return m.group(0)
                return f'Path(__file__).resolve().parents[{_depth(new)}] / "{dest}"'
            text = re.sub(r'Path\(__file__\)(\.resolve\(\))?\.with_name\("([\w.]+)"\)', sibling, text)
        for a, b in JOINS:
            if b not in text:
                text = text.replace(a, b)
        return text


def _fixture_names(path: Path) -> set[str]:
    """Top-level fixture functions of a fixtures module (to refuse two areas' conftests sharing a name)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in node.decorator_list:
                src = ast.unparse(d)
                if "fixture" in src:
                    names.add(node.name)
    return names


def shims(moves: dict[str, str], root: Path) -> dict[str, str]:
    """folder -> conftest.py text importing the fixtures of every area whose tests now sit in that folder."""
    areas_by_dir: dict[str, set[str]] = {}
    for old, new in moves.items():
        name = PurePosixPath(new).name
        if name.startswith("test_") and not new.startswith("tests/support/"):
            areas_by_dir.setdefault(str(PurePosixPath(new).parent), set()).add(PurePosixPath(old).parts[1])
    out = {}
    for folder, areas in sorted(areas_by_dir.items()):
        have = sorted(a for a in areas if f"tests/{a}/conftest.py" in moves
                      or (root / f"tests/support/{a}/fixtures.py").exists())
        if not have:
            continue
        seen: dict[str, str] = {}
        for a in have:
            src = root / f"tests/{a}/conftest.py"
            src = src if src.exists() else root / f"tests/support/{a}/fixtures.py"
            for n in _fixture_names(src):
                if n in seen:
                    raise SystemExit(f"{folder}: fixture {n!r} is defined by both {seen[n]} and {a}: map one of "
                                     f"their tests elsewhere")
                seen[n] = a
        lines = [f'"""The shared fixtures of the {", ".join(have)} tests (tests/support/<area>/fixtures.py)."""']
        lines += [f"from tests.support.{a}.fixtures import *  # noqa: F401,F403" for a in have]
        out[folder] = "\n".join(lines) + "\n"
    return out


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def rewrite_targets(root: Path) -> list[Path]:
    """The project's text files (git's list; every file under root when it is no git work tree, e.g. a copy)."""
    done = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True, text=True)
    if done.returncode == 0 and (root / ".git").exists():
        out = done.stdout
    else:
        out = "\n".join(p.relative_to(root).as_posix() for p in root.rglob("*")
                        if p.is_file() and not any(part.startswith(".") or part == "__pycache__"
                                                   for part in p.relative_to(root).parts))
    skip = {"tools/test_moves.py", "tools/kubesim_moves.py", "tests/unit/tools/test_test_moves.py"}
    return [root / f for f in out.splitlines()
            if f not in skip and (root / f).is_file()
            and (f.rsplit(".", 1)[-1] in {"py", "md", "toml", "cfg", "ini", "txt", "yaml", "yml", "sh"}
                 or f in ("Makefile", ".ci/run", "Dockerfile"))]


def apply(root: Path, *, git: bool = True) -> list[str]:
    """Move, write shims and __init__.py files, rewrite references. Returns notes for a person to review."""
    moves, unmapped = plan(root)
    if unmapped:
        raise SystemExit("unmapped files (give them a place in tools/test_moves.py):\n  " + "\n  ".join(unmapped))
    after = sorted({destination(f) for f in test_files(root)})
    rw = Rewriter(moves, after)
    shim_texts = shims(moves, root)
    for old, new in moves.items():
        src, dst = root / old, root / new
        text = src.read_text() if old.endswith(".py") else None
        dst.parent.mkdir(parents=True, exist_ok=True)
        if git:
            _git(root, "mv", old, new)
        else:
            src.rename(dst)
        if text is not None:
            dst.write_text(rw.moved_file(old, new, text))
    for folder, text in shim_texts.items():
        path = root / folder / "conftest.py"
        if not path.exists():
            path.write_text(text)
    init_dirs = {"tests"}
    for f in after + list(shim_texts):
        p = PurePosixPath(f)
        parts = p.parts if f in shim_texts else p.parent.parts
        if len(parts) > 1 and parts[1] in ("unit", "integration", "e2e", "support"):
            for i in range(2, len(parts) + 1):
                init_dirs.add("/".join(parts[:i]))
    for d in sorted(init_dirs):
        init = root / d / "__init__.py"
        if (root / d).is_dir() and not init.exists():
            init.write_text("")
    for d in sorted({str(PurePosixPath(o).parent) for o in moves}, key=len, reverse=True):
        p = root / d
        for cache in p.glob("__pycache__"):
            subprocess.run(["rm", "-rf", str(cache)], check=True)
        if p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    notes = []
    for f in rewrite_targets(root):
        old = f.read_text()
        rel = f.relative_to(root).as_posix()
        new = rw.text(old, python=f.suffix == ".py", in_tests=rel.startswith("tests/"))
        if new != old:
            f.write_text(new)
        for folder in rw.split_mentions(new):
            notes.append(f"{rel}: names {folder}/, whose files went to several folders")
    if git:
        _git(root, "add", "-A", "tests")
    return notes


def main(argv: list[str]) -> int:
    root = ROOT
    if "--root" in argv:
        root = Path(argv[argv.index("--root") + 1]).resolve()
    moves, unmapped = plan(root)
    if "--apply" in argv:
        notes = apply(root, git="--no-git" not in argv)
        print(f"moved {len(moves)} files")
        for n in notes:
            print("review:", n)
        return 0
    for old, new in moves.items():
        why = "UNIT" if old in UNIT else "E2E" if old in E2E else "rule"
        print(f"{old} -> {new}  [{why}]")
    for u in unmapped:
        print(f"UNMAPPED {u}")
    print(f"{len(moves)} to move, {len(unmapped)} unmapped")
    return 1 if unmapped else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
