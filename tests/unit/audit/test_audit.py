"""Audit policy decisions, the events built at each level, and the rotating log file."""

from __future__ import annotations

import stat
from pathlib import Path

import orjson
import pytest

from setpoint.audit.events import AuditRecord
from setpoint.audit.log import AuditLog, AuditLogConfig
from setpoint.audit.policy import Level, PolicyError, default_policy, parse_policy
from setpoint.auth.attributes import Attributes
from setpoint.auth.user import UserInfo

BOB = UserInfo("bob", groups=("devs", "system:authenticated"))


def res(verb: str, resource: str, *, group: str = "", ns: str = "default", name: str = "",
        sub: str = "", user: UserInfo = BOB) -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=True, api_group=group,
                      resource=resource, namespace=ns, name=name, subresource=sub,
                      api_version="v1")


def url(path: str) -> Attributes:
    return Attributes(user=BOB, verb="get", resource_request=False, path=path)


POLICY = parse_policy({
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "users": ["system:kube-proxy"]},
        {"level": "None", "nonResourceURLs": ["/healthz*"]},
        {"level": "RequestResponse", "resources": [{"group": "", "resources": ["pods/log"]}]},
        {"level": "Request", "verbs": ["create"], "namespaces": ["prod"],
         "omitStages": ["ResponseStarted"]},
        {"level": "Metadata", "userGroups": ["devs"], "resources": [
            {"group": "", "resources": ["configmaps"], "resourceNames": ["cfg"]}]},
        {"level": "None", "resources": [{"group": "", "resources": ["configmaps"]}]},
        {"level": "Metadata"},
    ]})


@pytest.mark.parametrize(("attrs", "level"), [
    (res("get", "pods", user=UserInfo("system:kube-proxy")), Level.NONE),
    (url("/healthz/ping"), Level.NONE),
    (url("/api"), Level.METADATA),
    (res("get", "pods", sub="log"), Level.REQUEST_RESPONSE),
    (res("get", "pods"), Level.METADATA),
    (res("create", "widgets", group="x.io", ns="prod"), Level.REQUEST),
    (res("create", "widgets", group="x.io", ns="dev"), Level.METADATA),
    (res("get", "configmaps", name="cfg"), Level.METADATA),
    (res("get", "configmaps", name="other"), Level.NONE),
])
def test_first_matching_rule_decides(attrs: Attributes, level: Level) -> None:
    assert POLICY.decide(attrs).level is level


def test_stages_omitted_by_policy_and_rule_add_up() -> None:
    decision = POLICY.decide(res("create", "widgets", group="x.io", ns="prod"))
    assert decision.omit_stages == {"RequestReceived", "ResponseStarted"}


@pytest.mark.parametrize(("doc", "message"), [
    ({"kind": "Policy"}, "audit.k8s.io/v1"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{}]}, "needs a level"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Loud"}]},
     "unknown audit level"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [
        {"level": "None", "omitStages": ["Later"]}]}, "unknown stage"),
    ({"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [
        {"level": "None", "nonResourceURLs": ["/x"], "namespaces": ["a"]}]},
     "cannot be combined"),
])
def test_bad_policies_are_refused(doc: dict, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(doc)


def record(attrs: Attributes, level_policy: str) -> AuditRecord:
    policy = parse_policy({"apiVersion": "audit.k8s.io/v1", "kind": "Policy",
                           "rules": [{"level": level_policy}]})
    return AuditRecord(attrs, policy.decide(attrs), "/api/v1/namespaces/default/pods",
                       ["127.0.0.1"], "kubectl/v1.32", "2026-01-01T00:00:00.000000Z",
                       omit_managed_fields=True)


@pytest.mark.parametrize(("level", "has_request", "has_response"), [
    ("Metadata", False, False), ("Request", True, False), ("RequestResponse", True, True)])
def test_objects_are_recorded_only_at_their_levels(level: str, has_request: bool,
                                                   has_response: bool) -> None:
    rec = record(res("create", "pods"), level)
    obj = {"metadata": {"name": "p", "managedFields": [{"manager": "x"}]}}
    rec.set_request_object(obj)
    rec.set_response(201, None, obj)
    event = rec.event("ResponseComplete", "2026-01-01T00:00:01.000000Z")
    assert event["level"] == level
    assert event["responseStatus"] == {"metadata": {}, "code": 201}
    assert event["objectRef"] == {"resource": "pods", "namespace": "default", "apiVersion": "v1"}
    assert ("requestObject" in event) is has_request
    assert ("responseObject" in event) is has_response
    if has_request:
        assert event["requestObject"] == {"metadata": {"name": "p"}}


def test_impersonation_is_recorded_with_both_users() -> None:
    attrs = res("get", "pods", user=UserInfo("jane"))
    rec = record(attrs, "Metadata")
    rec.authenticated_user = BOB
    event = rec.event("ResponseComplete", "t")
    assert event["user"]["username"] == "bob"
    assert event["impersonatedUser"] == {"username": "jane"}


def test_default_policy_keeps_secrets_out_and_health_checks_quiet() -> None:
    policy = default_policy()
    assert policy.decide(res("create", "secrets")).level is Level.METADATA
    assert policy.decide(url("/readyz")).level is Level.NONE
    assert policy.decide(res("create", "roles", group="rbac.authorization.k8s.io")).level \
        is Level.REQUEST_RESPONSE


def test_log_writes_lines_rotates_and_prunes(tmp_path: Path) -> None:
    path = tmp_path / "audit" / "audit.log"
    log = AuditLog(AuditLogConfig(path=path, max_size=4096, max_backups=2))
    for i in range(200):
        log.write({"kind": "Event", "n": i, "pad": "x" * 100})
    log.close()
    backups = log.backups()
    assert len(backups) == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert all(stat.S_IMODE(b.stat().st_mode) == 0o600 for b in backups)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    kept = [orjson.loads(line)["n"] for f in [*backups, path]
            for line in f.read_bytes().splitlines()]
    assert kept == sorted(kept)
    assert kept[-1] == 199
    assert all(f.stat().st_size <= 4096 for f in [*backups, path])
    assert log.written == 200
    assert log.dropped == 0
