"""The platform file as plain frozen data, and the questions the rest of Skiff asks it (pure, no I/O).

``Platform`` answers: which images exist, which teams a user is in, a user's home PVC name, and whether a user
may mount a PVC in a team's namespace read-write, read-only or not at all. It is built by ``loader`` after the
file passed the schema and the cross-field checks, so every value here is already valid. ``home_pvc`` and
``NodePools`` come from the shared core (``operators.core``): training steps use them without a platform file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from operators.core.nodepools import NodePools
from operators.core.quantity import parse_quantity
from operators.core.volumes import home_pvc

TEAM_PREFIX = "team:"
POOL_PREFIX = "skiff-"
QUOTA_NAME = "skiff-quota"
POD_SECURITY_PREFIX = "pod-security.kubernetes.io/"


class PlatformError(ValueError):
    """The platform file is unreadable or invalid; the message names the file, line and field."""


@dataclass(frozen=True)
class Image:
    name: str
    image: str
    gpu: bool = False
    description: str = ""
    default: bool = False


@dataclass(frozen=True)
class Quota:
    """Kubernetes quantities as written in the file; ``gpu`` is "0" when not given."""

    cpu: str
    memory: str
    gpu: str
    storage: str
    pods: int | None = None
    jobs: int | None = None

    def amounts(self) -> dict[str, Decimal]:
        return {k: parse_quantity(getattr(self, k)) for k in ("cpu", "memory", "gpu", "storage")}


@dataclass(frozen=True)
class FlavorQuota:
    """A team's quota in one Kueue ResourceFlavor (``default``, ``gpu``, ``online``), with ``queueing: kueue``:
    (resource, quantity) pairs with resource ``cpu``, ``memory`` or ``gpu``."""

    flavor: str
    nominal: tuple[tuple[str, str], ...]
    borrowing_limit: tuple[tuple[str, str], ...] = ()
    lending_limit: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PodSecurity:
    """A team namespace's Pod Security Standards levels (the ``pod-security.kubernetes.io/<mode>`` labels)."""

    enforce: str = "baseline"
    warn: str = "restricted"
    audit: str = "restricted"

    def labels(self) -> dict[str, str]:
        return {f"{POD_SECURITY_PREFIX}{mode}": getattr(self, mode) for mode in ("enforce", "warn", "audit")} | \
            {f"{POD_SECURITY_PREFIX}{mode}-version": "latest" for mode in ("enforce", "warn", "audit")}


@dataclass(frozen=True)
class Member:
    user: str
    email: str | None = None
    role: str = "member"


@dataclass(frozen=True)
class Team:
    name: str
    namespace: str
    quota: Quota
    members: tuple[Member, ...] = ()
    allow_online: bool = False
    pull_secrets: tuple[str, ...] = ()
    service_account: str = "default"
    pool_slots: int = 1
    kueue_flavors: tuple[FlavorQuota, ...] = ()   # queueing: kueue: the team's ClusterQueue
    kueue_dev: tuple[FlavorQuota, ...] = ()       # queueing: kueue: its development instances' ClusterQueue
    pod_security: PodSecurity = PodSecurity()      # its namespace's Pod Security Standards levels

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(m.user for m in self.members)

    @property
    def admins(self) -> tuple[str, ...]:
        """Members with role ``admin``: they also stop, start and delete the team's development instances."""
        return tuple(m.user for m in self.members if m.role == "admin")

    @property
    def pool(self) -> str:
        """The Airflow pool whose slots bound how many of the team's tasks run at once."""
        return POOL_PREFIX + self.name


