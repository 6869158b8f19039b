"""The development-instance DAGs (``dags/dev_instance_*.py``): a form per action and the idle culler.

Airflow renders ``params`` as the trigger form: every param has a title, a description and a JSON schema
(an enum of the platform's image catalogue, bounds for sizes). The image list is read from the platform file
when the DAG is parsed (a local, reviewed config file; if it cannot be read the form shows a free text field and
the run validates the name against the catalogue).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from operators import settings
from operators.core.names import DNS_LABEL_PATTERN
from operators.devinstances.operator import DevInstanceOperator
from operators.devinstances.spec import MAX_CPU, MAX_EXTRA_PORTS, MAX_GPU, MAX_MEMORY_GI

START = datetime(2026, 11, 1)
TAGS = ["skiff", "dev-instance"]


def _platform():
    try:
        from operators.platform import load_platform

        return load_platform()
    except Exception:  # noqa: BLE001 - the run reports the real error; the form stays usable
        return None


def catalogue() -> tuple[list[str], str | None]:
    """(image names, default name) from the platform file; ([], None) when it cannot be read."""
    platform = _platform()
    if platform is None:
        return [], None
    default = platform.default_image()
    return [i.name for i in platform.images], default.name if default else None


def team_choices() -> list[str]:
    """The platform's team queues (namespaces) for the form's Team menu. A DAG's form is the same for every
    user, so it lists every team; the run refuses a team the user is not a member of (Skiff's page offers only
    the user's own)."""
    platform = _platform()
    return [t.namespace for t in platform.teams] if platform is not None else []


def identity_params() -> dict[str, Param]:
    return {
        "name": Param("", type="string", title="Instance name", minLength=1, maxLength=40,
                      pattern=DNS_LABEL_PATTERN,
                      description="Lower-case letters, digits and '-', unique among your instances."),
        "team": team_param(),
        "owner": Param(None, type=["null", "string"], title="Owner",
                       description="Leave empty: you. Only runs without a logged-in user (CLI, tests) and "
                                   "admins may name another user."),
    }


def team_param() -> Param:
    teams = team_choices()
    if teams:
        return Param(teams[0], type="string", title="Team", enum=teams,
                     description="Your team's queue (namespace): one you are a member of.")
    return Param("", type="string", title="Team", minLength=1, description="Your team's queue (namespace), e.g. recsys.")


def create_params() -> dict[str, Param]:
    names, default = catalogue()
    image = {"enum": names} if names else {}
    return {
        **identity_params(),
        "image": Param(default, type=["string", "null"] if not names else "string", title="Image", **image,
                       description="A platform image (TensorFlow versions, CPU and GPU); pick a GPU image "
                                   "when you ask for GPUs."),
        "cpu": Param(1, type="number", title="CPU cores", exclusiveMinimum=0, maximum=MAX_CPU,
                     description="Cores reserved for the instance (requests = limits)."),
        "memory": Param(2, type="number", title="Memory (GiB)", exclusiveMinimum=0, maximum=MAX_MEMORY_GI,
                        description="Memory in GiB (requests = limits)."),
        "gpu": Param(0, type="integer", title="GPUs", minimum=0, maximum=MAX_GPU,
                     description="Whole GPUs; more than 0 places the instance on a GPU node."),
        # optional JSON fields: "null" in the type, or Airflow's form marks them required
        "mounts": Param([], type=["null", "array"], title="Extra volumes (optional)",
                        items={"type": "object", "additionalProperties": False, "required": ["pvc", "path"],
                               "properties": {"pvc": {"type": "string"}, "path": {"type": "string"},
                                              "read_only": {"type": "boolean"}}},
                        description='PVCs of yours or shared with you, e.g. [{"pvc": "recsys-datasets", '
                                    '"path": "/data", "read_only": true}]. Leave [] for none. Your home volume is '
                                    'always at /root.'),
        "extra_ports": Param([], type=["null", "array"], title="Extra ports (optional)", maxItems=MAX_EXTRA_PORTS,
                             uniqueItems=True, items={"type": "integer", "minimum": 1, "maximum": 65535},
                             description=f"Up to {MAX_EXTRA_PORTS} more container ports to reach from outside, "
                                         "e.g. [5000, 7860]. Leave [] for none."),
    }


def action_dag(action: str, doc_md: str) -> DAG:
    with DAG(
        dag_id=f"dev_instance_{action}",
        description=f"{action.capitalize()} one of your development instances",
        schedule=None,
        start_date=START,
        catchup=False,
        params=create_params() if action == "create" else identity_params(),
        # platform DAGs users trigger: a paused one would queue their requests forever on a fresh deployment
        is_paused_upon_creation=False,
        tags=TAGS,
        doc_md=doc_md,
    ) as dag:
        # stop, start and delete are idempotent (a second run finishes what a failed one left, e.g. the ports of
        # a deleted Service after a 503): retried. create is not retried: it rolls back what it made and says why.
        DevInstanceOperator(task_id=action, action=action,  # connection: [skiff] kubernetes_conn_id
                            retries=0 if action == "create" else 3, retry_delay=timedelta(seconds=5),
                            retry_exponential_backoff=2.0, max_retry_delay=timedelta(minutes=1))
    return dag


def cull_dag(doc_md: str) -> DAG:
    with DAG(
        dag_id="dev_instance_cull",
        description="Stop development instances idle for longer than the configured time (default 8 h)",
        schedule=settings.get("devinstance_cull_cron"),
        start_date=START,
        catchup=False,
        max_active_runs=1,
        is_paused_upon_creation=False,  # culling must run from a fresh deployment's first minute
        tags=TAGS,
        doc_md=doc_md,
    ) as dag:
        @task(task_id="cull")
        def cull() -> dict:
            from operators.devinstances.culler import cull as run_cull
            from operators.devinstances.settings import Settings
            from operators.k8s import Kube, api_client

            summary = run_cull(Kube(api_client()), Settings.from_config())
            if summary["errors"]:
                raise RuntimeError(f"{len(summary['errors'])} instance(s) could not be checked; "
                                   f"first: {summary['errors'][0]}")
            return summary

        cull()
    return dag
