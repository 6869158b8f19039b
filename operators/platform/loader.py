"""Read and validate the platform file: YAML with line numbers, the shipped JSON schema, then the rules a
schema cannot say (unique names, known teams and users, storage that fits the quota). Pure: text in,
``Platform`` or ``PlatformError`` out; ``load_platform`` in ``__init__`` adds the file lookup.

Every error names the file, the line and the field: ``platform.yaml:12: teams[1].quota.gpu: '2x' is not a
quantity``. All errors of a file are reported at once, sorted by line; every value they echo is cut to a
bounded excerpt with its size (``short_repr``), so a 5 MB field cannot become a 5 MB message.

YAML anchors and aliases are refused before anything is built: a few hundred bytes of nested aliases
("billion laughs") expand to gigabytes, and a self-referencing alias makes a recursive structure that
nothing downstream can walk. The parser's event stream is read once, which expands nothing.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from functools import lru_cache
from importlib.resources import files
from typing import Any

import yaml

from operators.core.checks import bounded, short_repr
from operators.core.names import (
    image_credentials,
    is_dns_label,
    is_dns_subdomain,
    is_extended_resource,
    is_label_key,
    is_label_value,
)
from operators.core.quantity import human, is_quantity, parse_quantity, quantity_text
from operators.platform import kueue
from operators.platform.kueue import queue_names
from operators.platform.model import (
    POOL_PREFIX,
    TEAM_PREFIX,
    Image,
    Member,
    NodePools,
    Platform,
    PlatformError,
    PodSecurity,
    PodsReady,
    Quota,
    SharedVolume,
    Team,
    home_pvc,
)
from operators.platform.pools import pool_slots

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_FORMATS = {
    "quantity": ("a quantity", is_quantity),
    "dns-label": ("a valid name (DNS-1123 label: a-z, 0-9, '-', at most 63)", is_dns_label),
    "dns-subdomain": ("a valid name (DNS-1123 subdomain)", is_dns_subdomain),
    "email": ("an e-mail address", lambda v: isinstance(v, str) and bool(_EMAIL.fullmatch(v))),
    "label-key": ("a valid key ([prefix/]name, as a label or taint key: 'example.com/gpu')", is_label_key),
    "label-value": ("a valid label value (at most 63: A-Z, a-z, 0-9, '-', '_', '.')", is_label_value),
}
Path = tuple[str | int, ...]
# libyaml when built in: the pure-Python parser takes ~14 s over a 200 KB file (an exhaustion of its own)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_BYTES = 1 << 20  # a platform file is a few KB; a bigger one is refused before it is parsed
# each team is a namespace, two ClusterQueues, an Airflow pool and its RBAC: a file of more is a mistake or an
# attack (10,000 teams took 22 s to check), refused once the YAML is read, before the schema and the rules
MAX_TEAMS = 1000
MAX_ERRORS = 50  # errors listed in one message (all are found; the rest are counted)
# kube-apiserver's own namespaces (``kube-system``, ``kube-public``, ``kube-node-lease``; the ``kube-`` prefix is
# reserved for them) and ``default``: a team there would get its RoleBindings, quota and members' pods in
# the cluster's control-plane namespaces
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(files("operators.platform").joinpath("platform.schema.json").read_text("utf-8"))


def field_name(path: Path) -> str:
    text = ""
    for part in path:
        part = part if isinstance(part, int) or len(part) <= 64 else short_repr(part, 40)  # a 5 MB key
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(file)"


class _Errors:
    def __init__(self, source: str, lines: dict[Path, int]) -> None:
        self.source, self.lines, self.items = source, lines, []

    def add(self, path: Path, message: str) -> None:
        probe = tuple(path)
        while probe not in self.lines and probe:
            probe = probe[:-1]
        self.items.append((self.lines.get(probe, 1), field_name(path), message))

    def raise_if_any(self) -> None:
        if self.items:
            lines = [f"{self.source}:{line}: {name}: {msg}" for line, name, msg in sorted(set(self.items))]
            if len(lines) > MAX_ERRORS:  # a message, not a second copy of a hostile file
                lines = [*lines[:MAX_ERRORS], f"{self.source}: ... and {len(lines) - MAX_ERRORS} more errors"]
            raise PlatformError("\n".join(lines))


def _refuse_aliases(text: str, source: str) -> None:
    """``PlatformError`` at the first anchor or alias (the parser's events: nothing is expanded)."""
    for event in yaml.parse(text, Loader=_LOADER):
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            what = "alias" if isinstance(event, yaml.AliasEvent) else "anchor"
            raise PlatformError(f"{source}:{event.start_mark.line + 1}: YAML {what} {short_repr(anchor, 40)}: "
                                "anchors and aliases are not allowed in the platform file (write each value out)")


def _read_yaml(text: str, source: str) -> tuple[Any, dict[Path, int]]:
    if len(text) > MAX_BYTES:
        raise PlatformError(f"{source}:1: (file): {len(text)} characters; a platform file may have at most "
                            f"{MAX_BYTES} (1 MiB)")
    try:
        _refuse_aliases(text, source)
        node = yaml.compose(text, Loader=_LOADER)
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = str(getattr(exc, "problem", None) or exc)
        raise PlatformError(f"{source}:{line}: not valid YAML: {bounded(problem, 200)}") from None
    lines: dict[Path, int] = {}
    dupes: list[tuple[Path, int]] = []

    def walk(n: yaml.Node, path: Path) -> None:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            seen = set()
            for key, value in n.value:
                name = key.value
                if name in seen:
                    dupes.append((path + (name,), key.start_mark.line + 1))
                seen.add(name)
                walk(value, path + (name,))
                lines[path + (name,)] = key.start_mark.line + 1 if not isinstance(
                    value, yaml.MappingNode | yaml.SequenceNode) else value.start_mark.line + 1
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, path + (i,))

    if node is not None:
        walk(node, ())
    if dupes:
        path, line = dupes[0]
        raise PlatformError(f"{source}:{line}: {field_name(path)}: appears twice (a YAML key must be unique)")
    return data, lines


