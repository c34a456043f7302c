"""Making and reading X.509 certificates (ECDSA P-256 keys, SHA-256 signatures).

A :class:`KeyPair` is a certificate and its private key in PEM. :func:`new_ca` makes a
self-signed authority; :func:`issue` signs a leaf for a server (serverAuth, with SANs), a
client (clientAuth; the subject's CN is the user name and each O a group, as Kubernetes'
x509 authenticator reads them), or both (an etcd member's certificate: etcd also presents
its serving certificate as a client, to its peers and to its own HTTP gateway).

Invariants: leaves are never CAs (basicConstraints CA:false); serial numbers are 159 random
bits; ``not_before`` is set a minute early so that a freshly issued certificate is valid on a
machine whose clock is slightly behind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Usage = Literal["server", "client"]

CLOCK_SKEW = dt.timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError("expected an ECDSA private key")
        return key

    @property
    def not_after(self) -> dt.datetime:
        return self.certificate.not_valid_after_utc

    @property
    def not_before(self) -> dt.datetime:
        return self.certificate.not_valid_before_utc


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@contextlib.contextmanager
def _long_names_allowed() -> Iterator[None]:
    """Silence ``cryptography``'s warning about a CN above 64 characters (see :func:`_name`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Attribute's length must be",
                                category=UserWarning)
        yield


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    # RFC 5280 bounds a CN at 64 characters, but Kubernetes user names are longer
    # (system:serviceaccount:kube-system:clusterrole-aggregation-controller), and neither Go
    # nor OpenSSL enforce the bound when verifying: so it is not enforced here either
    with _long_names_allowed():
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name,
                                        _validate=len(common_name) <= 64))
    return x509.Name(attrs)


def new_ca(common_name: str, *, now: dt.datetime,
           validity: dt.timedelta = dt.timedelta(days=3650)) -> KeyPair:
    key = new_key()
    name = _name(common_name)
    public = key.public_key()
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))


def subject_alt_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """The SAN entries of ``hosts``: an IP address (bracketed IPv6 too) as an IP, anything
    else as a DNS name; duplicates once, in order."""
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


_EKU = {"server": ExtendedKeyUsageOID.SERVER_AUTH, "client": ExtendedKeyUsageOID.CLIENT_AUTH}


def issue(ca: KeyPair, *, common_name: str, usage: Usage | Sequence[Usage], now: dt.datetime,
          validity: dt.timedelta = dt.timedelta(days=365), organizations: Sequence[str] = (),
          hosts: Sequence[str] = ()) -> KeyPair:
    """A leaf certificate signed by ``ca`` for ``usage`` (one, or several:
    ``("server", "client")``); ``hosts`` become DNS or IP SANs (servers)."""
    usages = (usage,) if isinstance(usage, str) else tuple(dict.fromkeys(usage))
    if not usages or any(u not in _EKU for u in usages):
        raise ValueError(f"usage must be server, client or both, got {usage!r}")
    ca_cert = ca.certificate
    ca_key = ca.private_key()
    key = new_key()
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(common_name, organizations))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - CLOCK_SKEW).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                            content_commitment=False, data_encipherment=False,
                                            key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([_EKU[u] for u in usages]),
                              critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(subject_alt_names(hosts)),
                                        critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))


def subject_of(cert: x509.Certificate) -> tuple[str, tuple[str, ...]]:
    """(CN, Os) of a certificate's subject: Kubernetes' user name and groups."""
    with _long_names_allowed():
        subject = cert.subject
    cns = subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    cn = cns[0].value if cns else ""
    return (cn if isinstance(cn, str) else cn.decode(),
            tuple(o.value if isinstance(o.value, str) else o.value.decode() for o in orgs))


def san_hosts(cert: x509.Certificate) -> set[str]:
    """The DNS names and IP addresses a certificate is valid for."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    out: set[str] = set(ext.get_values_for_type(x509.DNSName))
    out.update(str(ip) for ip in ext.get_values_for_type(x509.IPAddress))
    return out


def signed_by(cert: KeyPair, ca: KeyPair) -> bool:
    """Was ``cert`` signed by ``ca``'s key?"""
    try:
        cert.certificate.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
