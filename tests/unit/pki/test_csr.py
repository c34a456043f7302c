"""setpoint.pki.csr: requests parse and verify as kube-apiserver checks them, any bytes give
a CSRError (never another exception), and signing keeps the request's subject and SANs."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.pki import certs
from setpoint.pki import csr as pkicsr

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
REQUEST, _KEY = pkicsr.new_request("widget", ("widget.example", "10.0.0.1"), ("team",))


def test_a_request_round_trips() -> None:
    parsed = pkicsr.parse_request(REQUEST)
    assert parsed.common_name == "widget"
    assert parsed.organizations == ("team",)
    assert parsed.dns_names == ("widget.example",)
    assert parsed.ip_addresses == ("10.0.0.1",)
    assert parsed.emails == ()
    assert parsed.uris == ()


def test_signing_keeps_subject_and_sans_and_never_outlives_the_ca() -> None:
    ca = certs.new_ca("test-ca", now=NOW, validity=dt.timedelta(days=2))
    pem = pkicsr.sign(ca, pkicsr.parse_request(REQUEST), usages=["server auth",
                                                                 "digital signature"],
                      now=NOW, duration=dt.timedelta(days=30))
    cert = x509.load_pem_x509_certificate(pem)
    cert.verify_directly_issued_by(ca.certificate)
    assert certs.subject_of(cert) == ("widget", ("team",))
    assert certs.san_hosts(cert) == {"widget.example", "10.0.0.1"}
    assert cert.not_valid_after_utc == ca.not_after
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert pkicsr.certificate_errors(pem) is None


@pytest.mark.parametrize(("data", "message"), [
    (b"", "PEM block type must be CERTIFICATE REQUEST"),
    (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
     "PEM block type must be CERTIFICATE REQUEST"),
    (b"-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
     "x509: malformed certificate request"),
    (b"A" * (pkicsr.MAX_REQUEST_BYTES + 1), "must be at most 65536 bytes"),
])
def test_bad_requests(data: bytes, message: str) -> None:
    with pytest.raises(pkicsr.CSRError, match=message):
        pkicsr.parse_request(data)


def test_a_request_with_a_changed_signature_does_not_verify() -> None:
    mine = x509.load_pem_x509_csr(REQUEST)
    der = bytearray(mine.public_bytes(Encoding.DER))
    at = der.rfind(mine.signature)
    der[at:at + len(mine.signature)] = bytes(b ^ 0x55 for b in mine.signature)
    pem = (b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(bytes(der))
           + b"-----END CERTIFICATE REQUEST-----\n")
    with pytest.raises(pkicsr.CSRError):
        pkicsr.parse_request(pem)


@pytest.mark.parametrize(("pem", "message"), [
    (b"junk", "must contain at least one CERTIFICATE PEM block"),
    (REQUEST, 'only CERTIFICATE PEM blocks are allowed, found "CERTIFICATE REQUEST"'),
    (b"-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n"
     b"-----END CERTIFICATE-----\n", "no PEM block headers are permitted"),
    (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
     "x509: malformed certificate"),
])
def test_bad_certificates(pem: bytes, message: str) -> None:
    problem = pkicsr.certificate_errors(pem)
    assert problem is not None
    assert problem.startswith(message)


def _mutations() -> st.SearchStrategy[bytes]:
    def flip(data: bytes, at: int, value: int) -> bytes:
        at %= len(data)
        return data[:at] + bytes([value]) + data[at + 1:]
    return st.builds(flip, st.just(REQUEST), st.integers(0, len(REQUEST) - 1),
                     st.integers(0, 255))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(st.binary(max_size=2048), _mutations(),
                 st.binary(max_size=512).map(
                     lambda b: b"-----BEGIN CERTIFICATE REQUEST-----\n"
                     + base64.encodebytes(b) + b"-----END CERTIFICATE REQUEST-----\n")))
def test_any_bytes_are_a_request_or_a_csr_error(data: bytes) -> None:
    try:
        parsed = pkicsr.parse_request(data)
    except pkicsr.CSRError as e:
        message = str(e)
        assert message  # every refusal says why
    else:
        assert parsed.csr.is_signature_valid
    problem = pkicsr.certificate_errors(data)
    assert problem is None or isinstance(problem, str)


pem_blocks = st.builds(
    lambda kind, headers, body: (
        b"-----BEGIN " + kind + b"-----\n" + headers + base64.encodebytes(body)
        + b"-----END " + kind + b"-----\n"),
    st.sampled_from([b"CERTIFICATE", b"CERTIFICATE REQUEST", b"", b"X", b"CERTIFICATE-"]),
    st.sampled_from([b"", b"Proc-Type: 4,ENCRYPTED\n\n", b"a:b\n", b":\n\n"]),
    st.binary(max_size=300))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(pem_blocks, st.binary(max_size=40)), max_size=20)
       .map(b"".join))
def test_pem_shaped_input_is_judged_not_raised(data: bytes) -> None:
    problem = pkicsr.certificate_errors(data)
    assert problem is None or isinstance(problem, str)
    try:
        pkicsr.parse_request(data)
    except pkicsr.CSRError as e:
        message = str(e)
        assert message
