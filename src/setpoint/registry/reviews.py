"""The review APIs: questions about identity and access, answered and never stored.

* ``authentication.k8s.io/v1`` TokenReview (is this token valid, and whose is it?) and
  SelfSubjectReview (who am I? — ``kubectl auth whoami``);
* ``authorization.k8s.io/v1`` SubjectAccessReview (may this user do that?),
  LocalSubjectAccessReview (the same, in one namespace), SelfSubjectAccessReview (may I?
  — ``kubectl auth can-i``) and SelfSubjectRulesReview (what may I do here? —
  ``kubectl auth can-i --list``).

Each function takes the request body and returns the response body: the request echoed with
its ``status`` filled in. Malformed requests raise the 400/422 errors Kubernetes answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from setpoint.apimachinery import errors, fields
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.auth.attributes import Attributes
from setpoint.auth.authenticator import Authenticator, Unauthenticated
from setpoint.auth.rbac.authorizer import Authorizer, RuleResolver
from setpoint.auth.rbac.rules import PolicyRule
from setpoint.auth.user import UserInfo

Obj = dict[str, Any]

AUTHENTICATION = "authentication.k8s.io"
AUTHORIZATION = "authorization.k8s.io"


def _body(body: Any, kind: str, group: str) -> Obj:
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the body must be a {kind} object")
    api_version = body.get("apiVersion")
    if body.get("kind") not in (None, kind) or api_version not in (None, f"{group}/v1"):
        raise errors.BadRequest(f"the body must be a {group}/v1 {kind}, got "
                                f"{api_version}/{body.get('kind')}")
    spec = body.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise errors.invalid(kind, group, "", [fields.type_invalid("spec", spec,
                                                                   "must be an object")])
    meta = body.get("metadata")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta.setdefault("creationTimestamp", None)
    return {"kind": kind, "apiVersion": f"{group}/v1", "metadata": meta,
            "spec": dict(spec or {})}


def _string(value: Any, path: FieldPath, errs: list[FieldError]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        errs.append(fields.type_invalid(path, value, "must be a string"))
        return ""
    return value


def _strings(value: Any, path: FieldPath, errs: list[FieldError]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errs.append(fields.type_invalid(path, value, "must be a list of strings"))
        return ()
    return tuple(value)


def _extra(value: Any, path: FieldPath, errs: list[FieldError]) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errs.append(fields.type_invalid(path, value, "must be an object"))
        return {}
    return {str(k): _strings(v, path.key(str(k)), errs) for k, v in value.items()}


def _attributes(spec: Mapping[str, Any], user: UserInfo, kind: str,
                namespace: str | None) -> Attributes:
    """The access a review asks about; 422 when it asks about nothing or two things."""
    errs: list[FieldError] = []
    res = spec.get("resourceAttributes")
    non = spec.get("nonResourceAttributes")
    spec_path = FieldPath.root("spec")
    if (res is None) == (non is None):
        errs.append(fields.invalid(spec_path.child("resourceAttributes"), res,
                                   "exactly one of nonResourceAttributes or resourceAttributes "
                                   "must be specified"))
        raise errors.invalid(kind, AUTHORIZATION, "", errs)
    if non is not None:
        if not isinstance(non, dict):
            raise errors.invalid(kind, AUTHORIZATION, "", [fields.type_invalid(
                spec_path.child("nonResourceAttributes"), non, "must be an object")])
        path = spec_path.child("nonResourceAttributes")
        attrs = Attributes(user=user, verb=_string(non.get("verb"), path.child("verb"), errs),
                           resource_request=False,
                           path=_string(non.get("path"), path.child("path"), errs))
    else:
        if not isinstance(res, dict):
            raise errors.invalid(kind, AUTHORIZATION, "", [fields.type_invalid(
                spec_path.child("resourceAttributes"), res, "must be an object")])
        path = spec_path.child("resourceAttributes")
        ns = _string(res.get("namespace"), path.child("namespace"), errs)
        if namespace is not None and ns != namespace:
            errs.append(fields.invalid(path.child("namespace"), ns,
                                       "must match metadata.namespace"))
        attrs = Attributes(
            user=user, verb=_string(res.get("verb"), path.child("verb"), errs),
            resource_request=True, namespace=ns,
            api_group=_string(res.get("group"), path.child("group"), errs),
            api_version=_string(res.get("version"), path.child("version"), errs),
            resource=_string(res.get("resource"), path.child("resource"), errs),
            subresource=_string(res.get("subresource"), path.child("subresource"), errs),
            name=_string(res.get("name"), path.child("name"), errs))
    if errs:
        raise errors.invalid(kind, AUTHORIZATION, "", errs)
    return attrs


def _access_status(authorizer: Authorizer, attrs: Attributes) -> Obj:
    verdict = authorizer.authorize(attrs)
    status: Obj = {"allowed": verdict.allowed}
    if verdict.reason:
        status["reason"] = verdict.reason
    return status


def _subject_review(out: Obj, authorizer: Authorizer, namespace: str | None) -> Obj:
    kind = out["kind"]
    spec = out["spec"]
    errs: list[FieldError] = []
    path = FieldPath.root("spec")
    user = UserInfo(_string(spec.get("user"), path.child("user"), errs),
                    _string(spec.get("uid"), path.child("uid"), errs),
                    _strings(spec.get("groups"), path.child("groups"), errs),
                    _extra(spec.get("extra"), path.child("extra"), errs))
    if not user.name and not user.groups:
        errs.append(fields.invalid(path.child("user"), "",
                                   "at least one of user or group must be specified"))
    if errs:
        raise errors.invalid(kind, AUTHORIZATION, "", errs)
    out["status"] = _access_status(authorizer, _attributes(spec, user, kind, namespace))
    return out


def subject_access_review(body: Any, authorizer: Authorizer) -> Obj:
    return _subject_review(_body(body, "SubjectAccessReview", AUTHORIZATION), authorizer, None)


def local_subject_access_review(body: Any, namespace: str, authorizer: Authorizer) -> Obj:
    """A SubjectAccessReview confined to ``namespace`` (the request path's)."""
    out = _body(body, "LocalSubjectAccessReview", AUTHORIZATION)
    out["metadata"]["namespace"] = namespace
    return _subject_review(out, authorizer, namespace)


def self_subject_access_review(body: Any, requester: UserInfo, authorizer: Authorizer) -> Obj:
    out = _body(body, "SelfSubjectAccessReview", AUTHORIZATION)
    attrs = _attributes(out["spec"], requester, "SelfSubjectAccessReview", None)
    out["status"] = _access_status(authorizer, attrs)
    return out


def self_subject_rules_review(body: Any, requester: UserInfo, resolver: RuleResolver) -> Obj:
    out = _body(body, "SelfSubjectRulesReview", AUTHORIZATION)
    errs: list[FieldError] = []
    namespace = _string(out["spec"].get("namespace"), FieldPath.root("spec", "namespace"),
                        errs)
    if errs:
        raise errors.invalid("SelfSubjectRulesReview", AUTHORIZATION, "", errs)
    rules, problems = resolver.rules_for(requester, namespace)
    out["status"] = rules_status(rules, problems)
    return out


def rules_status(rules: list[PolicyRule], problems: list[str]) -> Obj:
    resource_rules: list[Obj] = []
    non_resource_rules: list[Obj] = []
    for rule in rules:
        if rule.non_resource_urls:
            non_resource_rules.append({"verbs": list(rule.verbs),
                                       "nonResourceURLs": list(rule.non_resource_urls)})
        else:
            entry: Obj = {"verbs": list(rule.verbs), "apiGroups": list(rule.api_groups),
                          "resources": list(rule.resources)}
            if rule.resource_names:
                entry["resourceNames"] = list(rule.resource_names)
            resource_rules.append(entry)
    status: Obj = {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                   "incomplete": bool(problems)}
    if problems:
        status["evaluationError"] = ", ".join(problems)
    return status


def token_review(body: Any, authenticator: Authenticator) -> Obj:
    out = _body(body, "TokenReview", AUTHENTICATION)
    errs: list[FieldError] = []
    spec = out["spec"]
    token = _string(spec.get("token"), FieldPath.root("spec", "token"), errs)
    audiences = _strings(spec.get("audiences"), FieldPath.root("spec", "audiences"), errs)
    if not token:
        errs.append(fields.required(FieldPath.root("spec", "token"), ""))
    if errs:
        raise errors.invalid("TokenReview", AUTHENTICATION, "", errs)
    try:
        user = authenticator.authenticate_token(token, audiences or None)
    except Unauthenticated as e:
        out["status"] = {"user": {}, "error": f"[invalid bearer token, {e}]"}
        return out
    status: Obj = {"authenticated": True, "user": user.to_api()}
    if audiences:
        status["audiences"] = list(audiences)
    out["status"] = status
    return out


def self_subject_review(body: Any, requester: UserInfo) -> Obj:
    out = _body(body, "SelfSubjectReview", AUTHENTICATION)
    out.pop("spec", None)
    out["status"] = {"userInfo": requester.to_api()}
    return out
