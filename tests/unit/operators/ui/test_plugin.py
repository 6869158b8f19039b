"""How Airflow finds Skiff's page: the package's ``airflow.plugins`` entry point, or the plugins folder's file
for a checkout that is not installed, never both (Airflow reports a second registration as an import error)."""

from __future__ import annotations

import runpy
import tomllib
from importlib import import_module
from importlib.metadata import EntryPoint

from devstack.airflow_env import REPO

PLUGIN_FILE = REPO / "plugins" / "skiff_plugin.py"


def test_the_entry_point_names_the_plugin_class():
    eps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["airflow.plugins"]
    module, _, attr = eps["skiff"].partition(":")
    plugin = getattr(import_module(module), attr)
    assert plugin.name == "skiff"
    assert [a["url_prefix"] for a in plugin.fastapi_apps] == ["/skiff", "/skiff-metrics"]  # page, Prometheus
    # a React app rendered inside the UI (an external view's sandboxed iframe lets no link open): relative URLs
    assert [(v["url_route"], v["bundle_url"]) for v in plugin.react_apps] == [("skiff", "skiff/static/skiff.js")]
    assert plugin.external_views == []


def _plugins_in_file(monkeypatch, installed: list[EntryPoint]) -> list[str]:
    import importlib.metadata as md

    monkeypatch.setattr(md, "entry_points", lambda group=None: installed if group == "airflow.plugins" else [])
    from airflow.plugins_manager import AirflowPlugin

    namespace = runpy.run_path(str(PLUGIN_FILE))
    return [v.name for v in namespace.values() if isinstance(v, type) and issubclass(v, AirflowPlugin)]


def test_the_plugins_folder_file_registers_the_plugin_only_when_the_package_does_not(monkeypatch):
    assert _plugins_in_file(monkeypatch, []) == ["skiff"]
    installed = [EntryPoint("skiff", "operators.ui.plugin:SkiffPlugin", "airflow.plugins")]
    assert _plugins_in_file(monkeypatch, installed) == []
