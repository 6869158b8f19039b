"""Authentication and authorization in front of kubesim's API (`KubeSim(authz="rbac")`, `--authz rbac`).

As kube-apiserver: a bearer token names the user (401 `Unauthorized` for a token nobody issued; no token
= `system:anonymous`); the request becomes authorizer attributes (`request_attributes`, the apiserver's
RequestInfoFactory: verb from method + `watch`, `namespaces/<n>` is namespace `n`, subresources such as
`pods/log`, `services/proxy`); RBAC (`kubesim.apiserver.auth.rbac`) allows it or it gets the real 403 Status. Writes of
RBAC objects pass the escalation check: a binding needs `bind` on its role or every permission in it, a
role needs `escalate` or every permission it grants.

Identities: the admin token (`ADMIN_TOKEN`, what `write_kubeconfig` puts in kubesim's own kubeconfig) is a
member of `system:masters`; ServiceAccount tokens come from the TokenRequest API
(`POST .../serviceaccounts/<name>/token`, as `kubectl create token`) and stop working when that
ServiceAccount is deleted or the token expires; people (RBAC `User` subjects) have static tokens, as with
kube-apiserver's `--token-auth-file` (`add_user_token`, `load_token_auth_file`: `token,user,uid,"group1,group2"`
lines), each also in `system:authenticated`. Controllers inside kubesim call the store directly and are
not subject to authorization (like the real controller-manager's super-user-ish roles).

Not simulated: client certificates, impersonation, aggregated ClusterRoles,
the bootstrap roles as objects (their rules live in `rbac.bootstrap_rules`). The review APIs
(`kubectl auth can-i`) are access_review.py's.
"""
from __future__ import annotations

import json
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import timedelta

from kubesim.apimachinery.errors import ApiError, not_found
from kubesim.apiserver.auth.rbac import (
    ANONYMOUS,
    MASTERS,
    UNAUTHENTICATED,
    Attributes,
    Policy,
    User,
    allows,
    forbidden_message,
    service_account_user,
    uncovered,
)
from kubesim.apiserver.endpoints.wire import response
from kubesim.kubeconfig import write_kubeconfig

ADMIN_TOKEN = "kubesim"
ADMIN = User("kubesim-admin", (MASTERS, "system:authenticated"))
RBAC_GROUP = "rbac.authorization.k8s.io"
_BINDINGS = {"rolebindings", "clusterrolebindings"}
_ROLES = {"roles", "clusterroles"}
_TRUE = ("true", "True", "1")
APPLY = "application/apply-patch+yaml"


@dataclass
class _Token:
    namespace: str
    name: str
    uid: str
    expires: object          # aware datetime


