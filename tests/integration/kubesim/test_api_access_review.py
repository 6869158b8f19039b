"""authorization.k8s.io reviews (access_review.py): answered from RBAC under `authz="rbac"`, allowed when
authorization is off, as kube-apiserver (pkg/registry/authorization/*/rest.go); authentication.k8s.io's
SelfSubjectReview and TokenReview (pkg/registry/authentication/{selfsubjectreview/rest.go,
tokenreview/storage.go})."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

BASE = "/apis/authorization.k8s.io/v1/"


def review(sim, plural: str, spec: dict, token: str | None = "kubesim", base: str = BASE) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    body = {"apiVersion": base.split("/")[2] + "/v1", "spec": spec}
    req = urllib.request.Request(sim.url + base + plural, data=json.dumps(body).encode(), method="POST",
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


CREATE_CLUSTERROLES = {"resourceAttributes": {"verb": "create", "group": "rbac.authorization.k8s.io",
                                              "resource": "clusterroles"}}
CREATE_PODS_IN_TEAM = {"resourceAttributes": {"verb": "create", "resource": "pods", "namespace": "team"}}


def test_everything_is_allowed_when_authorization_is_off(apisim):
    status, body = review(apisim, "selfsubjectaccessreviews", CREATE_CLUSTERROLES, token=None)
    assert (status, body["kind"], body["status"]) == (201, "SelfSubjectAccessReview", {"allowed": True})
    status, body = review(apisim, "selfsubjectrulesreviews", {"namespace": "default"}, token=None)
    assert body["status"]["resourceRules"] == [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]


def test_reviews_answer_from_rbac(kubesim_rbac):
    sim = kubesim_rbac
    sim.access.add_user_token("alice-token", "alice", ("team-members",))
    from kubernetes.client import CoreV1Api, RbacAuthorizationV1Api
    api = sim.api_client()
    api.configuration.api_key = {"authorization": "Bearer kubesim"}
    CoreV1Api(api).create_namespace({"metadata": {"name": "team"}})
    rbac = RbacAuthorizationV1Api(api)
    rbac.create_namespaced_role("team", {"metadata": {"name": "member"}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]}]})
    rbac.create_namespaced_role_binding("team", {"metadata": {"name": "members"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "member"},
        "subjects": [{"kind": "Group", "name": "team-members", "apiGroup": "rbac.authorization.k8s.io"}]})

    assert review(sim, "selfsubjectaccessreviews", CREATE_PODS_IN_TEAM, "alice-token")[1]["status"]["allowed"] is True
    status, body = review(sim, "selfsubjectaccessreviews", CREATE_CLUSTERROLES, "alice-token")
    assert (status, body["status"]) == (201, {"allowed": False})
    rules = review(sim, "selfsubjectrulesreviews", {"namespace": "team"}, "alice-token")[1]["status"]
    assert {"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]} in rules["resourceRules"]
    assert not rules["incomplete"]
    # a SubjectAccessReview asks about someone else; the admin may, alice may not (no `create` on them)
    sar = {"user": "alice", "groups": ["team-members"], **CREATE_PODS_IN_TEAM}
    assert review(sim, "subjectaccessreviews", sar)[1]["status"]["allowed"] is True
    assert review(sim, "subjectaccessreviews", {**sar, **CREATE_CLUSTERROLES})[1]["status"]["allowed"] is False
    status, body = review(sim, "subjectaccessreviews", sar, "alice-token")
    assert (status, body["reason"]) == (403, "Forbidden")
    assert review(sim, "selfsubjectaccessreviews", {}, "alice-token")[0] == 422   # neither kind of attributes


AUTHN = "/apis/authentication.k8s.io/v1/"


def test_self_subject_review_says_who_the_caller_is(kubesim_rbac):
    """`kubectl auth whoami`: the caller's name, uid and groups; every authenticated user may ask
    (system:basic-user, plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, bound to
    system:authenticated only); without a token the anonymous user is refused (403)."""
    sim = kubesim_rbac
    sim.access.add_user_token("alice-token", "alice", ("team-members",), uid="u-1")
    status, body = review(sim, "selfsubjectreviews", {}, "alice-token", base=AUTHN)
    assert (status, body["kind"], body["apiVersion"]) == (201, "SelfSubjectReview", "authentication.k8s.io/v1")
    assert body["status"]["userInfo"] == {"username": "alice", "uid": "u-1",
                                          "groups": ["team-members", "system:authenticated"]}
    assert body["metadata"]["creationTimestamp"]
    admin = review(sim, "selfsubjectreviews", {}, base=AUTHN)[1]["status"]["userInfo"]
    assert admin["username"] == "kubesim-admin" and "system:masters" in admin["groups"]
    assert not sim.access.denials
    assert review(sim, "selfsubjectreviews", {}, None, base=AUTHN)[0] == 403


def test_self_subject_review_without_authorization_is_anonymous(apisim):
    body = review(apisim, "selfsubjectreviews", {}, token=None, base=AUTHN)[1]
    assert body["status"]["userInfo"] == {"username": "system:anonymous", "groups": ["system:unauthenticated"]}


def test_token_review_authenticates_a_token(kubesim_rbac):
    """TokenReview: a known token's user and the API server's audience; an unknown one is not authenticated
    (200-family answer, no user); an empty token is 400 (tokenreview/storage.go)."""
    sim = kubesim_rbac
    sim.access.add_user_token("alice-token", "alice", ("team-members",))
    status, body = review(sim, "tokenreviews", {"token": "alice-token"}, base=AUTHN)
    assert (status, body["kind"]) == (201, "TokenReview")
    assert body["status"]["authenticated"] is True and body["status"]["user"]["username"] == "alice"
    assert body["status"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    status, body = review(sim, "tokenreviews", {"token": "nobody"}, base=AUTHN)
    assert (status, body["status"]) == (201, {"user": {}})
    status, body = review(sim, "tokenreviews", {}, base=AUTHN)
    assert (status, body["reason"], body["message"]) == (400, "BadRequest",
                                                         "token is required for TokenReview in authentication")
    # creating a TokenReview is not in system:basic-user: alice may not (system:auth-delegator grants it)
    assert review(sim, "tokenreviews", {"token": "x"}, "alice-token", base=AUTHN)[0] == 403
