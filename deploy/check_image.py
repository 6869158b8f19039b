"""Run inside an installed Skiff image (or the clean venv tests/integration/deploy/test_image_install.py builds): the DAGs
import with no errors, the plugins load, every Skiff trigger imports by its classpath as the triggerer does it,
and the test/demo tools are not there. Prints one JSON object; exits 1 when something is wrong.

    AIRFLOW__CORE__DAGS_FOLDER=/opt/airflow/dags python deploy/check_image.py
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import sys


def skiff_triggers() -> list[str]:
    from airflow.triggers.base import BaseTrigger

    import operators

    found = []
    for mod in pkgutil.walk_packages(operators.__path__, "operators."):
        for _, cls in inspect.getmembers(importlib.import_module(mod.name), inspect.isclass):
            if issubclass(cls, BaseTrigger) and cls.__module__ == mod.name:
                found.append(f"{cls.__module__}.{cls.__qualname__}")
    return sorted(found)


def main() -> int:
    from airflow import plugins_manager
    from airflow._shared.module_loading import import_string  # what the triggerer loads triggers with
    from airflow.dag_processing.dagbag import DagBag

    import operators

    bag = DagBag()  # the configured dags folder
    plugins_manager.ensure_plugins_loaded()
    triggers = skiff_triggers()
    for path in triggers:
        import_string(path)
    shipped = {}
    for name in ("kubesim", "devstack"):
        try:
            importlib.import_module(name)
            shipped[name] = True
        except ImportError:
            shipped[name] = False
    report = {
        "dag_ids": sorted(bag.dag_ids),
        "dag_import_errors": bag.import_errors,
        "plugin_import_errors": plugins_manager.get_import_errors(),
        "plugins": [p["name"] for p in plugins_manager.get_plugin_info()],
        "triggers": triggers,
        "operators_file": operators.__file__,
        "test_tools_shipped": shipped,
    }
    print(json.dumps(report, default=str))
    ok = (bag.dag_ids and not bag.import_errors and not report["plugin_import_errors"] and triggers
          and not any(shipped.values()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