def _describe(schema_: dict) -> str:
    if "const" in schema_:
        return repr(schema_["const"])
    if "enum" in schema_:
        return " or ".join(map(repr, schema_["enum"]))
    if schema_.get("type") == "integer":
        return f"an integer >= {schema_.get('minimum', 0)}"
    if schema_.get("type") == "array":
        return "a list"
    return schema_.get("type", "a value")


def _schema_message(error) -> tuple[Path, str]:
    path, value, kind = tuple(error.absolute_path), error.instance, error.validator
    shown = short_repr(value)
    if kind == "format":
        return path, f"{shown} is not {_FORMATS[error.validator_value][0]}"
    if kind == "additionalProperties":
        extra = sorted(set(value) - set(error.schema.get("properties", {})))
        allowed = ", ".join(error.schema.get("properties", {}))
        return path + (extra[0],), f"unknown field (allowed: {allowed})"
    if kind == "required":
        missing = error.message.split("'")[1]
        return path + (missing,), "is required"
    if kind == "oneOf":
        return path, f"{shown} is not valid: expected " + " or ".join(_describe(s) for s in error.validator_value)
    if kind == "type":
        want = error.validator_value
        return path, f"{shown} is not of type {' or '.join(want) if isinstance(want, list) else want}"
    if kind == "pattern":
        return path, f"{shown} is not allowed (spaces, ':' and '/' are not allowed here)"
    message, full = error.message, repr(value)
    if message.startswith(full):  # jsonschema's "<repr of the value> is not one of ...": the value cut
        message = shown + message[len(full):]
    return path, bounded(message)


def _validate_schema(data: Any, errors: _Errors) -> None:
    import jsonschema

    checker = jsonschema.FormatChecker(formats=())
    for name, (_, check) in _FORMATS.items():
        checker.checks(name)(check)
    validator = jsonschema.Draft202012Validator(schema(), format_checker=checker)
    for error in validator.iter_errors(data):
        path, message = _schema_message(error)
        errors.add(path, message)