@dataclass(frozen=True)
class SharedVolume:
    """A PVC in ``team``'s namespace. No readers/writers: the team's members may write it."""

    name: str
    team: str
    size: str
    owner: str | None = None
    access_mode: str = "ReadWriteMany"
    storage_class: str | None = None
    readers: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodsReady:
    """``kueue.wait_for_pods_ready`` of the platform file: Kueue's ``waitForPodsReady`` (Kueue v0.19 turns it on
    with its own defaults - 30m, requeued for ever - when the Configuration does not say; a field left out here is
    left to Kueue). A gang Kueue admitted whose pods are not all ready within ``timeout`` is evicted and requeued
    after a back-off; after ``backoff_limit_count`` requeues Kueue deactivates it."""
    timeout: str | None = None               # a Go duration: "10m", "1h30m"
    recovery_timeout: str | None = None
    backoff_limit_count: int | None = None
    backoff_base_seconds: int | None = None
    backoff_max_seconds: int | None = None

    def configuration(self) -> dict:
        """The Configuration's ``waitForPodsReady`` (apis/config/v1beta2 WaitForPodsReady)."""
        out: dict = {}
        if self.timeout is not None:
            out["timeout"] = self.timeout
        if self.recovery_timeout is not None:
            out["recoveryTimeout"] = self.recovery_timeout
        strategy = {k: v for k, v in (("backoffLimitCount", self.backoff_limit_count),
                                      ("backoffBaseSeconds", self.backoff_base_seconds),
                                      ("backoffMaxSeconds", self.backoff_max_seconds)) if v is not None}
        if strategy:
            out["requeuingStrategy"] = strategy
        return out


@dataclass(frozen=True)
class Platform:
    source: str
    teams: tuple[Team, ...]
    images: tuple[Image, ...] = ()
    volumes: tuple[SharedVolume, ...] = ()
    node_pools: NodePools = field(default_factory=NodePools)
    default_pvc_size: str = "5Gi"
    storage_class: str | None = None
    default_cpu: str = "1"
    default_memory: str = "2Gi"
    queueing: str = "quota"        # "kueue": Kueue's ClusterQueues decide; "quota": ResourceQuotas cap
    cohort: str = "skiff"          # queueing: kueue: the cohort of every team's ClusterQueues
    pods_ready: PodsReady | None = None   # queueing: kueue: Kueue's waitForPodsReady (None: Kueue's defaults)

    # ---- catalogue -------------------------------------------------------------------------------------
    def image(self, name: str) -> Image:
        for image in self.images:
            if image.name == name:
                return image
        raise PlatformError(f"{self.source}: no image {name!r} (images: {', '.join(i.name for i in self.images)})")

    def default_image(self) -> Image | None:
        return next((i for i in self.images if i.default), self.images[0] if self.images else None)

    # ---- teams and users -------------------------------------------------------------------------------
    def team(self, name: str) -> Team:
        for team in self.teams:
            if team.name == name or team.namespace == name:
                return team
        raise PlatformError(f"{self.source}: no team {name!r} (teams: {', '.join(t.name for t in self.teams)})")

    def teams_of(self, user: str) -> list[Team]:
        return [t for t in self.teams if user in t.users]

    def users(self) -> list[str]:
        return sorted({u for t in self.teams for u in t.users})

    def home_pvc(self, user: str) -> str:
        return home_pvc(user)

    # ---- volumes ---------------------------------------------------------------------------------------
    def volume(self, team: str, name: str) -> SharedVolume | None:
        team_name = self.team(team).name
        return next((v for v in self.volumes if v.team == team_name and v.name == name), None)

    def volume_access(self, user: str, team: str, pvc: str) -> str | None:
        """"rw" / "ro" / None for ``user`` mounting ``pvc`` in ``team``'s namespace."""
        the_team = self.team(team)
        member = user in the_team.users
        if pvc == home_pvc(user):
            return "rw" if member else None
        shared = self.volume(the_team.name, pvc)
        if shared is None:
            return None
        if not shared.readers and not shared.writers:
            mode = "rw" if member else None
        elif self._granted(user, shared.writers) or user == shared.owner:
            mode = "rw"
        elif self._granted(user, shared.readers):
            mode = "ro"
        else:
            mode = None
        if mode == "rw" and shared.access_mode == "ReadOnlyMany":
            mode = "ro"
        return mode

    def _granted(self, user: str, grantees: tuple[str, ...]) -> bool:
        for grantee in grantees:
            if grantee.startswith(TEAM_PREFIX):
                if user in self.team(grantee[len(TEAM_PREFIX):]).users:
                    return True
            elif grantee == user:
                return True
        return False
