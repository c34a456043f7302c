"""The security middleware: who may reach a handler, and what 401/403 say."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from setpoint.audit.log import AuditLog, AuditLogConfig
from setpoint.audit.policy import default_policy
from setpoint.auth.authenticator import Authenticator
from setpoint.auth.rbac.authorizer import AuthorizerChain, PrivilegedGroupAuthorizer, RBACAuthorizer
from setpoint.auth.tokenfile import StaticTokens
from setpoint.server import request_info, security
from tests.unit.auth.test_authorizer import bootstrapped, role_binding

TOKENS = ("admin-token,root,0,system:masters\nbob-token,bob,1\n"
          "carol-token,carol,2,impersonators\n")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[TestServer, AuditLog]]:
    source = bootstrapped(
        role_binding("team", "bob-view", "ClusterRole", "view", [
            {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]),
        {"kind": "ClusterRole", "metadata": {"name": "impersonate-bob"}, "rules": [
            {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"],
             "resourceNames": ["bob"]}]},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "carol-imp"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "impersonate-bob"},
         "subjects": [{"kind": "Group", "name": "impersonators"}]})
    audit = AuditLog(AuditLogConfig(path=tmp_path / "audit.log"))
    sec = security.Security(
        authenticator=Authenticator(static_tokens=StaticTokens.parse(TOKENS), now=lambda: 0),
        authorizer=AuthorizerChain(PrivilegedGroupAuthorizer(), RBACAuthorizer(source)),
        audit_policy=default_policy(), audit_log=audit)

    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"user": request[security.USER].name,
                                  "requester": request[security.REQUESTER].name})

    gate = security.Gate(sec, lambda: "t")

    async def edge(request: web.Request) -> web.StreamResponse:
        return await gate.serve(request, request_info.parse(request.path),
                                lambda: handler(request))

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", edge)
    test_server = TestServer(app)
    await test_server.start_server()
    yield test_server, audit
    await test_server.close()
    audit.close()


async def call(server: TestServer, method: str, path: str, token: str | None = None,
               headers: dict[str, str] | None = None) -> tuple[int, Any]:
    hdrs = dict(headers or {})
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    async with aiohttp.ClientSession() as session, session.request(
            method, str(server.make_url(path)), headers=hdrs) as r:
        return r.status, orjson.loads(await r.read())


async def test_no_credentials_is_401_except_for_health_and_version(server: Any) -> None:
    srv, _ = server
    status, body = await call(srv, "GET", "/api/v1/namespaces/team/configmaps")
    assert status == 401
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    for path in ("/healthz", "/readyz", "/livez", "/version"):
        assert (await call(srv, "GET", path))[0] == 200
    assert (await call(srv, "GET", "/api"))[0] == 401
    assert (await call(srv, "GET", "/api", "garbage"))[0] == 401
    assert (await call(srv, "GET", "/healthz", "garbage"))[0] == 401


async def test_rbac_decides_with_kubernetes_messages(server: Any) -> None:
    srv, _ = server
    assert (await call(srv, "GET", "/api/v1/namespaces/team/configmaps", "bob-token"))[0] == 200
    status, body = await call(srv, "GET", "/api/v1/namespaces/other/configmaps", "bob-token")
    assert status == 403
    assert body["message"] == ('configmaps is forbidden: User "bob" cannot list resource '
                               '"configmaps" in API group "" in the namespace "other"')
    assert body["details"] == {"name": "", "kind": "configmaps"}
    status, body = await call(srv, "DELETE", "/apis/coordination.k8s.io/v1/namespaces/team/"
                              "leases/l", "bob-token")
    assert (status, body["details"]) == (403, {"name": "l", "group": "coordination.k8s.io",
                                               "kind": "leases"})
    assert (await call(srv, "GET", "/api/v1/namespaces/team", "bob-token"))[0] == 200
    assert (await call(srv, "GET", "/api/v1/namespaces/other", "bob-token"))[0] == 403
    assert (await call(srv, "GET", "/apis", "bob-token"))[0] == 200
    status, body = await call(srv, "GET", "/metrics", "bob-token")
    assert (status, body["message"]) == (403, 'forbidden: User "bob" cannot get path '
                                              '"/metrics"')
    assert (await call(srv, "GET", "/metrics", "admin-token"))[0] == 200


async def test_impersonation_needs_the_impersonate_verb(server: Any) -> None:
    srv, _ = server
    status, body = await call(srv, "GET", "/api/v1/namespaces/team/configmaps", "carol-token",
                              {"Impersonate-User": "bob"})
    assert (status, body) == (200, {"user": "bob", "requester": "carol"})
    status, body = await call(srv, "GET", "/api/v1/namespaces/team/configmaps", "carol-token",
                              {"Impersonate-User": "root"})
    assert status == 403
    assert body["message"] == ('users "root" is forbidden: User "carol" cannot impersonate '
                               'resource "users" in API group "" at the cluster scope')
    status, _ = await call(srv, "GET", "/api/v1/namespaces/team/configmaps", "carol-token",
                           {"Impersonate-User": "bob", "Impersonate-Group": "system:masters"})
    assert status == 403
    status, _ = await call(srv, "GET", "/api", "carol-token",
                           {"Impersonate-Group": "system:masters"})
    assert status == 400
    status, body = await call(srv, "GET", "/api/v1/namespaces/other/configmaps", "carol-token",
                              {"Impersonate-User": "bob"})
    assert status == 403
    assert 'User "bob" cannot list' in body["message"]


async def test_requests_are_audited_with_user_and_decision(server: Any) -> None:
    srv, audit = server
    await call(srv, "GET", "/api/v1/namespaces/other/configmaps", "bob-token")
    await call(srv, "GET", "/api/v1/namespaces/team/configmaps", "carol-token",
               {"Impersonate-User": "bob"})
    await call(srv, "GET", "/healthz")
    audit.flush()
    events = [orjson.loads(line) for line in audit.config.path.read_text().splitlines()]
    assert [e["responseStatus"]["code"] for e in events] == [403, 200]
    assert events[0]["annotations"]["authorization.k8s.io/decision"] == "forbid"
    assert events[1]["user"]["username"] == "carol"
    assert events[1]["impersonatedUser"]["username"] == "bob"
    assert all(e["stage"] == "ResponseComplete" for e in events)


async def test_failed_authentication_is_audited_without_the_credentials(server: Any) -> None:
    srv, audit = server
    await call(srv, "GET", "/api/v1/namespaces/team/configmaps", "not-a-real-token")
    await call(srv, "GET", "/api/v1/namespaces/team/configmaps",
               headers={"Authorization": "Basic c2VjcmV0OnNlY3JldA=="})
    await call(srv, "GET", "/api/v1/namespaces/team/configmaps")
    await call(srv, "GET", "/healthz", "not-a-real-token")  # the policy records no health
    audit.flush()
    text = audit.config.path.read_text()
    assert "not-a-real-token" not in text
    assert "c2VjcmV0" not in text
    events = [orjson.loads(line) for line in text.splitlines()]
    assert [e["stage"] for e in events] == ["ResponseStarted"] * 3
    assert [e["responseStatus"] for e in events] == [
        {"metadata": {}, "code": 401, "message": message} for message in (
            "Authentication failed, attempted: bearer", "Authentication failed, attempted: basic",
            "Authentication failed, no credentials provided")]
    assert all(e["user"] == {"username": ""} for e in events)
    assert events[0]["verb"] == "list"
    assert events[0]["objectRef"] == {"resource": "configmaps", "namespace": "team",
                                      "apiVersion": "v1"}