def _check_names(data: dict, errors: _Errors) -> None:
    """Unique teams, namespaces, images; known teams in registries and volumes; injective home PVCs."""
    teams = data.get("teams") or []
    seen_team: dict[str, int] = {}
    seen_ns: dict[str, int] = {}
    for i, team in enumerate(teams):
        if team["name"] in seen_team:
            errors.add(("teams", i, "name"), f"team {team['name']!r} is already defined at teams[{seen_team[team['name']]}]")
        seen_team.setdefault(team["name"], i)
        ns = team.get("namespace", team["name"])
        if ns in seen_ns:
            errors.add(("teams", i, "namespace"), f"namespace {ns!r} is already used by teams[{seen_ns[ns]}]")
        seen_ns.setdefault(ns, i)
        users: set[str] = set()
        for j, member in enumerate(team.get("members") or []):
            if member["user"] in users:
                errors.add(("teams", i, "members", j, "user"), f"{member['user']!r} is listed twice in team {team['name']!r}")
            users.add(member["user"])
    pvc_owner: dict[str, str] = {}
    for i, team in enumerate(teams):
        for j, member in enumerate(team.get("members") or []):
            pvc, user = home_pvc(member["user"]), member["user"]
            if pvc_owner.setdefault(pvc, user) != user:
                errors.add(("teams", i, "members", j, "user"),
                           f"{user!r} and {pvc_owner[pvc]!r} would share the home PVC {pvc!r}; rename one")
    images = data.get("images") or []
    names = [img["name"] for img in images]
    for i, name in enumerate(names):
        if name in names[:i]:
            errors.add(("images", i, "name"), f"image {name!r} is listed twice")
    defaults = [i for i, img in enumerate(images) if img.get("default")]
    for i in defaults[1:]:
        errors.add(("images", i, "default"), f"only one image may be the default (images[{defaults[0]}] already is)")
    for i, reg in enumerate(data.get("registries") or []):
        if reg["teams"] != "all":
            for j, name in enumerate(reg["teams"]):
                if name not in seen_team:
                    errors.add(("registries", i, "teams", j), f"no team {name!r} in this file")
    _check_volumes(data, seen_team, {m["user"] for t in teams for m in t.get("members") or []}, errors)


def _check_namespaces(data: dict, errors: _Errors) -> None:
    """No team in a system namespace (as its name or its ``namespace:``), and no team named like another
    team's namespace (the page, the pools and the DAG params name a team; its objects live in its namespace)."""
    teams = data.get("teams") or []
    namespaces = {t.get("namespace", t["name"]): i for i, t in enumerate(teams)}
    for i, team in enumerate(teams):
        for key in ("name", "namespace"):
            value = team.get(key)
            if value in SYSTEM_NAMESPACES or (isinstance(value, str) and value.startswith("kube-")):
                errors.add(("teams", i, key), f"{value!r} is a Kubernetes system namespace (reserved: "
                           f"{', '.join(SYSTEM_NAMESPACES)} and every 'kube-' name); choose another")
        other = namespaces.get(team["name"], i)
        if other != i:
            errors.add(("teams", i, "name"), f"{team['name']!r} is the namespace of teams[{other}]; "
                       "a team's name may not be another team's namespace")


def _derived_names(team: dict) -> list[tuple[str, str, str]]:
    """(kind, name, what it is) of every cluster-wide name a team derives, besides its namespace (checked by
    ``_check_names``): its ClusterQueues and its Airflow pool. Names inside its namespace cannot meet another
    team's (no two teams share a namespace)."""
    training, dev = queue_names(team["name"])
    return [("ClusterQueue", training, "its training queue"), ("ClusterQueue", dev, "its instances' queue"),
            ("Airflow pool", POOL_PREFIX + team["name"], "its pool")]


def _check_derived_names(data: dict, errors: _Errors) -> None:
    """Every derived name unique across the file: team ``ml``'s instances' ClusterQueue ``ml-dev`` is also team
    ``ml-dev``'s training queue; both would be rendered, one overwriting the other (issue 30, class 3). The later
    team is refused, naming the earlier one (in every queueing mode: a file must stay valid when it switches)."""
    owner: dict[tuple[str, str], tuple[int, str]] = {}
    for i, team in enumerate(data.get("teams") or []):
        for kind, name, what in _derived_names(team):
            first = owner.setdefault((kind, name), (i, what))
            if first[0] != i:
                earlier = (data["teams"][first[0]])["name"]
                errors.add(("teams", i, "name"), f"team {short_repr(team['name'])} derives {kind} {short_repr(name)} "
                           f"({what}), which teams[{first[0]}] ({short_repr(earlier)}) already derives "
                           f"({first[1]}); rename one of them")


