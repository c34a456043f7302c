"""The review APIs answered over a hand-made RBAC state."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.auth import user as users
from setpoint.auth.authenticator import Authenticator
from setpoint.auth.rbac.authorizer import AuthorizerChain, PrivilegedGroupAuthorizer, RBACAuthorizer
from setpoint.auth.tokenfile import StaticTokens
from setpoint.auth.user import UserInfo
from setpoint.registry import reviews
from tests.unit.auth.test_authorizer import Source, bootstrapped, role_binding

BOB = UserInfo("bob", groups=("devs", users.ALL_AUTHENTICATED))


def chain(source: Source) -> AuthorizerChain:
    return AuthorizerChain(PrivilegedGroupAuthorizer(), RBACAuthorizer(source))


@pytest.fixture
def source() -> Source:
    return bootstrapped(role_binding("team", "devs-view", "ClusterRole", "view", [
        {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"}]))


def ssar(verb: str, resource: str, namespace: str = "team") -> dict[str, Any]:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource,
                                            "namespace": namespace}}}


def test_can_i_answers_with_the_reason(source: Source) -> None:
    out = reviews.self_subject_access_review(ssar("list", "pods"), BOB, chain(source))
    assert out["status"] == {"allowed": True, "reason": 'RBAC: allowed by RoleBinding '
                             '"devs-view" of ClusterRole "view" to Group "devs"'}
    assert out["metadata"] == {"creationTimestamp": None}
    denied = reviews.self_subject_access_review(ssar("delete", "pods"), BOB, chain(source))
    assert denied["status"] == {"allowed": False}


def test_subject_access_review_asks_about_someone_else(source: Source) -> None:
    body = {"spec": {"user": "alice", "groups": ["devs"], "nonResourceAttributes": {
        "path": "/healthz", "verb": "get"}}}
    assert reviews.subject_access_review(body, chain(source))["status"]["allowed"] is False
    body["spec"]["groups"] = ["devs", "system:authenticated"]
    assert reviews.subject_access_review(body, chain(source))["status"]["allowed"] is True


@pytest.mark.parametrize(("spec", "message"), [
    ({"user": "a"}, "exactly one of nonResourceAttributes or resourceAttributes"),
    ({"user": "a", "resourceAttributes": {}, "nonResourceAttributes": {}}, "exactly one"),
    ({"resourceAttributes": {"verb": "get"}}, "at least one of user or group"),
    ({"user": 3, "resourceAttributes": {}}, "spec.user"),
])
def test_malformed_reviews_are_422(source: Source, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        reviews.subject_access_review({"spec": spec}, chain(source))
    assert message in str(caught.value.status())


def test_local_review_must_stay_in_its_namespace(source: Source) -> None:
    body = {"spec": {"user": "bob", "groups": ["devs"], "resourceAttributes": {
        "verb": "get", "resource": "pods", "namespace": "other"}}}
    with pytest.raises(errors.Invalid, match="must match"):
        reviews.local_subject_access_review(body, "team", chain(source))
    body["spec"]["resourceAttributes"]["namespace"] = "team"
    out = reviews.local_subject_access_review(body, "team", chain(source))
    assert out["kind"] == "LocalSubjectAccessReview"
    assert out["status"]["allowed"] is True


def test_rules_review_lists_what_the_requester_may_do(source: Source) -> None:
    out = reviews.self_subject_rules_review({"spec": {"namespace": "team"}}, BOB,
                                            RBACAuthorizer(source).resolver)
    status = out["status"]
    assert status["incomplete"] is False
    assert any("configmaps" in r["resources"] and "list" in r["verbs"]
               for r in status["resourceRules"])
    assert {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version",
                                                  "/version/"]} in status["nonResourceRules"]


def test_token_review_and_whoami() -> None:
    auth = Authenticator(static_tokens=StaticTokens.parse("tok,alice,7,admins\n"),
                         now=lambda: 0.0)
    good = reviews.token_review({"spec": {"token": "tok"}}, auth)
    assert good["status"] == {"authenticated": True, "user": {
        "username": "alice", "uid": "7", "groups": ["admins", "system:authenticated"]}}
    bad = reviews.token_review({"spec": {"token": "nope"}}, auth)
    assert bad["status"]["error"].startswith("[invalid bearer token")
    assert "authenticated" not in bad["status"]
    with pytest.raises(errors.Invalid):
        reviews.token_review({"spec": {}}, auth)
    me = reviews.self_subject_review({"apiVersion": "authentication.k8s.io/v1",
                                      "kind": "SelfSubjectReview"}, BOB)
    assert me["status"] == {"userInfo": {"username": "bob",
                                         "groups": ["devs", "system:authenticated"]}}


def test_a_body_of_the_wrong_kind_is_400(source: Source) -> None:
    with pytest.raises(errors.BadRequest):
        reviews.self_subject_access_review({"kind": "Pod"}, BOB, chain(source))
    with pytest.raises(errors.BadRequest):
        reviews.self_subject_access_review([], BOB, chain(source))
