"""Team queues (SPEC §3), declared in the platform file (``operators.platform``) instead of by hand.

A team queue is what ``platform_sync`` applies for a team: a namespace with the ResourceQuota ``skiff-quota``,
LimitRange defaults, the ServiceAccount its pods run as (with pull secrets), RoleBindings for its members, a
home PVC per member and the team's shared PVCs, plus the Airflow pool ``skiff-<team>``. These helpers are the
short names DAG authors and scripts use.

Layer: with the platform, of which it is a facade (it imports ``operators.platform`` only); a feature may use
it, it uses no feature (import-linter: ``[tool.importlinter]`` in pyproject.toml).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from operators.platform import Platform, Team, home_pvc, load_platform
from operators.platform.sync import SyncReport, sync_cluster

if TYPE_CHECKING:  # the access layer loads the client; importing this module must not
    from operators.k8s.rest import Kube


def default_pvc_name(user: str) -> str:
    """The PVC every user gets in each of their teams; TrainingJobOperator mounts it at ``/root``."""
    return home_pvc(user)


def team_queue(team: str, platform: Platform | None = None) -> Team:
    """The team (by name or namespace) from the platform file; ``PlatformError`` if it has no such team."""
    return (platform or load_platform()).team(team)


def team_pool(team: str, platform: Platform | None = None) -> str:
    """The Airflow pool a team's tasks should use (``pool=team_pool("recsys")``)."""
    return team_queue(team, platform).pool


def ensure_queues(kube: Kube, platform: Platform | None = None) -> SyncReport:
    """Apply every team queue of the platform file to the cluster now (what one platform_sync run does for the
    cluster; pools need the Airflow API, see ``operators.platform.pools``)."""
    return sync_cluster(kube, platform or load_platform())
