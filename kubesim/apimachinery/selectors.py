"""Label and field selectors: parse the query-string forms kube-apiserver accepts, and match objects."""
from __future__ import annotations

import re
from dataclasses import dataclass

from kubesim.apimachinery.errors import ApiError
from kubesim.apimachinery.names import LABEL_VALUE, QUALIFIED_NAME, SUBDOMAIN


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str                    # "=", "!=", "in", "notin", "exists", "!", and "gt", "lt" (node affinity only)
    values: tuple[str, ...] = ()

    def matches(self, labels: dict) -> bool:
        has = self.key in labels
        val = labels.get(self.key)
        if self.op in ("gt", "lt"):  # integers, as labels.Requirement's GreaterThan / LessThan
            try:
                have, want = int(val), int(self.values[0])
            except (TypeError, ValueError):
                return False
            return have > want if self.op == "gt" else have < want
        if self.op == "=":
            return has and val == self.values[0]
        if self.op == "!=":
            return not has or val != self.values[0]
        if self.op == "in":
            return has and val in self.values
        if self.op == "notin":
            return not has or val not in self.values
        if self.op == "exists":
            return has
        return not has        # "!"


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: dict | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def equality_pairs(self) -> list[tuple[str, str]]:
        """`key=value` requirements: what a label index can answer."""
        return [(r.key, r.values[0]) for r in self.requirements if r.op == "="]

    @property
    def empty(self) -> bool:
        return not self.requirements


def _bad(selector: str, why: str) -> ApiError:
    return ApiError(400, f"unable to parse requirement: {why}", "BadRequest") if selector else ApiError(400, why)


def _check_key(key: str, selector: str) -> None:
    name = key
    if "/" in key:
        prefix, name = key.split("/", 1)
        if not prefix or len(prefix) > 253 or not SUBDOMAIN.match(prefix):
            raise _bad(selector, f'invalid label key "{key}": prefix part must be a lowercase RFC 1123 subdomain')
    if not name or len(name) > 63 or not QUALIFIED_NAME.match(name):
        raise _bad(selector, f'invalid label key "{key}": name part must consist of alphanumeric characters, '
                             "'-', '_' or '.', and must start and end with an alphanumeric character")


def _check_value(value: str, selector: str) -> None:
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise _bad(selector, f'invalid label value: "{value}": a valid label must be an empty string or '
                             "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                             "with an alphanumeric character")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s*\((.*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([^\s=!]+)\s*(==|=|!=)\s*(\S*)\s*$")


def parse_label_selector(text: str | None) -> LabelSelector:
    """`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`; comma = AND. 400 on a parse error."""
    if text is None or not text.strip():
        return LabelSelector()
    if text.count("(") != text.count(")"):
        raise _bad(text, f"found unbalanced parentheses in selector {text!r}")
    reqs = []
    for part in _split_top(text):
        if not part.strip():
            raise _bad(text, f"found '', expected: identifier in selector {text!r}")
        m = _SET_RE.match(part)
        if m:
            key, op, vals = m.group(1), m.group(2), m.group(3)
            values = tuple(v.strip() for v in vals.split(","))
            if values == ("",):
                raise _bad(text, f"for 'in', 'notin' operators, values set can't be empty in {part!r}")
            _check_key(key, text)
            for v in values:
                _check_value(v, text)
            reqs.append(Requirement(key, op, tuple(sorted(set(values)))))
            continue
        m = _EQ_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3)
            _check_key(key, text)
            _check_value(value, text)
            reqs.append(Requirement(key, "=" if op in ("=", "==") else "!=", (value,)))
            continue
        stripped = part.strip()
        if stripped.startswith("!"):
            key = stripped[1:].strip()
            _check_key(key, text)
            reqs.append(Requirement(key, "!"))
            continue
        if re.fullmatch(r"[^\s=!(),]+", stripped):
            _check_key(stripped, text)
            reqs.append(Requirement(stripped, "exists"))
            continue
        raise _bad(text, f"found unexpected token in {part!r}, expected: '=', '!=', '==', 'in', notin'")
    return LabelSelector(tuple(reqs))


