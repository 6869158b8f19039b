"""``DevInstanceOperator``: one action on one development instance, as an Airflow task.

It resolves the owner from the run (``owners.py``), validates against the platform file (catalogue, membership,
volumes, quota), performs the action through Skiff's access layer (``operators.k8s.Kube`` on the provider's
KubernetesHook), logs what
happened with the URLs and the ssh line (never the password) and returns the instance's view (XCom, without the
password). The "JupyterLab" and "code-server" extra links
on the task point at the instance.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from airflow.sdk import BaseOperator, BaseOperatorLink

from operators.devinstances import metrics

ACTIONS = ("create", "start", "stop", "delete")
log = logging.getLogger("skiff.devinstances")


class _InstanceLink(BaseOperatorLink):
    service = ""

    def get_link(self, operator, *, ti_key) -> str:
        return (getattr(operator, "instance_urls", None) or {}).get(self.service, "")


class JupyterLink(_InstanceLink):
    name = "JupyterLab"
    service = "jupyter"


class CodeServerLink(_InstanceLink):
    name = "code-server"
    service = "code-server"


def request_from_params(platform, owner: str, params: Mapping[str, Any]):
    """The validated ``InstanceRequest`` for ``owner`` from the create form and the platform file."""
    from operators import settings
    from operators.devinstances.spec import build_request

    try:
        team = platform.team(params.get("team"))
    except ValueError as exc:
        raise ValueError(f"team={params.get('team')!r}: {exc}") from None
    if owner not in team.users:
        raise ValueError(f"team={params.get('team')!r}: {owner!r} is not a member of this team")
    default = platform.default_image()
    return build_request(
        owner=owner, name=params.get("name"), team=team.namespace, image=params.get("image"),
        cpu=params.get("cpu"), memory=params.get("memory"), gpu=params.get("gpu", 0),
        mounts_=params.get("mounts") or (), extra_ports_=params.get("extra_ports") or (),
        catalogue=platform.images, default_image=default.name if default else None,
        home_pvc=platform.home_pvc(owner), access=lambda pvc: platform.volume_access(owner, team.name, pvc),
        service_account=team.service_account, pull_secrets=team.pull_secrets, node_pools=platform.node_pools,
        timezone=settings.get("devinstance_timezone") or "UTC")


class DevInstanceOperator(BaseOperator):
    """Run ``action`` (create, start, stop, delete) on the instance the DAG run's params name.

    ``kubernetes_conn_id``: None uses ``[skiff] kubernetes_conn_id`` (default ``kubernetes_default``)."""

    operator_extra_links = (JupyterLink(), CodeServerLink())
    ui_color = "#e3f1dc"

    def __init__(self, *, action: str, kubernetes_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if action not in ACTIONS:
            raise ValueError(f"action={action!r}: must be one of {', '.join(ACTIONS)}")
        self.action = action
        self.kubernetes_conn_id = kubernetes_conn_id
        self.instance_urls: dict[str, str] = {}

    def execute(self, context) -> dict | None:
        from operators.devinstances import inventory, lifecycle
        from operators.devinstances.owners import configured_admins, resolve_owner, triggering_user
        from operators.devinstances.settings import Settings
        from operators.k8s import Kube, api_client

        params = context["params"]
        user = triggering_user(context["dag_run"])  # "" for nobody; a real user named dag_test is that user
        settings = Settings.from_config()
        name, team = params.get("name"), params.get("team")
        if self.action == "create":  # for oneself (Airflow admins: for anybody)
            from operators.platform import load_platform

            owner = _owner_or_fail(resolve_owner, user, params.get("owner"), configured_admins())
            platform = load_platform()
            req = request_from_params(platform, owner, params)
            api = Kube(api_client(self.kubernetes_conn_id))
            outcome = lifecycle.create(api, req, settings, platform=platform)
            team = req.namespace
        else:  # a team admin also acts for the team's instance owners
            airflow_admins = configured_admins()
            team, team_admins = _owner_or_fail(team_namespace_and_admins, team, user, airflow_admins)
            owner = _owner_or_fail(resolve_owner, user, params.get("owner"), airflow_admins | set(team_admins))
            api = Kube(api_client(self.kubernetes_conn_id))
            if self.action == "delete":
                outcome = lifecycle.delete(api, owner, team, name, settings)
            else:
                outcome = getattr(lifecycle, self.action)(api, owner, team, name)
        log.info("%s %s/%s of %s: %s", self.action, team, name, owner, outcome.message)
        metrics.instance_action(self.action, team, outcome.changed)
        found = inventory.get_instance(api, owner, team, name, settings, with_idle=False) \
            if self.action != "delete" else None
        if found is None:
            return {"owner": owner, "name": name, "namespace": team, "state": "Deleted", "message": outcome.message}
        self.instance_urls = dict(found.urls)
        for service, url in found.urls.items():
            log.info("%-12s %s", service, url)
        if found.ssh:
            log.info("ssh          %s   (the password is on Skiff's page, for you only)", found.ssh)
        return {**found.as_dict(), "message": outcome.message}


def _owner_or_fail(resolve, *args):
    """A refusal by the owner rule is final: fail the task at once, without retries, on one line (a retry
    cannot change who triggered the run)."""
    from airflow.sdk.exceptions import AirflowFailException

    try:
        return resolve(*args)
    except (PermissionError, ValueError) as exc:
        raise AirflowFailException(f"refused: {exc}") from None


def team_namespace_and_admins(team: Any, user: str | None = None,
                               admins: frozenset[str] = frozenset()) -> tuple[str, tuple[str, ...]]:
    """A team name from the form -> its namespace and its admins, checked against the platform file as
    ``create`` checks it: a team the file does not list is refused (``ValueError`` naming ``team``), except for
    an Airflow admin or a run with nobody logged in (the CLI: a shell on Airflow's machines), who may still stop
    or delete an instance in a namespace the file no longer lists - never a system namespace."""
    from operators.core.checks import invalid
    from operators.core.names import is_dns_label
    from operators.devinstances.owners import ANONYMOUS
    from operators.platform import PlatformError, load_platform
    from operators.platform.loader import SYSTEM_NAMESPACES

    if not isinstance(team, str) or not is_dns_label(team):
        raise invalid("team", team, "not a team of the platform file (a team name is a DNS-1123 label)")
    platform = load_platform()  # unreadable or invalid: PlatformError, nothing is done
    try:
        found = platform.team(team)
    except PlatformError as exc:
        if (user or "") in ANONYMOUS or user in admins:
            if team in SYSTEM_NAMESPACES or team.startswith("kube-"):
                raise invalid("team", team, "a Kubernetes system namespace is never a team") from None
            return team, ()
        raise invalid("team", team, f"{exc}; only an Airflow admin may act in a namespace the file does "
                      "not list") from None
    return found.namespace, found.admins
