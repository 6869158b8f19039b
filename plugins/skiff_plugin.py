"""Skiff's page in the Airflow UI (``operators.ui``) for an Airflow whose plugins folder is this directory.

An installed Skiff registers the same plugin through its ``airflow.plugins`` entry point; this file then stays
silent, so Airflow never sees the plugin twice (it would report the second one as an import error).
"""

from importlib.metadata import entry_points

if not any(ep.value.startswith("operators.ui.plugin") for ep in entry_points(group="airflow.plugins")):
    from operators.ui.plugin import SkiffPlugin  # noqa: F401  (Airflow collects AirflowPlugin subclasses)