def label_selector_from_dict(sel: dict | None) -> LabelSelector:
    """A `metav1.LabelSelector` (matchLabels + matchExpressions), as in Job/Deployment specs."""
    if not sel:
        return LabelSelector()
    reqs = [Requirement(k, "=", (v,)) for k, v in (sel.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in sel.get("matchExpressions") or []:
        reqs.append(Requirement(expr["key"], ops[expr["operator"]], tuple(expr.get("values") or ())))
    return LabelSelector(tuple(reqs))


_NODE_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!", "Gt": "gt", "Lt": "lt"}


def node_selector_requirements(exprs: list[dict]) -> LabelSelector | None:
    """A NodeSelectorTerm's matchExpressions (or matchFields) as a selector, as nodeaffinity's
    NodeSelectorRequirementsAsSelector makes one; None when a requirement is invalid (an unknown operator,
    In/NotIn without values, Gt/Lt without exactly one integer): the term then matches no node."""
    reqs = []
    for expr in exprs:
        op, values = _NODE_OPS.get(expr.get("operator")), tuple(expr.get("values") or ())
        if op is None or (op in ("in", "notin") and not values) or (op in ("exists", "!") and values):
            return None
        if op in ("gt", "lt") and not (len(values) == 1 and _integer(values[0])):
            return None
        reqs.append(Requirement(expr.get("key") or "", op, values))
    return LabelSelector(tuple(reqs))


def _integer(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def selector_from_map(labels: dict | None) -> LabelSelector:
    """A map selector (`Service.spec.selector`, `nodeSelector`): every key=value must hold."""
    return LabelSelector(tuple(Requirement(k, "=", (v,)) for k, v in (labels or {}).items()))


# ---- field selectors -------------------------------------------------------------------------------

def _path(*keys):
    def get(obj):
        cur = obj
        for k in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(k)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)
    return get


def _event_source(obj):
    return (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""


_COMMON = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}
_EVENT_FIELDS = {
    "involvedObject.kind": _path("involvedObject", "kind"),
    "involvedObject.namespace": _path("involvedObject", "namespace"),
    "involvedObject.name": _path("involvedObject", "name"),
    "involvedObject.uid": _path("involvedObject", "uid"),
    "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
    "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
    "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
    "reason": _path("reason"),
    "reportingComponent": _path("reportingComponent"),
    "source": _event_source,
    "type": _path("type"),
}
_EVENTS_K8S_IO_FIELDS = {
    "regarding.kind": _path("regarding", "kind"),
    "regarding.namespace": _path("regarding", "namespace"),
    "regarding.name": _path("regarding", "name"),
    "regarding.uid": _path("regarding", "uid"),
    "regarding.fieldPath": _path("regarding", "fieldPath"),
    "reason": _path("reason"),
    "reportingController": _path("reportingController"),
    "type": _path("type"),
}
# (group, plural) -> the fields the real server supports beyond metadata.name/namespace.
FIELDS: dict[tuple[str, str], dict] = {
    ("", "pods"): {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    ("", "events"): _EVENT_FIELDS,
    ("events.k8s.io", "events"): _EVENTS_K8S_IO_FIELDS,
    ("", "secrets"): {"type": _path("type")},
    ("", "nodes"): {"spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable")
                    else "false"},
    ("", "namespaces"): {"status.phase": _path("status", "phase")},
    ("", "persistentvolumeclaims"): {},
    ("", "persistentvolumes"): {},
    ("batch", "jobs"): {"status.successful": lambda o: str((o.get("status") or {}).get("successful") or 0)},
    ("apps", "replicasets"): {"status.replicas": lambda o: str((o.get("status") or {}).get("replicas") or 0)},
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str
    getter: object

    def matches(self, obj: dict) -> bool:
        return (self.getter(obj) == self.value) != self.negate


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: dict) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def exact_name(self) -> str | None:
        for r in self.requirements:
            if r.field == "metadata.name" and not r.negate:
                return r.value
        return None


def _unescape(v: str) -> str:
    return v.replace(r"\,", ",").replace(r"\=", "=").replace("\\\\", "\\")


def parse_field_selector(text: str | None, rt=None) -> FieldSelector:
    """`f=v`, `f==v`, `f!=v`, comma = AND; only the fields the real server supports for the kind."""
    if text is None or not text.strip():
        return FieldSelector()
    supported = dict(_COMMON)
    if rt is not None:
        supported.update(FIELDS.get((rt.group, rt.plural), {}))
    reqs = []
    for part in re.split(r"(?<!\\),", text):
        m = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)(.*)$", part)
        if not m:
            raise ApiError(400, f"invalid selector: '{text}'; can't understand '{part}'", "BadRequest")
        field, op, value = m.group(1), m.group(2), _unescape(m.group(3).strip())
        if field not in supported:
            raise ApiError(400, f"field label not supported: {field}", "BadRequest")
        reqs.append(FieldRequirement(field, op == "!=", value, supported[field]))
    return FieldSelector(tuple(reqs))
