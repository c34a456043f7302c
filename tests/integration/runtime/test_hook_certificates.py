"""Hooks against a secured setpoint serve their webhooks over a certificate the control plane
issues (a CertificateSigningRequest to ``setpoint.dev/serving``, signed by the cluster CA):
the certificate the API server is shown is the cluster CA's, and the configurations carry
that CA. An identity that may not approve waits for someone who may (and says what to run);
one that may not ask at all falls back to a CA of its own."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cryptography import x509

from setpoint.apimachinery import errors
from setpoint.client import Client, load_kubeconfig
from setpoint.pki import certs
from setpoint.runtime import (
    AdmissionRequest,
    ConversionWebhook,
    HookConfig,
    Hooks,
    Verdict,
    hookcerts,
)
from setpoint.runtime.hooks import VALIDATING
from setpoint.testing import control_plane, waiting
from tests.conftest import start_serve
from tests.integration.runtime.conftest import BOOK, book, install_books
from tests.integration.runtime.test_conversion_functions import (
    GADGET_V1,
    GADGET_V2,
    GROUP,
    convert,
    install,
)

CSR = hookcerts.CSR
CONTROLLERS = ("csrsigning", "root-ca-cert-publisher", "namespace", "serviceaccount")
CTB = ("certificates.k8s.io/v1beta1", "ClusterTrustBundle")
SERVING_BUNDLE = "setpoint.dev:serving:cluster-ca"
BUNDLE_READER = {"apiGroups": ["certificates.k8s.io"], "resources": ["clustertrustbundles"],
                 "verbs": ["list"]}


def hooks_rbac(*rules: dict[str, Any]) -> list[dict[str, Any]]:
    """A ClusterRole of ``rules`` bound to the ServiceAccount ``default/hooks``."""
    return [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "hooks"}, "rules": list(rules)},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "hooks"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                         "name": "hooks"},
             "subjects": [{"kind": "ServiceAccount", "name": "hooks",
                           "namespace": "default"}]}]


def library_hooks(**options: Any) -> Hooks:
    hooks = Hooks("library", **options)

    @hooks.validate(BOOK)
    def no_untitled(req: AdmissionRequest) -> Verdict | None:
        assert req.object is not None
        if not req.object["spec"].get("title"):
            return Verdict.deny(f"book {req.name} needs a title")
        return None
    return hooks


async def served_certificate(hooks: Hooks) -> x509.Certificate:
    """The certificate the hook server presents (read without verifying it)."""
    parts = urlsplit(hooks.url("/"))
    assert parts.hostname is not None
    assert parts.port is not None
    pem = await asyncio.to_thread(ssl.get_server_certificate, (parts.hostname, parts.port))
    return x509.load_pem_x509_certificate(pem.encode())


async def cluster_ca(client: Client) -> x509.Certificate:
    root = await client.get(("v1", "ConfigMap"), "kube-root-ca.crt", namespace="default")
    return x509.load_pem_x509_certificate(root["data"]["ca.crt"].encode())


async def assert_denies_untitled(client: Client, name: str) -> None:
    with pytest.raises(errors.ApiError) as denied:
        await client.create(book(name, title=""))
    assert denied.value.message == ('admission webhook "no-untitled.library.hooks.setpoint" '
                                    f"denied the request: book {name} needs a title")


@pytest.mark.slow
async def test_hooks_against_setpoint_serve_use_a_certificate_of_the_cluster_ca(
        tmp_path: Path) -> None:
    serve = await asyncio.to_thread(start_serve, tmp_path / "serve")
    try:
        async with Client(load_kubeconfig(serve.kubeconfig)) as client:
            await install_books(client)
            await _root_ca_published(client)
            await _published(client, CTB, SERVING_BUNDLE)
            ca = await cluster_ca(client)
            async with library_hooks().serving(client) as hooks:
                await assert_denies_untitled(client, "untitled")
                served = await served_certificate(hooks)
                served.verify_directly_issued_by(ca)  # raises unless the cluster CA signed it
                assert served.issuer == ca.subject
                configured = await client.get(VALIDATING, "library-hooks")
                bundle = configured["webhooks"][0]["clientConfig"]["caBundle"]
                assert x509.load_pem_x509_certificate(base64.b64decode(bundle)) == ca
                # the request is gone once the certificate is read
                assert (await client.list(CSR))["items"] == []
    finally:
        await asyncio.to_thread(serve.stop)


async def _root_ca_published(client: Client) -> None:
    await _published(client, ("v1", "ConfigMap"), "kube-root-ca.crt", namespace="default")


async def _published(client: Client, resource: tuple[str, str], name: str,
                     namespace: str | None = None) -> None:
    async def published() -> bool:
        await client.get(resource, name, namespace=namespace)
        return True

    await waiting.eventually(published, timeout=30, retry_on=(errors.NotFound,),
                             what=f"{name} published")


async def test_an_identity_that_may_not_approve_waits_for_someone_who_may(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        await install_books(cp.client)
        await cp.apply(hooks_rbac(
            {"apiGroups": ["certificates.k8s.io"],
             "resources": ["certificatesigningrequests"],
             "verbs": ["create", "get", "delete"]},
            {"apiGroups": ["certificates.k8s.io"],
             "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]},
            BUNDLE_READER,
            {"apiGroups": ["admissionregistration.k8s.io"],
             "resources": ["validatingwebhookconfigurations"], "verbs": ["*"]},
            {"apiGroups": ["example.com"], "resources": ["books"], "verbs": ["*"]},
            {"apiGroups": ["apiextensions.k8s.io"],
             "resources": ["customresourcedefinitions"], "verbs": ["get", "list"]}))
        kubeconfig = await cp.service_account_kubeconfig("default/hooks")
        ca = await cluster_ca(cp.client)
        async with Client(load_kubeconfig(kubeconfig)) as operator:
            hooks = library_hooks()
            with caplog.at_level(logging.WARNING, logger="setpoint.runtime.hooks"):
                serving = asyncio.create_task(_serve_until_stopped(hooks, operator))
                # the operator asks, cannot approve, and says what to run: an admin does
                pending = await _wait_pending(cp.client)
                name = pending["metadata"]["name"]
                await cp.eventually(lambda: any(
                    f"run: kubectl certificate approve {name}" in r.getMessage()
                    for r in caplog.records))
                pending["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                                     "reason": "Admin", "message": "ok"}]}
                await cp.client.update(pending, subresource="approval")
                await asyncio.wait_for(hooks.registered.wait(), 30)
                served = await served_certificate(hooks)
                served.verify_directly_issued_by(ca)
                await assert_denies_untitled(cp.client, "untitled")
                serving.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await serving


async def _serve_until_stopped(hooks: Hooks, client: Client) -> None:
    async with hooks.serving(client):
        await asyncio.Event().wait()


async def _wait_pending(client: Client) -> dict[str, Any]:
    async def first() -> dict[str, Any] | None:
        items: list[dict[str, Any]] = (await client.list(CSR))["items"]
        return items[0] if items else None

    pending: dict[str, Any] | None = await waiting.eventually(first, timeout=30,
                                                              what="a pending request")
    assert pending is not None
    return pending


async def test_an_identity_that_may_not_ask_falls_back_to_its_own_ca(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        await install_books(cp.client)
        await cp.apply(hooks_rbac(
            {"apiGroups": ["admissionregistration.k8s.io"],
             "resources": ["validatingwebhookconfigurations"], "verbs": ["*"]},
            BUNDLE_READER))
        kubeconfig = await cp.service_account_kubeconfig("default/hooks")
        ca = await cluster_ca(cp.client)
        async with Client(load_kubeconfig(kubeconfig)) as operator:
            with caplog.at_level(logging.INFO, logger="setpoint.runtime.hooks"):
                async with library_hooks().serving(operator) as hooks:
                    await assert_denies_untitled(cp.client, "untitled")
                    served = await served_certificate(hooks)
                    assert served.issuer != ca.subject
                    bundle = x509.load_pem_x509_certificate(
                        base64.b64decode(hooks.ca_bundle))
                    served.verify_directly_issued_by(bundle)
        messages = [r.getMessage() for r in caplog.records]
        assert any("cannot issue a serving certificate (Forbidden" in m for m in messages)
        assert any("serves a certificate of its own CA" in m for m in messages)


async def test_certificate_source_own_asks_nobody(tmp_path: Path) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        await install_books(cp.client)
        hooks = library_hooks(config=HookConfig(certificate_source="own"))
        async with hooks.serving(cp.client):
            await assert_denies_untitled(cp.client, "untitled")
            assert (await served_certificate(hooks)).issuer != (await cluster_ca(
                cp.client)).subject
        assert (await cp.client.list(CSR))["items"] == []


async def test_a_conversion_webhook_started_with_a_client_serves_a_cluster_certificate(
        tmp_path: Path) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        client = cp.client
        await install(client)
        await client.create({"apiVersion": GADGET_V2[0], "kind": "Gadget",
                             "metadata": {"name": "probe", "namespace": "default"},
                             "spec": {"replicas": 1}})
        ca = await cluster_ca(client)
        hook = ConversionWebhook(convert)
        await hook.start(client)
        try:
            assert x509.load_pem_x509_certificate(base64.b64decode(hook.ca_bundle)) == ca
            parts = urlsplit(hook.url)
            assert parts.hostname is not None
            assert parts.port is not None
            pem = await asyncio.to_thread(ssl.get_server_certificate,
                                          (parts.hostname, parts.port))
            x509.load_pem_x509_certificate(pem.encode()).verify_directly_issued_by(ca)
            await hook.register(client, f"gadgets.{GROUP}")

            async def converted() -> bool:
                probe = await client.get(GADGET_V1, "probe", namespace="default")
                return bool(probe["spec"] == {"size": "1"})
            await cp.eventually(converted)
        finally:
            await hook.stop()


async def test_a_cluster_certificate_verifies_against_the_signers_trust_bundle(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        await install_books(cp.client)
        published = await cp.wait_for(CTB, SERVING_BUNDLE)
        anchor = published["spec"]["trustBundle"].encode()
        with caplog.at_level(logging.INFO, logger="setpoint.runtime.hooks"):
            async with library_hooks().serving(cp.client) as hooks:
                await assert_denies_untitled(cp.client, "untitled")
                served = await served_certificate(hooks)
                served.verify_directly_issued_by(x509.load_pem_x509_certificate(anchor))
                configured = await cp.client.get(VALIDATING, "library-hooks")
                assert base64.b64decode(configured["webhooks"][0]["clientConfig"]
                                        ["caBundle"]) == anchor
        assert any("serving certificate issued by the cluster" in r.getMessage()
                   for r in caplog.records)


async def test_without_the_signers_trust_bundle_nothing_is_asked(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # as on a real cluster without the serving signer: no bundle, so no request at all
    async with control_plane(tmp_path, controllers=("namespace", "serviceaccount"),
                             secure=True) as cp:
        await install_books(cp.client)
        with caplog.at_level(logging.INFO, logger="setpoint.runtime.hooks"):
            async with library_hooks().serving(cp.client) as hooks:
                await assert_denies_untitled(cp.client, "untitled")
                served = await served_certificate(hooks)
                assert served.issuer.rfc4514_string() == "CN=library-hooks-ca"
        messages = [r.getMessage() for r in caplog.records]
        assert any("library-hooks: no ClusterTrustBundle for signer setpoint.dev/serving "
                   "(nothing signs for it); the hooks use a CA of their own" in m
                   for m in messages)
        assert not any("CertificateSigningRequest" in m for m in messages)


async def test_an_identity_that_may_not_list_trust_bundles_asks_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        await install_books(cp.client)
        await cp.apply(hooks_rbac(
            {"apiGroups": ["admissionregistration.k8s.io"],
             "resources": ["validatingwebhookconfigurations"], "verbs": ["*"]}))
        kubeconfig = await cp.service_account_kubeconfig("default/hooks")
        async with Client(load_kubeconfig(kubeconfig)) as operator:
            with caplog.at_level(logging.INFO, logger="setpoint.runtime.hooks"):
                async with library_hooks().serving(operator) as hooks:
                    await assert_denies_untitled(cp.client, "untitled")
                    served = await served_certificate(hooks)
                    assert served.issuer.rfc4514_string() == "CN=library-hooks-ca"
        messages = [r.getMessage() for r in caplog.records]
        assert any("library-hooks: cannot list ClusterTrustBundles (Forbidden" in m
                   for m in messages)


async def test_a_request_nobody_signs_falls_back_after_the_timeout(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # a bundle for the signer, but nothing signing: approved, never signed
    async with control_plane(tmp_path, controllers=("namespace", "serviceaccount"),
                             secure=True) as cp:
        await install_books(cp.client)
        stale = certs.new_ca("gone-signer", now=dt.datetime.now(dt.UTC))
        await cp.client.create({"apiVersion": CTB[0], "kind": CTB[1],
                                "metadata": {"name": SERVING_BUNDLE},
                                "spec": {"signerName": "setpoint.dev/serving",
                                         "trustBundle": stale.cert_pem.decode()}})
        config = HookConfig(certificate=hookcerts.CertificateConfig(timeout=1.0))
        with caplog.at_level(logging.INFO, logger="setpoint.runtime.hooks"):
            async with library_hooks(config=config).serving(cp.client) as hooks:
                await assert_denies_untitled(cp.client, "untitled")
                served = await served_certificate(hooks)
                bundle = x509.load_pem_x509_certificate(base64.b64decode(hooks.ca_bundle))
                served.verify_directly_issued_by(bundle)
                assert bundle.subject.rfc4514_string() == "CN=library-hooks-ca"
        messages = [r.getMessage() for r in caplog.records]
        assert any("was not signed within 1s; the hooks use a CA of their own" in m
                   for m in messages)
        # the abandoned request is deleted
        assert (await cp.client.list(CSR))["items"] == []
