# Skiff's production image: Airflow 3.3.2 with Skiff's operators, triggers, templates, DAGs and plugins, for
# the official Airflow Helm chart (deploy/helm/values.yaml). kubesim and devstack (simulated cluster, local
# stack) are test/demo tools and are not shipped. Every dependency is pinned (requirements.txt); the base
# image's tag pins Airflow and Python.
FROM apache/airflow:3.3.2-python3.11

# non-root: the official image's `airflow` user (uid 50000, gid 0), as the chart expects
USER airflow
COPY --chown=airflow:root requirements.txt pyproject.toml /opt/skiff/
COPY --chown=airflow:root operators /opt/skiff/operators
COPY --chown=airflow:root k8s_templates /opt/skiff/k8s_templates
COPY --chown=airflow:root deploy/install.sh /opt/skiff/deploy/install.sh
# The installed package is what the scheduler, the workers and the triggerer import (triggers must be
# importable without the dags folder on sys.path).
RUN /opt/skiff/deploy/install.sh /opt/skiff pip

# DAGs baked into the image (the chart's dags folder; no git-sync)
COPY --chown=airflow:root dags /opt/airflow/dags
COPY --chown=airflow:root plugins /opt/airflow/plugins

ENV AIRFLOW__CORE__LOAD_EXAMPLES=False