class Access:
    """Token issuing (always served, as TokenRequest is) and, when `enforce`, authn + RBAC per request."""

    def __init__(self, store, enforce: bool = False):
        self.store = store
        self.enforce = enforce
        self._tokens: dict[str, _Token] = {}
        self._lock = threading.Lock()
        self.denials: list[Attributes] = []     # every 403 answered (tests: which permission was missing)
        self._policies: dict[str, Policy] = {}    # namespace -> Policy, valid at store resourceVersion _policy_rv
        self._policy_rv: str | None = None
        self._static: dict[str, User] = {}     # --token-auth-file: token -> user

    # ---- static tokens (kube-apiserver --token-auth-file) -------------------------------------------------

    def add_user_token(self, token: str, name: str, groups: tuple[str, ...] | list[str] = (), uid: str = "") -> User:
        """A person's bearer token, as one line of a token auth file; the user is also `system:authenticated`
        (the apiserver adds it to every authenticated user)."""
        if not token or not name:
            raise ValueError("a static token needs a token and a user name")
        user = User(name, tuple(dict.fromkeys([*groups, "system:authenticated"])), uid)
        with self._lock:
            self._static[token] = user
        return user

    def load_token_auth_file(self, path) -> list[User]:
        """`--token-auth-file`: CSV lines `token,user,uid[,"group1,group2"]`, as kube-apiserver reads them."""
        import csv
        from pathlib import Path

        users = []
        for i, row in enumerate(csv.reader(Path(path).read_text().splitlines()), 1):
            if not row or row[0].startswith("#"):
                continue
            if len(row) < 3:
                raise ValueError(f"{path}:{i}: want token,user,uid[,groups], got {len(row)} field(s)")
            groups = [g.strip() for g in row[3].split(",") if g.strip()] if len(row) > 3 else []
            users.append(self.add_user_token(row[0], row[1], groups, row[2]))
        return users

    # ---- TokenRequest ---------------------------------------------------------------------------------

    def token_request(self, namespace: str, name: str, body: dict | None) -> dict:
        """`POST serviceaccounts/<name>/token`: a TokenRequest with `status.token` for that ServiceAccount."""
        sa = self.store.get(self._rt("", "serviceaccounts"), namespace, name)      # 404 like the real one
        spec = dict((body or {}).get("spec") or {})
        seconds = int(spec.get("expirationSeconds") or 3600)
        if seconds < 600:
            raise ApiError(422, 'TokenRequest.authentication.k8s.io "' + name + '" is invalid: '
                                "spec.expirationSeconds: Invalid value: " + str(seconds) +
                           ": may not specify a duration less than 10 minutes", "Invalid")
        now = self.store.clock.now()
        token = "kubesim-sa." + secrets.token_urlsafe(32)
        with self._lock:
            self._tokens[token] = _Token(namespace, name, sa["metadata"]["uid"], now + timedelta(seconds=seconds))
        spec.setdefault("audiences", ["https://kubernetes.default.svc.cluster.local"])
        spec["expirationSeconds"] = seconds
        spec.setdefault("boundObjectRef", None)
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": namespace,
                             "creationTimestamp": self.store.clock.rfc3339(now)},
                "spec": spec,
                "status": {"token": token,
                           "expirationTimestamp": self.store.clock.rfc3339(now + timedelta(seconds=seconds))}}

    # ---- authentication -------------------------------------------------------------------------------

    def authenticate(self, authorization: str | None) -> User:
        if not authorization:
            return User(ANONYMOUS, (UNAUTHENTICATED,))
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token == ADMIN_TOKEN:
            return ADMIN
        with self._lock:
            static = self._static.get(token) if scheme.lower() == "bearer" else None
            issued = self._tokens.get(token) if scheme.lower() == "bearer" else None
        if static is not None:
            return static
        if issued is not None and issued.expires > self.store.clock.now():
            try:
                sa = self.store.get(self._rt("", "serviceaccounts"), issued.namespace, issued.name)
            except ApiError:
                sa = None
            if sa is not None and sa["metadata"]["uid"] == issued.uid and not sa["metadata"].get("deletionTimestamp"):
                return service_account_user(issued.namespace, issued.name, issued.uid)
        raise ApiError(401, "Unauthorized", "Unauthorized")

    # ---- authorization --------------------------------------------------------------------------------

    async def check(self, request) -> None:
        """The hook in kubesim's request path: raise 401/403 as kube-apiserver would, else return."""
        if not self.enforce:
            return
        user = self.authenticate(request.headers.get("Authorization"))
        attrs = request_attributes(user, request.method, request.path, request.query)
        policy = self.policy(attrs.namespace)
        if not allows(policy, attrs):
            self._deny(attrs)
        if attrs.verb == "patch" and request.content_type == APPLY and not attrs.subresource and not self._live(attrs):
            # server-side apply of an object that does not exist creates it: also needs `create`
            # (the apiserver's patch handler authorizes the create it turns into)
            creating = Attributes(**{**attrs.__dict__, "verb": "create"})
            if not allows(policy, creating):
                self._deny(creating)
        if (attrs.verb == "get" and attrs.resource == "pods" and attrs.subresource in ("exec", "attach", "portforward")
                and request.headers.get("Upgrade", "").lower() == "websocket"):
            # a WebSocket's handshake is a GET; SPDY's a POST (create): kube-apiserver asks for create as well
            # (feature AuthorizePodWebsocketUpgradeCreatePermission, on by default since 1.35)
            upgrading = Attributes(**{**attrs.__dict__, "verb": "create"})
            if not allows(policy, upgrading):
                self._deny(upgrading)
        if attrs.api_group == RBAC_GROUP and attrs.verb in ("create", "update", "patch") and not attrs.subresource:
            self._check_escalation(attrs, await _json_body(request))

    def denials_body(self) -> dict:
        """`GET /kubesim/denials`: every 403 RBAC answered, oldest first."""
        with self._lock:
            return {"denials": [{**{k: v for k, v in d.__dict__.items() if k != "user"}, "user": d.user.name}
                                for d in self.denials]}

    def _deny(self, attrs: Attributes) -> None:
        with self._lock:
            if len(self.denials) < 10000:
                self.denials.append(attrs)
        raise forbidden(attrs)

    def policy(self, namespace: str) -> Policy:
        """The RBAC objects that decide a request in `namespace`: read from the store, and reused while the
        store's resourceVersion has not moved (any write anywhere invalidates, so it is always current)."""
        with self.store.lock:
            rv = self.store.resource_version
            with self._lock:
                if self._policy_rv != rv:
                    self._policies, self._policy_rv = {}, rv
                cached = self._policies.get(namespace)
            if cached is None:
                cached = self._read_policy(namespace)
                with self._lock:
                    if self._policy_rv == rv:
                        self._policies[namespace] = cached
        return cached

    def _read_policy(self, namespace: str) -> Policy:
        def items(plural: str, ns: str | None = None) -> list[dict]:
            return self.store.list(self._rt(RBAC_GROUP, plural), ns)[0]
        roles = {(r["metadata"]["namespace"], r["metadata"]["name"]): r
                 for r in (items("roles", namespace) if namespace else [])}
        return Policy(roles=roles,
                      cluster_roles={r["metadata"]["name"]: r for r in items("clusterroles")},
                      role_bindings=items("rolebindings", namespace) if namespace else [],
                      cluster_role_bindings=items("clusterrolebindings"))

    def allowed(self, user: User, verb: str, resource: str, *, group: str = "", subresource: str = "",
                namespace: str = "", name: str = "") -> bool:
        """`kubectl auth can-i` in-process (tests): would `user` be allowed this request?"""
        attrs = Attributes(user, verb, api_group=group, resource=resource, subresource=subresource,
                           namespace=namespace, name=name)
        return allows(self.policy(namespace), attrs)

    def _check_escalation(self, attrs: Attributes, body: dict | None) -> None:
        ns = attrs.namespace
        if attrs.resource in _BINDINGS:
            ref = (body or {}).get("roleRef")
            if ref is None and attrs.name:       # a patch without roleRef keeps the (immutable) live one
                ref = self._live(attrs).get("roleRef")
            if not ref:
                return                            # validation answers 422 for a binding without roleRef
            plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            can_bind = Attributes(attrs.user, "bind", api_group=RBAC_GROUP, resource=plural,
                                  namespace=ns, name=ref.get("name") or "")
            policy = self.policy(ns)
            if allows(policy, can_bind):
                return                            # the role need not exist (nor be read) then
            if not policy.has_role(ref, ns):
                # GetRoleReferenceRules: without `bind`, the rules must be read, and a missing role is a 404
                rt = self._rt(RBAC_GROUP, plural)
                raise not_found(rt, ref.get("name") or "")
            granted = policy.role_rules(ref, ns)
        elif attrs.resource in _ROLES:
            can_escalate = Attributes(attrs.user, "escalate", api_group=RBAC_GROUP, resource=attrs.resource,
                                      namespace=ns, name=attrs.name or _name_of(body))
            policy = self.policy(ns)
            if allows(policy, can_escalate):
                return
            granted = (body or {}).get("rules") or []
        else:
            return
        missing = uncovered(policy, attrs.user, ns, granted)
        if missing:
            with self._lock:     # what would have allowed it: `bind` / `escalate` on that role
                self.denials.append(can_bind if attrs.resource in _BINDINGS else can_escalate)
            raise escalation_forbidden(attrs, _name_of(body) or attrs.name, missing)

    def _live(self, attrs: Attributes) -> dict:
        """The object the request names, or {} (also for a resource kubesim does not serve)."""
        rts = self.store.registry.versions_of(attrs.api_group, attrs.resource)
        if not rts or not attrs.name:
            return {}
        ns = attrs.namespace if rts[0].namespaced else None
        try:
            return self.store.get(rts[0], ns, attrs.name)
        except ApiError:
            return {}

    def _rt(self, group: str, plural: str):
        return self.store.registry.lookup(group, "v1", plural)


