"""``kubectl get csr``, ``kubectl certificate approve`` and ``deny`` with the real kubectl
against ``setpoint serve``: the columns kubectl prints, the approval written through
``/approval``, and the certificate the control plane's signer (in the controller manager's
process) then issues, verifiable against ``kube-root-ca.crt``."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography import x509

from setpoint.pki import csr as pkicsr
from tests.compat.conftest import Kubectl, eventually

pytestmark = [pytest.mark.compat, pytest.mark.slow]


def csr(name: str, signer: str, usages: list[str], **spec: Any) -> dict[str, Any]:
    pem, _key = pkicsr.new_request(name, (f"{name}.default.svc",))
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": signer,
                     "usages": usages, **spec}}


def test_get_approve_deny_and_the_issued_certificate(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": [
        csr("web", "setpoint.dev/serving", ["digital signature", "server auth"],
            expirationSeconds=7200),
        csr("nope", "setpoint.dev/serving", ["server auth"])]}))
    listing = kubectl.run("get", "csr").stdout.splitlines()
    assert listing[0].split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR",
                                  "REQUESTEDDURATION", "CONDITION"]
    rows = {line.split()[0]: line.split() for line in listing[1:]}
    assert rows["web"][2:] == ["setpoint.dev/serving", "system:admin", "120m", "Pending"]
    assert rows["nope"][2:] == ["setpoint.dev/serving", "system:admin", "<none>", "Pending"]

    out = kubectl.run("certificate", "approve", "web").stdout
    assert "certificatesigningrequest.certificates.k8s.io/web approved" in out
    out = kubectl.run("certificate", "deny", "nope").stdout
    assert "certificatesigningrequest.certificates.k8s.io/nope denied" in out

    def issued() -> str:
        return kubectl.run("get", "csr", "web", "-o",
                           "jsonpath={.status.certificate}").stdout.strip()

    certificate = eventually(issued, timeout=30)
    cert = x509.load_pem_x509_certificate(base64.b64decode(certificate))
    root = kubectl.json("get", "configmap", "kube-root-ca.crt")
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(
        root["data"]["ca.crt"].encode()))

    rows = {line.split()[0]: line.split()
            for line in kubectl.run("get", "csr").stdout.splitlines()[1:]}
    assert rows["web"][-1] == "Approved,Issued"
    assert rows["nope"][-1] == "Denied"
    # denied stays denied (kubectl reads the condition the server wrote; the server's own
    # refusal is tests/integration/api/test_certificate_requests.py)
    again = kubectl.run("certificate", "approve", "nope", check=False)
    assert again.returncode != 0
    assert 'certificate signing request "nope" is already Denied' in again.stderr


def test_explain_reads_the_published_schema(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "csr.spec.expirationSeconds").stdout
    assert "KIND:       CertificateSigningRequest" in out
    assert "FIELD: expirationSeconds <integer>" in out
