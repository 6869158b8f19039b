"""``SkiffPlugin``: the Airflow plugin that mounts Skiff's app at ``/skiff`` and puts its page in the navigation.

Registered by the package's ``airflow.plugins`` entry point (the production image needs no plugins folder);
``plugins/skiff_plugin.py`` registers the same class for a checkout that is not installed.

An *external view* (an iframe of a page our app serves) rather than a *React app*: the page is plain HTML, CSS
and JavaScript with no build step (the machines that build Skiff have no npm registry), it is served from the
same origin so Airflow's login cookie authenticates it, and it keeps working when Airflow's React version moves.
``href`` is relative (no leading slash) so it resolves against the UI's ``<base href>``: a ``[api] base_url``
with a sub-path (``https://host/airflow/``) frames ``/airflow/skiff/``.
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
    external_views = [{
        "name": "Skiff",
        "href": "skiff/",
        "url_route": "skiff",
        "destination": "nav",
        "icon": "skiff/static/skiff.svg",
    }]
