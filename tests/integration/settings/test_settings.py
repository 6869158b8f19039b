"""Every ``[skiff]`` option is declared once (``operators/settings.py``), reaches Airflow the way a provider's
config does (``get_provider_info()`` through the ``apache_airflow_provider`` entry point, loaded by Airflow's
``ProvidersManager``), is overridden only through Airflow's ``AIRFLOW__SKIFF__*``, and is documented from the
declaration."""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from operators import settings

REPO = Path(__file__).resolve().parents[3]
AIRFLOW = Path(sys.executable).parent / "airflow"


def _clean_env(**overrides: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__SKIFF__")}
    return {**env, **overrides}


def test_airflow_config_list_shows_every_option_with_its_default(tmp_path):
    """The real CLI, in a fresh Airflow home: each declared option with its default, an override from the
    environment, and ``platform_file`` (no default) listed commented out, as Airflow lists options it has no
    value for."""
    home = tmp_path / "home"
    env = _clean_env(AIRFLOW_HOME=str(home), AIRFLOW__SKIFF__SEDNA_CONCURRENCY="4")
    out = subprocess.run([str(AIRFLOW), "config", "list", "--section", "skiff", "--show-values"], env=env,
                         capture_output=True, text=True, timeout=240, check=True).stdout
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(out)
    listed = dict(parser["skiff"])
    expected = {name: (o.default or "").replace("{AIRFLOW_HOME}", str(home))
                for name, o in settings.OPTIONS.items() if o.default is not None}
    expected["sedna_concurrency"] = "4"
    assert listed == expected
    assert re.search(r"^# platform_file = $", out, re.M), out


def test_the_provider_info_is_what_airflow_loads_and_valid_by_its_schema():
    from airflow.providers_manager import ProvidersManager

    info = settings.get_provider_info()
    schema_path = Path(__import__("airflow").__file__).parent / "provider_info.schema.json"
    jsonschema.validate(info, json.loads(schema_path.read_text()))
    assert dict(ProvidersManager().provider_configs)["skiff"] == settings.provider_config()


def test_values_come_from_airflow_config_and_environment(monkeypatch):
    for name in settings.OPTIONS:
        monkeypatch.delenv(settings.env_var(name), raising=False)
    assert settings.get("sedna_resync_cron") == "*/5 * * * *"
    assert settings.get("platform_file") is None               # no default
    assert settings.get_list("sedna_namespaces") == []
    monkeypatch.setenv("AIRFLOW__SKIFF__SEDNA_NAMESPACES", " default, team-a ,")
    monkeypatch.setenv("AIRFLOW__SKIFF__SEDNA_CONCURRENCY", "4")
    monkeypatch.setenv("AIRFLOW__SKIFF__DEVINSTANCE_HOST", "")  # empty: the default
    assert settings.get_list("sedna_namespaces") == ["default", "team-a"]
    assert settings.get_int("sedna_concurrency") == 4
    assert settings.get("devinstance_host") == "localhost"
    monkeypatch.setenv("AIRFLOW__SKIFF__DEFER_RESUME_GUARD_SECONDS", "soon")
    with pytest.raises(ValueError, match=r"^\[skiff\] defer_resume_guard_seconds='soon': must be a number$"):
        settings.get_float("defer_resume_guard_seconds")
    with pytest.raises(KeyError):
        settings.get("sedna_concurency")                        # an undeclared option is a typo


def test_the_bare_variables_of_old_no_longer_configure_anything(monkeypatch):
    from operators.devinstances.settings import Settings
    from operators.sedna.dags import configured_namespaces

    monkeypatch.delenv("AIRFLOW__SKIFF__SEDNA_NAMESPACES", raising=False)
    monkeypatch.delenv("AIRFLOW__SKIFF__DEVINSTANCE_HOST", raising=False)
    monkeypatch.setenv("SKIFF_SEDNA_NAMESPACES", "team-a")
    monkeypatch.setenv("SKIFF_DEVINSTANCE_HOST", "dev.example.com")
    assert configured_namespaces() is None and Settings.from_config().host == "localhost"
    monkeypatch.setenv("AIRFLOW__SKIFF__SEDNA_NAMESPACES", "team-a")
    monkeypatch.setenv("AIRFLOW__SKIFF__DEVINSTANCE_HOST", "dev.example.com")
    assert configured_namespaces() == ["team-a"] and Settings.from_config().host == "dev.example.com"


def _env_reads(tree: ast.AST):
    """The keys of ``os.environ[...]``, ``os.environ.get(...)`` / ``.pop`` / ``.setdefault`` and ``os.getenv(...)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
            yield node.lineno, ast.unparse(node.slice)
        elif isinstance(node, ast.Call) and node.args:
            func = ast.unparse(node.func)
            if func in ("os.getenv", "getenv") or re.fullmatch(r"(os\.)?environ\.(get|pop|setdefault)", func):
                yield node.lineno, ast.unparse(node.args[0])


def test_no_module_in_operators_reads_skiff_variables_from_the_environment():
    """Skiff is configured through Airflow's config only: no module reads ``SKIFF_*`` (or ``AIRFLOW__SKIFF__*``)
    from the environment, and no module other than the settings module even names such a variable (but the one
    that names the variables Skiff *sets* in a training container for the user's program: checkpoint.py, and
    gang.py for a distributed step's ranks)."""
    reads, named = [], []
    for path in sorted((REPO / "operators").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        reads += [f"{rel}:{line}: {key}" for line, key in _env_reads(tree) if "SKIFF" in key.upper()]
        if rel not in ("operators/settings.py", "operators/training/checkpoint.py", "operators/training/gang.py"):
            named += [f"{rel}:{n.lineno}: {n.value[:60]!r}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str) and "SKIFF_" in n.value]
    assert reads == []
    assert named == []


def test_the_check_above_finds_a_read():
    tree = ast.parse('import os\nx = os.environ.get("SKIFF_SEDNA_NAMESPACES", "")\ny = os.getenv(f"SKIFF_{k}")\n'
                     'z = os.environ["AIRFLOW__SKIFF__HOST"]')
    assert [key for _, key in _env_reads(tree)] == ["'SKIFF_SEDNA_NAMESPACES'", "f'SKIFF_{k}'",
                                                    "'AIRFLOW__SKIFF__HOST'"]


def test_the_reference_documents_every_option_as_declared():
    doc = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    table = re.search(r"<!-- settings table: start -->\n(.*?)<!-- settings table: end -->", doc, re.S)
    assert table, "docs/reference.md has no settings table markers"
    assert table.group(1) == settings.markdown_table(), "regenerate it: python -m operators.settings"
    assert len(re.findall(r"^\| `", table.group(1), re.M)) == len(settings.OPTIONS)


@pytest.mark.parametrize("option, bad, message", [
    ("devinstance_tcp_services", "tcp-services", "must be <namespace>/<configmap>"),
    ("devinstance_max_per_owner", "0", "must be a whole number >= 1"),
    ("devinstance_idle_hours", "-1", "must be a positive number of hours"),
])
def test_a_bad_instance_setting_names_the_option_and_the_value(option, bad, message):
    from operators.devinstances.settings import Settings

    defaults = {name: o.default for name, o in settings.OPTIONS.items()}
    assert Settings.from_config(defaults.get) == Settings()     # the declared defaults, parsed
    with pytest.raises(ValueError, match=re.escape(f"[skiff] {option}={bad!r}: {message}")):
        Settings.from_config((defaults | {option: bad}).get)
