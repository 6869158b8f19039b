"""RBAC evaluation as kube-apiserver's RBAC authorizer does it (plugin/pkg/auth/authorizer/rbac), pure.

`Attributes` is what a request asks for (the apiserver's RequestInfo + the user); `rules_for` collects the
PolicyRules the user holds from ClusterRoleBindings (everywhere) and, for a namespaced request, the
RoleBindings of that namespace (to a Role of the namespace or a ClusterRole, granted in that namespace
only); `allows` says whether one of them matches. The matching functions follow rbac/v1's helpers:
`*` for verbs, groups and resources; `*/status` for any resource's subresource; resourceNames limit a rule
to those names (so a rule with names never allows list, watch, create or deletecollection); nonResourceURLs
match exactly or by a trailing `*` prefix.

The bootstrap policy every cluster has (system:discovery, system:basic-user, system:public-info-viewer)
is held here as rules rather than as ClusterRole objects, so kubesim's object counts stay as before.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""


def service_account_user(namespace: str, name: str, uid: str = "") -> User:
    """The identity of a ServiceAccount token (what the apiserver's token authenticator gives)."""
    return User(f"{SA_PREFIX}{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED), uid)


@dataclass(frozen=True)
class Attributes:
    """authorizer.Attributes: who asks to do what (resource requests) or which path (non-resource)."""
    user: User
    verb: str
    resource_request: bool = True
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""


# the bootstrap ClusterRoles bound to every authenticated (and, for public info, anonymous) user
_DISCOVERY = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/version", "/version/",
              "/openapi", "/openapi/*"]
_PUBLIC_INFO = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
_SELF_REVIEWS = {"apiGroups": ["authorization.k8s.io"], "verbs": ["create"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}
# system:basic-user also lets everyone ask who they are (bootstrappolicy/policy.go, kubernetes PR #116274)
_WHOAMI = {"apiGroups": ["authentication.k8s.io"], "verbs": ["create"], "resources": ["selfsubjectreviews"]}


def bootstrap_rules(user: User) -> list[dict]:
    if AUTHENTICATED in user.groups:
        return [{"nonResourceURLs": _DISCOVERY, "verbs": ["get"]}, _SELF_REVIEWS, _WHOAMI]
    return [{"nonResourceURLs": _PUBLIC_INFO, "verbs": ["get"]}]


def _any(values, wanted: str) -> bool:
    return "*" in values or wanted in values


def resource_matches(rule: dict, attrs: Attributes) -> bool:
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    for res in rule.get("resources") or []:
        if res in ("*", combined):
            return True
        if attrs.subresource and res == f"*/{attrs.subresource}":
            return True
    return False


def _url_matches(rule: dict, path: str) -> bool:
    for url in rule.get("nonResourceURLs") or []:
        if url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    if not _any(rule.get("verbs") or [], attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    if not _any(rule.get("apiGroups") or [], attrs.api_group) or not resource_matches(rule, attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def subject_matches(subject: dict, user: User, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return user.name == f"{SA_PREFIX}{ns}:{subject.get('name')}"
    return False


@dataclass
class Policy:
    """The RBAC objects rules are resolved from: roles by (namespace, name), cluster roles by name."""
    roles: dict[tuple[str, str], dict] = field(default_factory=dict)
    cluster_roles: dict[str, dict] = field(default_factory=dict)
    role_bindings: list[dict] = field(default_factory=list)        # of the request's namespace
    cluster_role_bindings: list[dict] = field(default_factory=list)

    def has_role(self, ref: dict, namespace: str) -> bool:
        if ref.get("kind") == "ClusterRole":
            return ref.get("name") in self.cluster_roles
        return (namespace, ref.get("name")) in self.roles

    def role_rules(self, ref: dict, namespace: str) -> list[dict]:
        if ref.get("kind") == "ClusterRole":
            role = self.cluster_roles.get(ref.get("name"))
        else:
            role = self.roles.get((namespace, ref.get("name")))
        return list((role or {}).get("rules") or [])


def rules_for(policy: Policy, user: User, namespace: str) -> list[dict]:
    """Every rule `user` holds for a request in `namespace` ("" = cluster scope)."""
    rules = bootstrap_rules(user)
    for crb in policy.cluster_role_bindings:
        if any(subject_matches(s, user, "") for s in crb.get("subjects") or []):
            rules += policy.role_rules(crb.get("roleRef") or {}, "")
    if namespace:
        for rb in policy.role_bindings:
            if rb["metadata"].get("namespace") != namespace:
                continue
            if any(subject_matches(s, user, namespace) for s in rb.get("subjects") or []):
                rules += policy.role_rules(rb.get("roleRef") or {}, namespace)
    return rules


def allows(policy: Policy, attrs: Attributes) -> bool:
    if MASTERS in attrs.user.groups:
        return True
    return any(rule_allows(r, attrs) for r in rules_for(policy, attrs.user, attrs.namespace))


def forbidden_message(attrs: Attributes) -> str:
    """responsewriters.forbiddenMessage + apierrors.NewForbidden: the 403 Status message, verbatim."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if attrs.namespace:
        why = (f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
               f'in the namespace "{attrs.namespace}"')
    else:
        why = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" at the cluster scope'
    qualified = attrs.resource if not attrs.api_group else f"{attrs.resource}.{attrs.api_group}"
    if attrs.name:
        return f'{qualified} "{attrs.name}" is forbidden: {why}'
    return f"{qualified} is forbidden: {why}"


def uncovered(owner: Policy, user: User, namespace: str, rules: list[dict]) -> list[dict]:
    """The atoms of `rules` (one verb, group, resource, name each) that `user` does not hold in `namespace`:
    RBAC's escalation check (rbac/validation.ConfirmNoEscalation) for granting or binding `rules`."""
    if MASTERS in user.groups:
        return []
    held = rules_for(owner, user, namespace)
    missing = []
    for rule in rules:
        for atom in _atoms(rule):
            attrs = _atom_attributes(user, namespace, atom)
            if not any(rule_allows(r, attrs) for r in held):
                missing.append(atom)
    return missing


def _atoms(rule: dict) -> list[dict]:
    verbs = rule.get("verbs") or []
    if rule.get("nonResourceURLs"):
        return [{"nonResourceURLs": [u], "verbs": [v]} for u in rule["nonResourceURLs"] for v in verbs]
    out = []
    for g in rule.get("apiGroups") or []:
        for res in rule.get("resources") or []:
            for v in verbs:
                for n in rule.get("resourceNames") or [""]:
                    atom = {"apiGroups": [g], "resources": [res], "verbs": [v]}
                    if n:
                        atom["resourceNames"] = [n]
                    out.append(atom)
    return out


def _atom_attributes(user: User, namespace: str, atom: dict) -> Attributes:
    if "nonResourceURLs" in atom:
        return Attributes(user, atom["verbs"][0], resource_request=False, path=atom["nonResourceURLs"][0])
    resource, _, sub = atom["resources"][0].partition("/")
    return Attributes(user, atom["verbs"][0], api_group=atom["apiGroups"][0], resource=resource,
                      subresource=sub, namespace=namespace, name=(atom.get("resourceNames") or [""])[0])
