"""The built-in signers' rules (Kubernetes' messages) and the certificate's lifetime."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from setpoint.controllers import csrsigning
from setpoint.controllers.csrsigning import (
    KUBE_APISERVER_CLIENT,
    KUBELET_SERVING,
    SERVING,
    SigningConfig,
    duration_of,
    rule_violation,
)
from setpoint.pki import certs
from setpoint.pki import csr as pkicsr


def parsed(cn: str = "x", hosts: tuple[str, ...] = ("x.example",),
           orgs: tuple[str, ...] = ()) -> pkicsr.Request:
    return pkicsr.parse_request(pkicsr.new_request(cn, hosts, orgs)[0])


def with_email() -> pkicsr.Request:
    key = certs.new_key()
    request = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([
                   x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
                   x509.NameAttribute(NameOID.COMMON_NAME, "system:node:a")]))
               .add_extension(x509.SubjectAlternativeName([
                   x509.DNSName("a.example"), x509.RFC822Name("a@example.com")]),
                   critical=False)
               .sign(key, hashes.SHA256()))
    return pkicsr.Request(request)


NODE = dict(cn="system:node:a", orgs=("system:nodes",))


@pytest.mark.parametrize(("signer", "request_", "usages", "problem"), [
    (KUBE_APISERVER_CLIENT, parsed(), ["client auth"], None),
    (KUBE_APISERVER_CLIENT, parsed(), ["digital signature", "key encipherment", "client auth"],
     None),
    (KUBE_APISERVER_CLIENT, parsed(), ["client auth", "server auth"],
     "invalid usage for client certificate: server auth"),
    (KUBE_APISERVER_CLIENT, parsed(), ["digital signature"],
     "missing required usage for client certificate: client auth"),
    (KUBELET_SERVING, parsed(**NODE), ["digital signature", "server auth"], None),
    (KUBELET_SERVING, parsed(**NODE), ["digital signature", "key encipherment", "server auth"],
     None),
    (KUBELET_SERVING, parsed(cn="system:node:a"), ["digital signature", "server auth"],
     "subject organization is not system:nodes"),
    (KUBELET_SERVING, parsed(hosts=(), **NODE), ["digital signature", "server auth"],
     "DNS or IP subjectAltName is required"),
    (KUBELET_SERVING, with_email(), ["digital signature", "server auth"],
     "Email subjectAltNames are not allowed"),
    (KUBELET_SERVING, parsed(**NODE), ["server auth"],
     "usages did not match [digital signature key encipherment server auth]"),
    (KUBELET_SERVING, parsed(cn="worker", orgs=("system:nodes",)),
     ["digital signature", "server auth"],
     "subject common name does not begin with system:node:"),
    (SERVING, parsed(), ["server auth"], None),
    (SERVING, parsed(hosts=("10.0.0.1",)), ["digital signature", "key encipherment",
                                            "server auth"], None),
    (SERVING, parsed(), ["client auth"],
     "missing required usage for serving certificate: server auth"),
    (SERVING, parsed(), ["server auth", "client auth"],
     "invalid usage for serving certificate: client auth"),
    (SERVING, parsed(hosts=()), ["server auth"], "DNS or IP subjectAltName is required"),
    (SERVING, with_email(), ["server auth"], "Email subjectAltNames are not allowed"),
])
def test_signer_rules(signer: str, request_: pkicsr.Request, usages: list[str],
                      problem: str | None) -> None:
    assert rule_violation(signer, request_, usages) == problem


def test_the_lifetime_is_the_requested_one_within_bounds() -> None:
    config = SigningConfig(max_duration=dt.timedelta(days=30))
    assert duration_of({}, config) == dt.timedelta(days=30)
    assert duration_of({"expirationSeconds": 3600}, config) == dt.timedelta(hours=1)
    assert duration_of({"expirationSeconds": 10}, config) == csrsigning.MIN_DURATION
    assert duration_of({"expirationSeconds": 10**9}, config) == dt.timedelta(days=30)
    with pytest.raises(ValueError, match="at least 600 seconds"):
        SigningConfig(max_duration=dt.timedelta(seconds=10))