def forbidden(attrs: Attributes) -> ApiError:
    return ApiError(403, forbidden_message(attrs), "Forbidden", name=attrs.name or None, group=attrs.api_group,
                    kind=attrs.resource if attrs.resource_request else None)


def escalation_forbidden(attrs: Attributes, name: str, missing: list[dict]) -> ApiError:
    groups = " ".join(f'"{g}"' for g in attrs.user.groups)
    lines = "\n".join(_rule_text(r) for r in missing)
    qualified = f"{attrs.resource}.{RBAC_GROUP}"
    return ApiError(403, f'{qualified} "{name}" is forbidden: user "{attrs.user.name}" (groups=[{groups}]) is '
                         f"attempting to grant RBAC permissions not currently held:\n{lines}", "Forbidden",
                    name=name, group=RBAC_GROUP, kind=attrs.resource)


def _rule_text(rule: dict) -> str:
    parts = []
    for key, label in (("apiGroups", "APIGroups"), ("resources", "Resources"), ("resourceNames", "ResourceNames"),
                       ("nonResourceURLs", "NonResourceURLs"), ("verbs", "Verbs")):
        if rule.get(key):
            parts.append(f"{label}:[" + " ".join(f'"{v}"' for v in rule[key]) + "]")
    return "{" + ", ".join(parts) + "}"


