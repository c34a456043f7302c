"""``kubectl get csr``, ``kubectl certificate approve`` and ``deny`` with the real kubectl
against ``setpoint serve``: the columns kubectl prints, the approval written through
``/approval``, and the certificate the control plane's signer (in the controller manager's
process) then issues, verifiable against ``kube-root-ca.crt``."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from setpoint.pki import csr as pkicsr
from tests.compat.conftest import Kubectl, eventually
from tests.conftest import ServeProcess, start_serve

pytestmark = [pytest.mark.compat, pytest.mark.slow]


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    # the signer (in the controller manager's process) issues at most an hour
    proc = start_serve(tmp_path_factory.mktemp("serve"),
                       extra_args=["--cluster-signing-duration", "3600"])
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def kubectl(serve: ServeProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    return Kubectl(serve.kubeconfig, tmp_path_factory.mktemp("kubecache"), env)


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
    # 7200 s asked, capped by --cluster-signing-duration (plus the five minutes' backdating)
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == \
        dt.timedelta(seconds=3600) + pkicsr.BACKDATE

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


def test_approval_without_approve_on_the_signer_is_forbidden(kubectl: Kubectl) -> None:
    kubectl.run("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                      "items": [
        csr("bobs", "example.com/widgets", ["server auth"]),
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "csr-updater"},
         "rules": [{"apiGroups": ["certificates.k8s.io"],
                    "resources": ["certificatesigningrequests",
                                  "certificatesigningrequests/approval"],
                    "verbs": ["get", "list", "update"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "csr-updater"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "csr-updater"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                       "name": "bob"}]}]}))

    def refused() -> str:
        result = kubectl.run("certificate", "approve", "bobs", "--as", "bob", check=False)
        assert result.returncode != 0
        assert "cannot get resource" not in result.stderr  # RBAC has caught up
        return result.stderr

    stderr = eventually(refused, timeout=30)
    assert ('certificatesigningrequests.certificates.k8s.io "bobs" is forbidden: user not '
            'permitted to approve requests with signerName "example.com/widgets"') in stderr
    row = kubectl.run("get", "csr", "bobs").stdout.splitlines()[1].split()
    assert row[-1] == "Pending"


def test_get_cluster_trust_bundles_and_apply_one(kubectl: Kubectl) -> None:
    def published() -> list[str]:
        lines = kubectl.run("get", "clustertrustbundles").stdout.splitlines()
        return lines if len(lines) > 3 else []
    listing = eventually(published)
    assert listing[0].split() == ["NAME", "SIGNERNAME"]
    rows = sorted(tuple(line.split()) for line in listing[1:])
    assert rows == [("kubernetes.io:kube-apiserver-client:cluster-ca",
                     "kubernetes.io/kube-apiserver-client"),
                    ("kubernetes.io:kubelet-serving:cluster-ca",
                     "kubernetes.io/kubelet-serving"),
                    ("setpoint.dev:serving:cluster-ca", "setpoint.dev/serving")]
    shown = json.loads(kubectl.run("get", "clustertrustbundle",
                                   "setpoint.dev:serving:cluster-ca", "-o", "json").stdout)
    root = json.loads(kubectl.run("get", "configmap", "kube-root-ca.crt", "-n", "default",
                                  "-o", "json").stdout)
    assert shown["spec"]["trustBundle"] == root["data"]["ca.crt"]
    ca = x509.load_pem_x509_certificate(shown["spec"]["trustBundle"].encode())
    mine = {"apiVersion": "certificates.k8s.io/v1alpha1", "kind": "ClusterTrustBundle",
            "metadata": {"name": "mine"},
            "spec": {"trustBundle": ca.public_bytes(serialization.Encoding.PEM).decode()}}
    kubectl.run("apply", "-f", "-", input=json.dumps(mine))
    wrong = {**mine, "metadata": {"name": "example.com:x:mine"},
             "spec": {**mine["spec"], "signerName": "example.org/x"}}
    failed = kubectl.run("apply", "-f", "-", input=json.dumps(wrong), check=False)
    assert failed.returncode != 0
    assert ("ClusterTrustBundle for signerName example.org/x must be named with prefix "
            "example.org:x:") in failed.stderr
