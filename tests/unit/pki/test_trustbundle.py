"""The trust-bundle PEM parser: Kubernetes' rules, and never an exception on any input."""

from __future__ import annotations

import base64
import datetime as dt

from cryptography.hazmat.primitives import hashes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.pki import certs, trustbundle

NOW = dt.datetime.now(dt.UTC)
CA = certs.new_ca("bundle-ca", now=NOW)
OTHER = certs.new_ca("other-ca", now=NOW)
LEAF = certs.issue(CA, common_name="leaf", usage="server", now=NOW, hosts=("a.example",))


def test_ca_certificates_are_accepted_with_text_between_them() -> None:
    text = "comment\n" + CA.cert_pem.decode() + "between\n" + OTHER.cert_pem.decode()
    assert trustbundle.trust_bundle_errors(text) == []
    assert [c.subject.rfc4514_string() for c in trustbundle.certificates(text)] == [
        "CN=bundle-ca", "CN=other-ca"]


def test_each_problem_names_its_entry() -> None:
    key = certs.key_pem(certs.new_key()).decode()
    text = CA.cert_pem.decode() + key + LEAF.cert_pem.decode() + CA.cert_pem.decode()
    assert trustbundle.trust_bundle_errors(text) == [
        "entry 1 has bad block type: PRIVATE KEY",
        "entry 2 does not have the CA bit set",
        "duplicate trust anchor (indices [0 3])"]
    garbage = "-----BEGIN CERTIFICATE-----\n" + base64.b64encode(b"nope").decode() + \
        "\n-----END CERTIFICATE-----\n"
    assert trustbundle.trust_bundle_errors(garbage) == ["entry 0 does not parse as X.509"]
    assert trustbundle.trust_bundle_errors("") == ["at least one trust anchor must be provided"]
    huge = "x" * (trustbundle.MAX_TRUST_BUNDLE_BYTES + 1)
    assert trustbundle.trust_bundle_errors(huge) == ["may not be more than 1048576 bytes"]
    assert trustbundle.certificates(huge) == []


_blocks = st.sampled_from([CA.cert_pem.decode(), OTHER.cert_pem.decode(),
                           LEAF.cert_pem.decode(), certs.key_pem(certs.new_key()).decode()])


@st.composite
def _damaged(draw: st.DrawFn) -> str:
    text = "".join(draw(st.lists(st.one_of(_blocks, st.text(max_size=40)), max_size=6)))
    if text and draw(st.booleans()):
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.text(max_size=8)) + text[at + 1:]
    return text


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.one_of(st.text(max_size=2048), _damaged()))
def test_any_text_gets_messages_or_anchors_never_an_exception(text: str) -> None:
    problems = trustbundle.trust_bundle_errors(text)
    assert all(isinstance(p, str) and p for p in problems)
    if not problems:
        anchors = trustbundle.certificates(text)
        assert anchors
        assert len({a.fingerprint(hashes.SHA256()) for a in anchors}) == len(anchors)