def _name_of(body) -> str:
    return ((body or {}).get("metadata") or {}).get("name") or "" if isinstance(body, dict) else ""


async def _json_body(request) -> dict | None:
    raw = await request.read()          # aiohttp keeps the body: the handler reads it again
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        import yaml
        try:
            body = yaml.safe_load(raw)
        except yaml.YAMLError:
            return None
    return body if isinstance(body, dict) else None


def request_attributes(user: User, method: str, path: str, query) -> Attributes:
    """k8s.io/apiserver RequestInfoFactory.NewRequestInfo, for the paths kubesim serves."""
    segs = [s for s in path.split("/") if s]
    if segs[:1] == ["api"] and len(segs) >= 3:
        group, rest = "", segs[2:]
    elif segs[:1] == ["apis"] and len(segs) >= 4:
        group, rest = segs[1], segs[3:]
    else:
        return Attributes(user, method.lower() if method != "HEAD" else "get", resource_request=False,
                          path=path)
    if method in ("GET", "HEAD") and rest[0] == "watch":        # the deprecated /watch/ prefix
        rest, watch = rest[1:], True
    else:
        watch = query.get("watch") in _TRUE
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "get")
    if method in ("GET", "HEAD"):
        verb = "watch" if watch else ("get" if name else "list")
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    if not name and verb in ("list", "watch"):      # a list of one name is authorized for that name
        fs = query.get("fieldSelector") or ""
        if fs.startswith("metadata.name=") and "," not in fs:
            name = fs.split("=", 1)[1]
    return Attributes(user, verb, api_group=group, resource=resource, subresource=sub, namespace=namespace,
                      name=name, path=path)


# ---- routes (registered on app.ApiServer) -------------------------------------------------------------

TOKEN_PATH = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/serviceaccounts/(?P<name>[^/]+)/token$")


def add_token_route(api) -> None:
    """`POST .../serviceaccounts/<name>/token` (TokenRequest) on an ``ApiServer``, behind its middleware."""
    async def handle(request, match: re.Match):
        if request.method != "POST":
            raise ApiError(405, "the server does not allow this method on the requested resource",
                           "MethodNotAllowed")
        body = await _json_body(request)
        return response(api.access.token_request(match["namespace"], match["name"], body), 201)
    api.routes.append((TOKEN_PATH, handle))


# ---- kubeconfigs for ServiceAccounts --------------------------------------------------------------------

def request_token(url: str, namespace: str, name: str, *, admin_token: str = ADMIN_TOKEN,
                  expiration_seconds: int = 48 * 3600) -> str:
    """A ServiceAccount token from the TokenRequest API (what `kubectl create token NAME -n NS` does)."""
    import urllib.request
    body = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                       "spec": {"expirationSeconds": expiration_seconds}}).encode()
    req = urllib.request.Request(f"{url}/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", data=body,
                                 method="POST", headers={"Content-Type": "application/json",
                                                         "Authorization": f"Bearer {admin_token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())["status"]["token"]


def write_service_account_kubeconfig(url: str, namespace: str, name: str, path, **kw):
    """A kubeconfig acting as ServiceAccount `namespace/name` (the identity Skiff's pods have in-cluster)."""
    token = request_token(url, namespace, name, **kw)
    return write_kubeconfig(url, path, token=token, user=f"{namespace}-{name}", namespace=namespace)
