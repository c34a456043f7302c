"""HTTPS: CA and client certificates from data or files, server names, credentials."""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from setpoint.apimachinery import errors
from setpoint.client import api, transport
from setpoint.client import config as cfg
from setpoint.client import kubeconfig as kc
from tests.unit.client.fakeapi import json_response, status_response

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@dataclass(frozen=True)
class PKI:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def data(self, name: str) -> bytes:
        return self.path(name).read_bytes()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _leaf(directory: Path, name: str, subject: str, extensions: str) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=directory)
    (directory / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nauthorityKeyIdentifier=keyid,issuer\n"
        "subjectKeyIdentifier=hash\n" + extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2",
             "-extfile", f"{name}.ext", cwd=directory)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    directory = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=test-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    _leaf(directory, "server", "/CN=api.internal",
          "subjectAltName=DNS:api.internal\nextendedKeyUsage=serverAuth\n")
    _leaf(directory, "client", "/CN=alice/O=devs", "extendedKeyUsage=clientAuth\n")
    return PKI(directory)


@dataclass
class Seen:
    authorization: list[str | None]
    peers: list[Any]


@contextlib.asynccontextmanager
async def https_server(pki: PKI, *, require_client_cert: bool = True,
                       accept_token: str | None = None) -> AsyncIterator[tuple[str, Seen]]:
    """An https server for ``api.internal`` on 127.0.0.1; returns its URL and what it saw."""
    seen = Seen([], [])

    async def version(request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        seen.authorization.append(authorization)
        seen.peers.append(request.transport.get_extra_info("peercert")
                          if request.transport else None)
        if accept_token is not None and authorization != f"Bearer {accept_token}":
            return status_response(401, "Unauthorized", "Unauthorized")
        return json_response({"major": "1", "minor": "32"})

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.path("ca.crt")))
    context.load_cert_chain(pki.path("server.crt"), pki.path("server.key"))
    context.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
    app = web.Application()
    app.router.add_get("/version", version)
    server = TestServer(app, scheme="https", host="127.0.0.1")
    await server.start_server(ssl=context)
    try:
        yield f"https://127.0.0.1:{server.port}", seen
    finally:
        await server.close()


def subject(peer: Any) -> dict[str, str]:
    return {key: value for rdn in peer["subject"] for key, value in rdn}


async def test_inline_ca_and_client_certificate(pki: PKI) -> None:
    async with https_server(pki) as (url, seen):
        config = cfg.ClientConfig(server=url, tls_server_name="api.internal",
                                  ca_data=pki.data("ca.crt"),
                                  client_cert_data=pki.data("client.crt"),
                                  client_key_data=pki.data("client.key"), token="tok")
        async with api.Client(config) as client:
            assert (await client.version())["minor"] == "32"
    assert seen.authorization == ["Bearer tok"]
    assert subject(seen.peers[0]) == {"commonName": "alice", "organizationName": "devs"}


async def test_files_from_a_kubeconfig(pki: PKI, tmp_path: Path) -> None:
    async with https_server(pki) as (url, seen):
        path = tmp_path / "kubeconfig"
        path.write_text(f"""
clusters:
- name: c
  cluster: {{server: "{url}", certificate-authority: {pki.path("ca.crt")},
             tls-server-name: api.internal}}
users:
- name: u
  user: {{client-certificate: {pki.path("client.crt")}, client-key: {pki.path("client.key")},
          username: bob, password: pw}}
contexts:
- name: x
  context: {{cluster: c, user: u}}
current-context: x
""")
        async with api.Client(cfg.load_kubeconfig(path)) as client:
            await client.version()
    assert seen.authorization == ["Basic Ym9iOnB3"]
    assert subject(seen.peers[0])["commonName"] == "alice"


async def test_server_name_is_verified(pki: PKI) -> None:
    async with https_server(pki, require_client_cert=False) as (url, _):
        config = cfg.ClientConfig(server=url, ca_data=pki.data("ca.crt"))
        async with api.Client(config) as client:
            with pytest.raises(errors.ServiceUnavailable, match="connection failed") as caught:
                await client.version()
    assert "certificate" in str(caught.value.__cause__).lower()


async def test_unknown_authority_is_refused(pki: PKI) -> None:
    async with https_server(pki, require_client_cert=False) as (url, _):
        config = cfg.ClientConfig(server=url, tls_server_name="api.internal")
        async with api.Client(config) as client:
            with pytest.raises(errors.ServiceUnavailable):
                await client.version()


async def test_insecure_skip_verify(pki: PKI) -> None:
    async with https_server(pki, require_client_cert=False) as (url, seen):
        config = cfg.ClientConfig(server=url, insecure_skip_tls_verify=True, token="t")
        async with api.Client(config) as client:
            await client.version()
    assert seen.authorization == ["Bearer t"]


async def test_rotated_token_file_is_used_after_a_401(pki: PKI, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old")
    async with https_server(pki, require_client_cert=False, accept_token="new") as (url, seen):
        config = cfg.ClientConfig(server=url, tls_server_name="api.internal",
                                  ca_file=pki.path("ca.crt"), token_file=token)
        async with api.Client(config) as client:
            with pytest.raises(errors.Unauthorized):
                await client.version()
            token.write_text("new")
            await client.version()
    assert seen.authorization == ["Bearer old", "Bearer new"]


def test_bad_material_is_a_config_error(pki: PKI, tmp_path: Path) -> None:
    with pytest.raises(kc.ConfigError, match="certificate authority"):
        transport.ssl_context(cfg.ClientConfig(server="https://x", ca_data=b"not a pem"))
    with pytest.raises(kc.ConfigError, match="certificate authority"):
        transport.ssl_context(cfg.ClientConfig(server="https://x", ca_file=tmp_path / "none"))
    with pytest.raises(kc.ConfigError, match="client certificate"):
        transport.ssl_context(cfg.ClientConfig(server="https://x",
                                               client_cert_data=pki.data("client.crt"),
                                               client_key_data=pki.data("server.key")))
    assert transport.ssl_context(cfg.ClientConfig(server="http://x")) is None
