"""The authorization.k8s.io/v1 review APIs, answered from kubesim's RBAC (`--authz rbac`) or "allowed" when
authorization is off (kube-apiserver's AlwaysAllow authorizer):

- `SelfSubjectAccessReview`: may I do this? (`kubectl auth can-i`)
- `SubjectAccessReview`: may this user/groups do this? (needs `create subjectaccessreviews` itself)
- `SelfSubjectRulesReview`: what may I do in this namespace? (`kubectl auth can-i --list`)

As k8s.io/kubernetes/pkg/registry/authorization/{selfsubjectaccessreview,subjectaccessreview,
selfsubjectrulesreview}/rest.go: the request comes back with its `status` filled in (201 Created); a spec
with both or neither of resourceAttributes / nonResourceAttributes is 422; the RBAC authorizer's reason names
the binding that allowed it (plugin/pkg/auth/authorizer/rbac/rbac.go `authorizingVisitor`), a denial has no
reason. Non-resource rules come with the bootstrap roles every cluster binds (system:discovery, ...).

And authentication.k8s.io/v1 (pkg/registry/authentication):

- `SelfSubjectReview`: who am I? (`kubectl auth whoami`; selfsubjectreview/rest.go: `status.userInfo` of the
  caller, a fresh creationTimestamp)
- `TokenReview`: who is this token? (tokenreview/storage.go: `status.authenticated`, `status.user`, the
  audiences; an empty `spec.token` is 400)

All six are in discovery, create-only (`registry.REVIEWS`).
"""
from __future__ import annotations

import re

from kubesim.apimachinery.errors import ApiError
from kubesim.apiserver.auth.rbac import (
    ANONYMOUS,
    MASTERS,
    UNAUTHENTICATED,
    Attributes,
    User,
    rule_allows,
    rules_for,
)

GROUP = "authorization.k8s.io"
PATH = re.compile(r"^/apis/authorization\.k8s\.io/v1/(?:namespaces/(?P<ns>[^/]+)/)?"
                  r"(?P<kind>selfsubjectaccessreviews|subjectaccessreviews|selfsubjectrulesreviews|"
                  r"localsubjectaccessreviews)$")
KINDS = {"selfsubjectaccessreviews": "SelfSubjectAccessReview", "subjectaccessreviews": "SubjectAccessReview",
         "selfsubjectrulesreviews": "SelfSubjectRulesReview", "localsubjectaccessreviews": "LocalSubjectAccessReview"}
ALLOW_ALL_RESOURCES = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
ALLOW_ALL_URLS = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]


def attributes(user: User, spec: dict, kind: str) -> Attributes:
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(res) == bool(non):
        raise ApiError(422, f'{kind}.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: '
                            f'"null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
                       "Invalid", group=GROUP, kind=kind,
                       causes=[{"reason": "FieldValueInvalid", "field": "spec.resourceAttributes",
                                "message": 'Invalid value: "null": exactly one of nonResourceAttributes or '
                                           'resourceAttributes must be specified'}])
    if non:
        return Attributes(user, non.get("verb", ""), resource_request=False, path=non.get("path", ""))
    return Attributes(user, res.get("verb", ""), api_group=res.get("group", ""), resource=res.get("resource", ""),
                      subresource=res.get("subresource", ""), namespace=res.get("namespace", ""),
                      name=res.get("name", ""))


def decide(policy, attrs: Attributes, enforce: bool) -> dict:
    """The review's status: allowed, and the RBAC reason when a rule allowed it."""
    if not enforce:
        return {"allowed": True}
    if MASTERS in attrs.user.groups:
        return {"allowed": True, "reason": f'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole '
                                           f'"cluster-admin" to Group "{MASTERS}"'}
    if any(rule_allows(r, attrs) for r in rules_for(policy, attrs.user, attrs.namespace)):
        return {"allowed": True, "reason": "RBAC: allowed"}
    return {"allowed": False}


def rules_status(policy, user: User, namespace: str, enforce: bool) -> dict:
    """SelfSubjectRulesReview's status: the rules split into resource and non-resource rules."""
    if not enforce or MASTERS in user.groups:
        return {"resourceRules": ALLOW_ALL_RESOURCES, "nonResourceRules": ALLOW_ALL_URLS, "incomplete": False}
    resource, non = [], []
    for r in rules_for(policy, user, namespace):
        if r.get("nonResourceURLs"):
            non.append({"verbs": list(r.get("verbs") or []), "nonResourceURLs": list(r["nonResourceURLs"])})
        else:
            rule = {"verbs": list(r.get("verbs") or []), "apiGroups": list(r.get("apiGroups") or []),
                    "resources": list(r.get("resources") or [])}
            if r.get("resourceNames"):
                rule["resourceNames"] = list(r["resourceNames"])
            resource.append(rule)
    return {"resourceRules": resource, "nonResourceRules": non, "incomplete": False}


