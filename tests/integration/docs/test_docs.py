"""The README is a front door that stays true: short, its DAG example is a DAG Skiff accepts, and every link in
it and in docs/ leads somewhere that exists (a file, and a heading for ``#anchor`` links, slugged as GitHub
does)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGES = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_the_readme_is_short():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 150


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_leads_to_a_file_and_heading_that_exist(page):
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert broken == []


def test_the_slug_rule_above_can_fail():
    assert _slug("Skiff's page: how it is built and its API") == "skiffs-page-how-it-is-built-and-its-api"
    assert "no-such-heading" not in _anchors(REPO / "docs" / "reference.md")


def test_the_readme_shows_a_screenshot_of_the_page():
    (image,) = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (REPO / "README.md").read_text(encoding="utf-8"))
    assert (REPO / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_readme_dag_example_is_a_dag_skiff_accepts(tmp_path):
    """The example parses as written, the way the dag-processor parses a file: a DAG whose one task is a
    TrainingJobOperator in the team's namespace, with the owner's home PVC and the resources the README
    describes (the operator builds its spec at parse time, so bad input would be an import error here)."""
    from airflow.dag_processing.dagbag import DagBag

    from operators import TrainingJobOperator

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(code.strip().splitlines()) <= 15
    (tmp_path / "readme_example.py").write_text(code, encoding="utf-8")
    bag = DagBag(dag_folder=str(tmp_path))
    assert bag.import_errors == {} and list(bag.dags) == ["reco_daily"]
    (task,) = bag.dags["reco_daily"].tasks
    assert isinstance(task, TrainingJobOperator)
    spec = task.build_spec()
    assert (spec.namespace, task.owner, spec.pvc, spec.gpu, spec.online) == ("recsys", "alice", "alice-home", 1, True)
    assert (spec.cpu, spec.memory_gi) == ("4", "16")
