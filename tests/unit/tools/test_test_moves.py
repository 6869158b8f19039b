"""tools/test_moves.py: every file under tests/ has a place in the layout by kind, and applying the plan to a copy
moves every file, rewrites every name of a moved module and path, and changes nothing the second time."""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("test_moves", REPO / "tools" / "test_moves.py")
tm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tm)


def test_every_file_under_tests_has_a_place():
    moves, unmapped = tm.plan(REPO)
    assert unmapped == [], f"give these a place in tools/test_moves.py (AREAS, UNIT or E2E): {unmapped}"
    if not moves:
        pytest.skip("the plan is applied: tools/test_moves.py and this file can go")


def test_explicit_entries_name_files_that_exist():
    stale = [f for f in [*tm.UNIT, *tm.E2E] if not (REPO / f).exists() and not (REPO / tm.destination(f)).exists()]
    assert stale == []


def test_the_destinations_follow_the_layout():
    moves, _ = tm.plan(REPO)
    for old, new in moves.items():
        kind = PurePosixPath(new).parts[1]
        assert kind in ("unit", "integration", "e2e", "support"), (old, new)
        if kind != "support":
            assert PurePosixPath(new).name.startswith("test_") and new.endswith(".py"), (old, new)
        if kind == "unit":   # mirrors the source: tests/unit/<package>/<subpackage>/ is a folder of the repository
            source_dir = REPO.joinpath(*PurePosixPath(new).parts[2:-1])
            assert source_dir.is_dir(), f"{new}: no source folder {source_dir.relative_to(REPO)}"
    # a test file of the e2e folder is one that starts Airflow: the same files the `stack` marker selects
    e2e = {o for o, n in moves.items() if n.startswith("tests/e2e/")}
    assert "tests/ui/test_page_api.py" in e2e and "tests/training/test_training_e2e.py" in e2e
    assert not any(n.startswith("tests/e2e/") for o, n in moves.items() if o in tm.UNIT)


def test_the_rewriter_follows_imports_paths_and_depths():
    moves = {"tests/sedna/sedna_helpers.py": "tests/support/sedna/sedna_helpers.py",
             "tests/sedna/conftest.py": "tests/support/sedna/fixtures.py",
             "tests/kubesim/kueue_tables.py": "tests/support/kubesim/kueue_tables.py",
             "tests/kubesim/test_api_process.py": "tests/integration/kubesim/test_api_process.py",
             "tests/training/training_support.py": "tests/support/training/training_support.py",
             "tests/training/test_training_resume.py": "tests/integration/training/test_training_resume.py",
             "tests/training/test_training_manifest.py": "tests/unit/operators/training/test_manifest.py",
             "tests/hostile/hostile_servers.py": "tests/support/hostile/hostile_servers.py"}
    rw = tm.Rewriter(moves, list(moves.values()))
    py = ("from sedna_helpers import NS, model\n"
          "import hostile_servers  # the servers\n"
          "from tests.kubesim import kueue_tables as t\n"
          "from tests.sedna.conftest import kube\n"
          "    from tests.kubesim.test_api_process import start_process\n")
    assert rw.text(py, python=True, in_tests=True) == (
        "from tests.support.sedna.sedna_helpers import NS, model\n"
        "from tests.support.hostile import hostile_servers  # the servers\n"
        "from tests.support.kubesim import kueue_tables as t\n"
        "from tests.support.sedna.fixtures import kube\n"
        "    from tests.integration.kubesim.test_api_process import start_process\n")
    doc = "see tests/training/test_training_manifest.py and tests/hostile/ (not tests/training/x or tests/unit/y)"
    assert rw.text(doc, python=False, in_tests=False) == (
        "see tests/unit/operators/training/test_manifest.py and tests/hostile/ (not tests/training/x or tests/unit/y)")
    moved = ('REPO = Path(__file__).resolve().parents[2]\nHERE = Path(__file__).parent\n'
             'SUPPORT = Path(__file__).with_name("training_support.py")\n'
             'ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n')
    assert rw.moved_file("tests/training/test_training_resume.py",
                         "tests/integration/training/test_training_resume.py", moved) == (
        'REPO = Path(__file__).resolve().parents[3]\nHERE = Path(__file__).parent\n'
        'SUPPORT = Path(__file__).resolve().parents[3] / "tests/support/training/training_support.py"\n'
        'ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))\n')


@pytest.fixture(scope="module")
def applied(tmp_path_factory):
    """A copy of the tests and of every file that names them, with the plan applied (no git: files renamed)."""
    root = tmp_path_factory.mktemp("moved")
    for name in ("tests", "docs", "tools", "deploy", "devstack", "kubesim"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
    for name in ("Makefile", "pyproject.toml", "README.md", "requirements-dev.txt"):
        shutil.copy(REPO / name, root / name)
    moves, _ = tm.plan(root)
    tm.apply(root, git=False)
    return root, moves


def test_applying_moves_every_file_and_leaves_no_old_import(applied):
    root, moves = applied
    assert [o for o in moves if (root / o).exists()] == []
    assert [n for n in moves.values() if not (root / n).exists()] == []
    bare = {PurePosixPath(o).stem for o in moves if o.endswith(".py") and PurePosixPath(o).name != "conftest.py"}
    left = []
    for f in (root / "tests").rglob("*.py"):
        if f.name == Path(__file__).name:    # this file's examples
            continue
        for line in f.read_text().splitlines():
            words = line.split()
            if words[:1] in (["from"], ["import"]) and len(words) > 1 and words[1] in bare:
                left.append(f"{f.relative_to(root)}: {line.strip()}")
    assert left == []
    old_dotted = {o[:-3].replace("/", ".") for o in moves if o.endswith(".py")}
    text = "\n".join(f.read_text() for f in (root / "tests").rglob("*.py") if f.name != Path(__file__).name)
    assert [d for d in old_dotted if f"{d} " in text or f"{d}\n" in text] == []
    # every test folder that took tests of an area with fixtures imports them
    assert "tests.support.kubesim.fixtures" in (root / "tests/integration/kubesim/conftest.py").read_text()
    assert (root / "tests/unit/operators/training/__init__.py").exists()


def test_applying_twice_changes_nothing(applied):
    root, _ = applied
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    moves, unmapped = tm.plan(root)
    assert (moves, unmapped) == ({}, [])
    tm.apply(root, git=False)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
