# Skiff's production image: Airflow 3.3 with Skiff's operators, triggers, templates, DAGs and plugins.
# kubesim and devstack (simulated cluster, local stack) are test/demo tools and are not shipped.
FROM apache/airflow:3.3.2-python3.11

USER airflow
COPY --chown=airflow:root requirements.txt /opt/skiff/requirements.txt
RUN pip install --no-cache-dir -r /opt/skiff/requirements.txt

# The installed package is what the scheduler, the workers and the triggerer import (triggers must be
# importable without the dags folder on sys.path).
COPY --chown=airflow:root pyproject.toml /opt/skiff/
COPY --chown=airflow:root operators /opt/skiff/operators
COPY --chown=airflow:root k8s_templates /opt/skiff/k8s_templates
RUN pip install --no-cache-dir --no-deps /opt/skiff

COPY --chown=airflow:root dags /opt/airflow/dags
COPY --chown=airflow:root plugins /opt/airflow/plugins

ENV AIRFLOW__CORE__LOAD_EXAMPLES=False
