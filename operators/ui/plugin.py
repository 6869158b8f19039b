"""``SkiffPlugin``: the Airflow plugin that mounts Skiff's app at ``/skiff`` and puts its page in the navigation.

Registered by the package's ``airflow.plugins`` entry point (the production image needs no plugins folder);
``plugins/skiff_plugin.py`` registers the same class for a checkout that is not installed.

A *React app* (``react_apps``), not an *external view*: Airflow 3 frames an external view in an iframe sandboxed
``allow-scripts allow-same-origin allow-forms allow-downloads``, where no link can open a new tab (no
``allow-popups``) or leave the frame (no ``allow-top-navigation``): JupyterLab, VS Code, TensorBoard and the task
log links did nothing. A React app renders inside the UI's own page (``airflow/ui/src/pages/ReactPlugin.tsx``
imports ``bundle_url`` and renders the component the module leaves in ``globalThis.AirflowPlugin``), so links
behave as anywhere in Airflow and the page sits under the UI's header and navigation. The bundle is plain
JavaScript with no build step (the machines that build Skiff have no npm registry): it returns one React host
element and renders into it with the DOM API (``static/skiff.js`` says how). ``bundle_url`` is relative (no
leading slash) so it resolves against the UI's ``<base href>``: a ``[api] base_url`` with a sub-path
(``https://host/airflow/``) loads ``/airflow/skiff/static/skiff.js``. The same page stays reachable alone at
``<base>skiff/``.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from operators.exporter.endpoint import create_app as create_metrics_app
from operators.ui.app import create_app

URL_PREFIX = "/skiff"
METRICS_URL_PREFIX = "/skiff-metrics"  # Prometheus' target (operators.exporter.endpoint): its own app and prefix


class SkiffPlugin(AirflowPlugin):
    name = "skiff"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Skiff platform"},
                    {"app": create_metrics_app(), "url_prefix": METRICS_URL_PREFIX, "name": "Skiff metrics"}]
    react_apps = [{
        "name": "Skiff",
        "bundle_url": "skiff/static/skiff.js",
        "url_route": "skiff",
        "destination": "nav",
        "icon": "skiff/static/skiff.svg",
    }]
