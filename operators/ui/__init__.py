"""Skiff's page inside the Airflow UI: a FastAPI app the api-server mounts (``plugin.SkiffPlugin``).

``views`` shapes cluster objects and Airflow rows into what the page shows (pure), ``sources`` reads them
(Kubernetes through ``operators.k8s``, Airflow's metadata DB), ``auth`` ties every endpoint to Airflow's own
authentication and authorization, ``actions`` triggers the lifecycle DAGs as the user, ``app`` holds the routes.
Importing this package needs no cluster and no kubesim: the api-server imports it at start-up.
"""
