"""Leaf certificates: one extended key usage, or several (an etcd member's certificate)."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from setpoint.pki import certs

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SERVER = ExtendedKeyUsageOID.SERVER_AUTH
CLIENT = ExtendedKeyUsageOID.CLIENT_AUTH


def usages(pair: certs.KeyPair) -> list[x509.ObjectIdentifier]:
    return list(pair.certificate.extensions.get_extension_for_class(
        x509.ExtendedKeyUsage).value)


@pytest.mark.parametrize(("usage", "expected"), [
    ("server", [SERVER]),
    ("client", [CLIENT]),
    (("server", "client"), [SERVER, CLIENT]),
    (["client", "client"], [CLIENT]),
], ids=["server", "client", "both", "repeated"])
def test_a_leaf_carries_the_usages_asked_for(usage: certs.Usage | tuple[certs.Usage, ...],
                                            expected: list[x509.ObjectIdentifier]) -> None:
    ca = certs.new_ca("ca", now=NOW)
    pair = certs.issue(ca, common_name="etcd-member", usage=usage, now=NOW,
                       hosts=["127.0.0.1", "localhost"])
    assert usages(pair) == expected
    assert certs.signed_by(pair, ca)
    assert certs.san_hosts(pair.certificate) == {"127.0.0.1", "localhost"}


@pytest.mark.parametrize("usage", ["peer", (), ("server", "codeSigning")],
                         ids=["unknown", "none", "one-unknown"])
def test_other_usages_are_refused(usage: object) -> None:
    ca = certs.new_ca("ca", now=NOW)
    with pytest.raises(ValueError, match="usage must be"):
        certs.issue(ca, common_name="x", usage=usage, now=NOW)  # type: ignore[arg-type]
