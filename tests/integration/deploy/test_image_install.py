"""The Dockerfile's install steps, run for real in a clean venv (no Docker engine here): every file the
Dockerfile COPYs is staged at its image path under a temporary root, its RUN steps run there with the venv's
pip, and ``deploy/check_image.py`` then checks, from outside the checkout, that the DAGs import with no
errors, the plugins load, Skiff's triggers import by classpath (as the triggerer loads them) and neither
kubesim nor devstack was shipped."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#")))
    return [(m[0].upper(), m[1].strip()) for m in re.findall(r"^\s*(\w+)\s+(.*)$", joined, re.M)]


def test_dockerfile_is_pinned_non_root_and_ships_no_test_tools():
    steps = instructions(DOCKERFILE)
    base = [args for op, args in steps if op == "FROM"]
    assert base and all(re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:\w+)?", b) for b in base), base
    users = [args for op, args in steps if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    sources = [s for op, args in steps if op == "COPY" for s in shlex.split(args)[:-1] if not s.startswith("--")]
    assert not any(s.split("/")[0] in ("kubesim", "devstack", "tests", "benchmarks") for s in sources), sources
    requirements = (REPO / "requirements.txt").read_text().splitlines()
    pins = [r for r in requirements if r.strip() and not r.startswith("#")]
    assert pins and all("==" in r for r in pins), [r for r in pins if "==" not in r]


@pytest.fixture(scope="module")
def image_root(tmp_path_factory) -> Path:
    """The image's filesystem as far as Skiff's steps make it: COPYed files, then the RUN steps in a venv."""
    root = tmp_path_factory.mktemp("image")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("AIRFLOW")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    for op, args in instructions(DOCKERFILE):
        if op == "COPY":
            *sources, dest = [a for a in shlex.split(args) if not a.startswith("--")]
            target = root / dest.lstrip("/")
            for src in sources:
                path = REPO / src
                into = target / path.name if dest.endswith("/") else target
                into.parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if path.is_dir() else shutil.copy2)(path, into)
        elif op == "RUN":  # the image's absolute paths, under the staged root
            command = re.sub(r"(?<![\w.])/opt/", f"{root}/opt/", args)
            done = subprocess.run(["sh", "-c", command], env=env, cwd=root, capture_output=True, text=True)
            assert done.returncode == 0, f"RUN {args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return root


def check_image(image_root: Path, plugins_folder: Path) -> dict:
    """deploy/check_image.py's report, run with the image's venv from outside the checkout."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("AIRFLOW")}
    env.update({
        "AIRFLOW_HOME": str(image_root / "airflow-home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(image_root / "opt/airflow/dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    })
    done = subprocess.run([str(image_root / "venv/bin/python"), str(REPO / "deploy/check_image.py")],
                          env=env, cwd=image_root, capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, report
    return report


def test_image_install_imports_dags_plugins_and_triggers(image_root):
    report = check_image(image_root, image_root / "opt/airflow/plugins")
    assert report["dag_import_errors"] == {} and report["plugin_import_errors"] == {}
    assert {"reconcile_federated_learning", "reconcile_joint_inference",
            "training_recommendation_daily"} <= set(report["dag_ids"])
    # Skiff's plugin (its page) registered once: the entry point, the plugins folder's file staying silent
    assert report["plugins"].count("skiff") == 1, report["plugins"]
    assert {"operators.training.trigger.TrainingJobTrigger",
            "operators.sedna.trigger.SednaWatchTrigger"} <= set(report["triggers"])
    # the installed package, not the checkout, and no test tools in the image
    assert report["operators_file"].startswith(str(image_root / "venv")), report["operators_file"]
    assert report["test_tools_shipped"] == {"kubesim": False, "devstack": False}
    # the templates are package data of the installed package
    assert list((image_root / "venv").glob("lib/python*/site-packages/k8s_templates/training/job.yaml.j2"))


def test_the_installed_package_registers_the_page_without_a_plugins_folder(image_root, tmp_path):
    """The package's ``airflow.plugins`` entry point alone: an image (or chart) with an empty plugins folder."""
    report = check_image(image_root, tmp_path)
    assert report["plugins"] == ["skiff"] and report["plugin_import_errors"] == {}, report