def _check_values(data: dict, errors: _Errors) -> None:
    """Values the schema admits that nothing should accept."""
    resource = ((data.get("node_pools") or {}).get("gpu") or {}).get("resource")
    if resource is not None and not is_extended_resource(resource):
        errors.add(("node_pools", "gpu", "resource"), f"{short_repr(resource)} is not an extended resource name "
                   "(a domain-qualified name such as 'nvidia.com/gpu'; not cpu, memory or another native "
                   "resource)")
    for i, img in enumerate(data.get("images") or []):
        masked = image_credentials(img["image"])
        if masked is not None:
            errors.add(("images", i, "image"), f"{short_repr(masked)} carries credentials ('user:token@'): an "
                       "image reference is shown to every member; put them in a pull secret (registries:)")
    for key in ("default_cpu", "default_memory"):
        value = (data.get("limit_range") or {}).get(key)
        if value is not None and parse_quantity(value) <= 0:
            errors.add(("limit_range", key), f"{short_repr(value)} must be more than zero")


def _check_volumes(data: dict, teams: dict[str, int], users: set[str], errors: _Errors) -> None:
    seen: set[tuple[str, str]] = set()
    team_list = data.get("teams") or []
    for i, vol in enumerate(data.get("volumes") or []):
        if vol["team"] not in teams:
            errors.add(("volumes", i, "team"), f"no team {vol['team']!r} in this file")
            continue
        key = (vol["team"], vol["name"])
        if key in seen:
            errors.add(("volumes", i, "name"), f"volume {vol['name']!r} is listed twice for team {vol['team']!r}")
        seen.add(key)
        members = [m["user"] for m in team_list[teams[vol["team"]]].get("members") or []]
        if vol["name"] in {home_pvc(u) for u in members}:
            errors.add(("volumes", i, "name"), f"{vol['name']!r} is a member's home PVC name")
        if vol.get("owner") is not None and vol["owner"] not in users:
            errors.add(("volumes", i, "owner"), f"no user {vol['owner']!r} in any team")
        for role in ("readers", "writers"):
            for j, grantee in enumerate(vol.get(role) or []):
                if grantee.startswith(TEAM_PREFIX):
                    if grantee[len(TEAM_PREFIX):] not in teams:
                        errors.add(("volumes", i, role, j), f"no team {grantee[len(TEAM_PREFIX):]!r} in this file")
                elif grantee not in users:
                    errors.add(("volumes", i, role, j), f"no user {grantee!r} in any team")


def _check_storage(data: dict, errors: _Errors) -> None:
    """Members' default PVCs plus the team's shared volumes must fit ``requests.storage``."""
    size = parse_quantity((data.get("users") or {}).get("default_pvc_size", "5Gi"))
    for i, team in enumerate(data.get("teams") or []):
        members = len(team.get("members") or [])
        shared = sum((parse_quantity(v["size"]) for v in data.get("volumes") or [] if v["team"] == team["name"]),
                     Decimal(0))
        need, quota = size * members + shared, parse_quantity(team["quota"]["storage"])
        if need > quota:
            errors.add(("teams", i, "quota", "storage"),
                       f"team {team['name']}: {members} members' default PVCs ({members} × {human(size, True)}) "
                       f"and shared volumes ({human(shared, True)}) need {human(need, True)}, "
                       f"quota {human(quota, True)}")


