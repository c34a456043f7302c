"""The csrsigning controller on a secured control plane: approved requests of the built-in
signers get certificates from the cluster CA (verifiable against ``kube-root-ca.crt``), rule
breakers get Failed, other signers and unapproved requests stay pending."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from setpoint.client import Client, load_kubeconfig
from setpoint.controllers import csrsigning
from setpoint.pki import csr as pkicsr
from setpoint.pki.certs import KeyPair
from setpoint.server import kubeconfigs
from setpoint.testing import control_plane

Obj = dict[str, Any]
CSR = ("certificates.k8s.io/v1", "CertificateSigningRequest")
CONFIG_MAP = ("v1", "ConfigMap")
CONTROLLERS = ("csrsigning", "root-ca-cert-publisher", "namespace", "serviceaccount")


def request(name: str, signer: str, usages: list[str], *, cn: str = "svc",
            hosts: tuple[str, ...] = ("svc.example",), orgs: tuple[str, ...] = (),
            **spec: Any) -> Obj:
    pem, _key = pkicsr.new_request(cn, hosts, orgs)
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer,
                     "usages": usages, **spec}}


def approve(obj: Obj) -> Obj:
    obj = dict(obj)
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True",
                                     "reason": "Test", "message": "approved by the test"}]}
    return obj


def issued(obj: Obj) -> bool:
    return bool((obj.get("status") or {}).get("certificate"))


def failed(obj: Obj) -> bool:
    return any(c.get("type") == "Failed" for c in (obj.get("status") or {}).get("conditions")
               or [])


async def test_approved_requests_are_signed_by_the_cluster_ca(tmp_path: Path) -> None:
    async with control_plane(tmp_path, controllers=CONTROLLERS, secure=True) as cp:
        client = cp.client
        serving = await client.create(request("web", csrsigning.SERVING,
                                              ["digital signature", "server auth"],
                                              hosts=("web.default.svc", "127.0.0.1"),
                                              expirationSeconds=3600))
        pending = await client.create(request("waits", csrsigning.SERVING, ["server auth"]))
        unknown = await client.create(request("elsewhere", "example.com/other",
                                              ["server auth"]))
        await client.update(approve(serving), subresource="approval")
        await client.update(approve(unknown), subresource="approval")
        signed = await cp.wait_for(CSR, "web", issued)

        root = await cp.wait_for(CONFIG_MAP, "kube-root-ca.crt", namespace="default")
        ca = x509.load_pem_x509_certificate(root["data"]["ca.crt"].encode())
        cert = x509.load_pem_x509_certificate(base64.b64decode(signed["status"]["certificate"]))
        cert.verify_directly_issued_by(ca)  # raises unless the cluster CA signed it
        assert cert.issuer == ca.subject
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == ["web.default.svc"]
        assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert lifetime == dt.timedelta(seconds=3600) + pkicsr.BACKDATE

        # a client certificate the API server then accepts as its subject
        pem, key_pem = pkicsr.new_request("carol", (), ("team-a",))
        body = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                "metadata": {"name": "carol"},
                "spec": {"request": base64.b64encode(pem).decode(),
                         "signerName": csrsigning.KUBE_APISERVER_CLIENT,
                         "usages": ["client auth"]}}
        await client.update(approve(await client.create(body)), subresource="approval")
        carol = await cp.wait_for(CSR, "carol", issued)
        cert_pem = base64.b64decode(carol["status"]["certificate"])
        kubeconfig = tmp_path / "carol.kubeconfig"
        kubeconfigs.write(kubeconfig, kubeconfigs.kubeconfig(
            cp.url, ca_pem=root["data"]["ca.crt"].encode(), client=KeyPair(cert_pem, key_pem)))
        async with Client(load_kubeconfig(kubeconfig)) as as_carol:
            review = await as_carol.create({
                "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review["status"]["userInfo"]["username"] == "carol"
        assert "team-a" in review["status"]["userInfo"]["groups"]

        # the signers' rules: Failed with the rule, no certificate
        bad = await client.create(request("no-client-auth", csrsigning.KUBE_APISERVER_CLIENT,
                                          ["server auth"]))
        await client.update(approve(bad), subresource="approval")
        got = await cp.wait_for(CSR, "no-client-auth", failed)
        condition = got["status"]["conditions"][-1]
        assert condition["reason"] == "SignerValidationFailure"
        assert condition["message"] == "invalid usage for client certificate: server auth"
        assert not issued(got)
        node = await client.create(request(
            "kubelet", csrsigning.KUBELET_SERVING, ["digital signature", "server auth"],
            cn="worker-1", orgs=("system:nodes",)))
        await client.update(approve(node), subresource="approval")
        got = await cp.wait_for(CSR, "kubelet", failed)
        assert got["status"]["conditions"][-1]["message"] == \
            "subject common name does not begin with system:node:"

        # what the signer does not own, or nobody approved, stays pending
        for name in ("waits", "elsewhere"):
            assert not issued(await client.get(CSR, name))
            assert not failed(await client.get(CSR, name))
        assert pending["metadata"]["name"] == "waits"
