"""Credentials built to hurt, sent to a secured server by someone with none: every one is a
401 ``Status`` (never a 500), and the server keeps serving its real users."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import orjson
import pytest

from setpoint.audit.log import AuditLogConfig
from setpoint.auth import jwt, serviceaccounts
from setpoint.client import Client, load_kubeconfig
from setpoint.server.server import Server
from setpoint.testing import waiting
from tests.conftest import kubeconfig_ssl_context
from tests.integration.api.helpers import secured_config
from tests.integration.api.rawhttp import Connection, Response


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    async with Server(secured_config(tmp_path)) as srv:
        yield srv


def anonymous_tls(tmp_path: Path) -> ssl.SSLContext:
    """TLS that trusts the cluster CA and presents no client certificate."""
    return ssl.create_default_context(cafile=str(tmp_path / "pki" / "ca.crt"))


def b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


async def get(server: Server, context: ssl.SSLContext, head: bytes,
              path: str = "/api/v1/namespaces") -> Response:
    connection = await Connection.open(server.url.replace("127.0.0.1", "localhost"), context)
    try:
        await connection.send(f"GET {path} HTTP/1.1\r\nHost: setpoint\r\n".encode() + head +
                              b"Connection: close\r\n\r\n")
        return await connection.read_response()
    finally:
        await connection.close()


ES256 = b64(b'{"alg":"ES256"}')
HOSTILE = {
    "undecodable bytes after a valid header":
        b"Authorization: Bearer " + ES256 + b".\xff\xfe." + b"A" * 86 + b"\r\n",
    "undecodable bytes": b"Authorization: Bearer \xff\xfe\xc3\xa9\r\n",
    "empty": b"Authorization: Bearer \r\n",
    "8 KB of garbage": b"Authorization: Bearer " + b"x" * 8000 + b"\r\n",
    "a header nested 6,000 deep": b"Authorization: Bearer " + b64(b"[" * 6000) + b".e30.AA\r\n",
    "alg none": b"Authorization: Bearer " + b64(b'{"alg":"none"}') + b"." +
                b64(b'{"sub":"system:admin"}') + b".\r\n",
    "Basic": b"Authorization: Basic YWRtaW46YWRtaW4=\r\n",
    "Bearer twice": b"Authorization: Bearer Bearer x\r\n",
    "two Authorization headers": b"Authorization: Bearer a.b.c\r\nAuthorization: Bearer x\r\n",
}


async def test_hostile_bearer_tokens_are_401_and_the_server_keeps_serving(
        server: Server, tmp_path: Path) -> None:
    context = anonymous_tls(tmp_path)
    for name, head in HOSTILE.items():
        response = await get(server, context, head)
        assert response.status == 401, (name, response.body)
        assert response.json() == {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, name
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        assert (await admin.get(("v1", "Namespace"), "default"))["metadata"]["name"] == \
            "default"


async def test_a_token_longer_than_a_header_line_may_be_is_400_before_authentication(
        server: Server, tmp_path: Path) -> None:
    # the Limits table: a header line holds 8,190 bytes (aiohttp's), so a bearer token never
    # reaches the token authenticator's own 16 KiB bound through a header
    context = anonymous_tls(tmp_path)
    for length in (8100, 9000, jwt.MAX_TOKEN + 1):
        response = await get(server, context, b"Authorization: Bearer " + b"x" * length + b"\r\n")
        assert response.status == (401 if length == 8100 else 400), (length, response.body)
    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        assert (await admin.get(("v1", "Namespace"), "default"))["metadata"]["name"] == \
            "default"


async def test_tokens_of_the_servers_own_key_with_claims_of_the_wrong_shapes_are_401(
        server: Server, tmp_path: Path) -> None:
    # what a token would say if the signing key leaked or issuing had a bug: still a 401
    signer = jwt.Signer(jwt.load_private_key((tmp_path / "pki" / "sa.key").read_bytes()))
    issuer = serviceaccounts.DEFAULT_ISSUER
    now = int(time.time())
    claims = {"iss": issuer, "aud": [issuer], "exp": now + 600, "nbf": now, "iat": now,
              "sub": "system:serviceaccount:default:default",
              "kubernetes.io": {"namespace": "default",
                                "serviceaccount": {"name": "default", "uid": "u"}}}
    context = anonymous_tls(tmp_path)
    for claim, value in (("aud", [{"a": 1}, [issuer]]), ("exp", 1e300), ("exp", "never"),
                         ("nbf", "now")):
        token = signer.sign({**claims, claim: value}).encode()
        response = await get(server, context, b"Authorization: Bearer " + token + b"\r\n")
        assert response.status == 401, (claim, value, response.body)


async def test_headers_that_are_not_utf8_are_audited_and_never_a_500(tmp_path: Path) -> None:
    # an undecodable User-Agent used to make the audit event unwritable (the request went
    # unrecorded), and an undecodable Impersonate-* value made the answer a 500
    config = secured_config(tmp_path)
    assert config.security is not None
    audit_path = tmp_path / "audit.log"
    config = dataclasses.replace(config, security=dataclasses.replace(
        config.security, audit_log=AuditLogConfig(path=audit_path)))
    async with Server(config) as server:
        admin = kubeconfig_ssl_context(tmp_path / "kubeconfig")
        assert admin is not None
        response = await get(server, admin, b"User-Agent: sneaky\xff\xfe/1.0\r\n")
        assert response.status == 200
        for header in (b"Impersonate-User: \xff\r\n",
                       b"Impersonate-User: bob\r\nImpersonate-Group: \xff\r\n",
                       b"Impersonate-User: bob\r\nImpersonate-Uid: \xfe\r\n",
                       b"Impersonate-User: bob\r\nImpersonate-Extra-scopes: \xfe\r\n"):
            response = await get(server, admin, header)
            assert response.status == 400, (header, response.body)
            assert response.json()["message"].endswith(": the value is not valid UTF-8")
        secured = server.secured
        assert secured is not None
        assert secured.audit_log is not None
        await asyncio.to_thread(secured.audit_log.flush)
        events = [orjson.loads(line) for line in audit_path.read_text().splitlines()]
    refused = [e for e in events if e["responseStatus"]["code"] == 400]
    assert len(refused) == 4  # a refused impersonation is recorded, as the requester's
    assert {e["user"]["username"] for e in refused} == {"system:admin"}
    assert {e["responseStatus"]["message"] for e in refused} == {
        f"{h}: the value is not valid UTF-8" for h in (
            "Impersonate-User", "Impersonate-Group", "Impersonate-Uid",
            "Impersonate-Extra-scopes")}
    sneaky = [e for e in events if e["userAgent"].startswith("sneaky")]
    assert [e["stage"] for e in sneaky] == ["ResponseComplete"]
    assert sneaky[0]["userAgent"] == "sneaky\ufffd\ufffd/1.0"
    assert sneaky[0]["user"]["username"] == "system:admin"
    assert sneaky[0]["responseStatus"]["code"] == 200


async def test_a_flood_of_bad_tokens_is_refused_audited_and_never_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    config = secured_config(tmp_path)
    assert config.security is not None
    audit_path = tmp_path / "audit.log"
    config = dataclasses.replace(config, security=dataclasses.replace(
        config.security, audit_log=AuditLogConfig(path=audit_path)))
    connections, per_connection = 16, 20
    tokens = [[f"secret{c:02d}x{i:02d}" + "q" * 40 for i in range(per_connection)]
              for c in range(connections)]
    async with Server(config) as server:
        anonymous = anonymous_tls(tmp_path)

        async def attacker(mine: list[str]) -> list[int]:
            connection = await Connection.open(
                server.url.replace("127.0.0.1", "localhost"), anonymous)
            codes = []
            try:
                for token in mine:
                    await connection.send(
                        b"GET /api/v1/namespaces HTTP/1.1\r\nHost: setpoint\r\n"
                        b"Authorization: Bearer " + token.encode() + b"\r\n\r\n")
                    codes.append((await connection.read_response()).status)
            finally:
                await connection.close()
            return codes

        async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
            attacks = [asyncio.create_task(attacker(mine)) for mine in tokens]
            served = 0
            while not all(a.done() for a in attacks) or served == 0:
                await admin.get(("v1", "Namespace"), "default")
                served += 1
            results = [await a for a in attacks]
        assert [set(codes) for codes in results] == [{401}] * connections
        secured = server.secured
        assert secured is not None
        assert secured.audit_log is not None
        await asyncio.to_thread(secured.audit_log.flush)
        audit_text = audit_path.read_text()
    events = [orjson.loads(line) for line in audit_text.splitlines()]
    refused = [e for e in events if e["responseStatus"]["code"] == 401]
    assert len(refused) == connections * per_connection
    assert {e["responseStatus"]["message"] for e in refused} == {
        "Authentication failed, attempted: bearer"}
    assert "secret" not in audit_text
    assert "secret" not in caplog.text
    assert "unauthenticated GET /api/v1/namespaces" in caplog.text


TOKEN = "/api/v1/namespaces/default/serviceaccounts/bot/token"


async def test_a_token_dies_with_its_service_account_even_when_the_name_returns(
        server: Server, tmp_path: Path) -> None:
    anonymous = anonymous_tls(tmp_path)
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bot"}}
    token_request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                     "spec": {"expirationSeconds": 600}}

    async def status_with(token: str) -> int:
        head = f"Authorization: Bearer {token}\r\n".encode()
        return (await get(server, anonymous, head, "/apis")).status

    async with Client(load_kubeconfig(tmp_path / "kubeconfig")) as admin:
        await admin.create(account, namespace="default")
        issued = await admin.request("POST", TOKEN, body=token_request)
        token = issued["status"]["token"]
        assert await waiting.eventually(lambda: status_with(token), what="token accepted") \
            == 200
        await admin.delete(("v1", "ServiceAccount"), "bot", namespace="default")
        await admin.create(account, namespace="default")  # same name, a new uid
        await waiting.eventually(
            lambda: _is(status_with(token), 401), what="the old token refused")
        fresh = await admin.request("POST", TOKEN, body=token_request)
        assert await status_with(fresh["status"]["token"]) == 200
        assert await status_with(token) == 401


async def _is(status: Awaitable[int], expected: int) -> bool:
    return await status == expected