def review(access, caller: User, plural: str, body: dict, path_ns: str | None) -> dict:
    kind = KINDS[plural]
    spec = body.get("spec") or {}
    if plural == "selfsubjectrulesreviews":
        ns = spec.get("namespace", "")
        status = rules_status(access.policy(ns), caller, ns, access.enforce)
    else:
        user = caller
        if plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
            if not spec.get("user") and not spec.get("groups"):
                raise ApiError(422, f'{kind}.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at '
                                    f'least one of user or group must be specified', "Invalid", group=GROUP, kind=kind)
            user = User(spec.get("user", ""), tuple(spec.get("groups") or ()), spec.get("uid", ""))
        attrs = attributes(user, spec, kind)
        if path_ns is not None and attrs.namespace != path_ns:
            raise ApiError(400, f"spec.resourceAttributes.namespace must match namespace: {path_ns}", "BadRequest")
        status = decide(access.policy(attrs.namespace), attrs, access.enforce)
    md = dict(body.get("metadata") or {})
    md.setdefault("creationTimestamp", None)
    return {"kind": kind, "apiVersion": f"{GROUP}/v1", "metadata": md, "spec": spec, "status": status}


AUTHN = "authentication.k8s.io"
AUTHN_PATH = re.compile(r"^/apis/authentication\.k8s\.io/v1/(?P<kind>selfsubjectreviews|tokenreviews)$")
AUDIENCE = "https://kubernetes.default.svc.cluster.local"     # the API server's own (--api-audiences)


def user_info(user: User) -> dict:
    info = {"username": user.name, "groups": list(user.groups)}
    if user.uid:
        info["uid"] = user.uid
    return info


def caller_of(access, authorization: str | None) -> User:
    """The request's user; with authorization off a token kubesim does not know is anonymous (the token
    authenticator found no one; the anonymous authenticator answers)."""
    try:
        return access.authenticate(authorization)
    except ApiError:
        if access.enforce:
            raise
        return User(ANONYMOUS, (UNAUTHENTICATED,))


def authn_review(access, caller: User, plural: str, body: dict, now: str) -> dict:
    md = dict(body.get("metadata") or {})
    if plural == "selfsubjectreviews":
        return {"kind": "SelfSubjectReview", "apiVersion": f"{AUTHN}/v1", "metadata": {"creationTimestamp": now},
                "status": {"userInfo": user_info(caller)}}
    spec = body.get("spec") or {}
    token = spec.get("token") or ""
    if not token:
        raise ApiError(400, "token is required for TokenReview in authentication", "BadRequest")
    try:
        user = access.authenticate(f"Bearer {token}")
    except ApiError:          # no authenticator knows it (and none failed): not authenticated, no error
        status = {"user": {}}
    else:
        status = {"authenticated": True, "user": user_info(user),
                  "audiences": list(spec.get("audiences") or [AUDIENCE])}
    md.setdefault("creationTimestamp", None)
    return {"kind": "TokenReview", "apiVersion": f"{AUTHN}/v1", "metadata": md, "spec": spec, "status": status}


def add_review_routes(api) -> None:
    """POST of the review kinds on an ``ApiServer`` (behind its middleware, so a SubjectAccessReview needs its
    own `create` permission under RBAC, as on the real server)."""
    async def handle(request, match: re.Match):
        from kubesim.apiserver.auth.authz import _json_body
        from kubesim.apiserver.endpoints.wire import response
        if request.method != "POST":
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        body = await _json_body(request) or {}
        caller = api.access.authenticate(request.headers.get("Authorization")) if api.access.enforce else User(
            "system:anonymous")
        return response(review(api.access, caller, match["kind"], body, match["ns"]), 201)

    async def handle_authn(request, match: re.Match):
        from kubesim.apiserver.auth.authz import _json_body
        from kubesim.apiserver.endpoints.wire import response
        if request.method != "POST":
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
        body = await _json_body(request) or {}
        caller = caller_of(api.access, request.headers.get("Authorization"))
        now = api.store.clock.rfc3339(api.store.clock.now())
        return response(authn_review(api.access, caller, match["kind"], body, now), 201)
    api.routes.append((PATH, handle))
    api.routes.append((AUTHN_PATH, handle_authn))