def _build(data: dict, source: str, node_defaults: NodePools) -> Platform:
    users = data.get("users") or {}
    limits = data.get("limit_range") or {}
    default_cpu = quantity_text(limits.get("default_cpu", "1"))
    pools = (data.get("node_pools") or {})
    gpu, online = pools.get("gpu") or {}, pools.get("online") or {}
    node_pools = NodePools(
        gpu_resource=gpu.get("resource", node_defaults.gpu_resource),
        gpu_taint_key=gpu.get("taint_key", node_defaults.gpu_taint_key),
        gpu_taint_value=gpu.get("taint_value", node_defaults.gpu_taint_value),
        gpu_taint_effect=gpu.get("taint_effect", node_defaults.gpu_taint_effect),
        online_key=online.get("key", node_defaults.online_key),
        online_value=online.get("value", node_defaults.online_value),
        online_taint_effect=online.get("taint_effect", node_defaults.online_taint_effect),
    )
    secrets: dict[str, list[str]] = {}
    for reg in data.get("registries") or []:
        for t in data["teams"]:
            if reg["teams"] == "all" or t["name"] in reg["teams"]:
                secrets.setdefault(t["name"], []).append(reg["secret"])
    teams = []
    for t in data.get("teams") or []:
        q = t["quota"]
        quota = Quota(cpu=quantity_text(q["cpu"]), memory=quantity_text(q["memory"]),
                      gpu=quantity_text(q.get("gpu", 0)), storage=quantity_text(q["storage"]),
                      pods=q.get("pods"), jobs=q.get("jobs"))
        slots = t.get("pool_slots", "from_quota")
        teams.append(Team(
            name=t["name"], namespace=t.get("namespace", t["name"]), quota=quota,
            members=tuple(Member(m["user"], m.get("email"), m.get("role", "member")) for m in t.get("members") or []),
            allow_online=t.get("allow_online", False),
            pull_secrets=tuple(dict.fromkeys(secrets.get(t["name"], []))),
            pool_slots=pool_slots(quota, default_cpu) if slots == "from_quota" else slots,
            kueue_flavors=kueue.flavor_quotas((t.get("kueue") or {}).get("flavors"),
                                              kueue.default_flavors(quota, t.get("allow_online", False))),
            kueue_dev=kueue.flavor_quotas((t.get("kueue") or {}).get("dev"), {}),
            pod_security=PodSecurity(**(t.get("pod_security") or {})),
        ))
    return Platform(
        source=source, teams=tuple(teams),
        images=tuple(Image(i["name"], i["image"], i.get("gpu", False), i.get("description", ""), i.get("default", False))
                     for i in data.get("images") or []),
        volumes=tuple(SharedVolume(
            name=v["name"], team=v["team"], size=quantity_text(v["size"]), owner=v.get("owner"),
            access_mode=v.get("access_mode", "ReadWriteMany"), storage_class=v.get("storage_class", users.get("storage_class")),
            readers=tuple(v.get("readers") or ()), writers=tuple(v.get("writers") or ()),
        ) for v in data.get("volumes") or []),
        node_pools=node_pools,
        default_pvc_size=quantity_text(users.get("default_pvc_size", "5Gi")),
        storage_class=users.get("storage_class"),
        default_cpu=default_cpu,
        default_memory=quantity_text(limits.get("default_memory", "2Gi")),
        queueing=data.get("queueing", "quota"),
        cohort=(data.get("kueue") or {}).get("cohort", "skiff"),
        pods_ready=PodsReady(**(data.get("kueue") or {})["wait_for_pods_ready"])
        if "wait_for_pods_ready" in (data.get("kueue") or {}) else None,
    )


def parse_platform(text: str, source: str = "platform.yaml", node_defaults: NodePools | None = None) -> Platform:
    """Validate ``text`` (the file's content) and build the ``Platform``; raises ``PlatformError``."""
    data, lines = _read_yaml(text, source)
    errors = _Errors(source, lines)
    if not isinstance(data, dict):
        errors.add((), "the platform file must be a mapping with at least 'teams'")
        errors.raise_if_any()
    teams = data.get("teams")
    if isinstance(teams, list) and len(teams) > MAX_TEAMS:
        errors.add(("teams",), f"{len(teams)} teams; a platform file may have at most {MAX_TEAMS}")
        errors.raise_if_any()
    _validate_schema(data, errors)
    errors.raise_if_any()
    _check_names(data, errors)
    _check_namespaces(data, errors)
    _check_derived_names(data, errors)
    _check_values(data, errors)
    _check_storage(data, errors)
    kueue.check_blocks(data, errors)
    errors.raise_if_any()
    return _build(data, source, node_defaults or NodePools())
