"""PKCS#10 certificate signing requests: reading them, making them, and signing them.

:func:`parse_request` reads the PEM of a CertificateSigningRequest's ``spec.request`` as
kube-apiserver does (the first PEM block must be a ``CERTIFICATE REQUEST`` whose signature
verifies) and :func:`certificate_errors` the PEM of its ``status.certificate`` (only
``CERTIFICATE`` blocks without headers, each a certificate). :func:`new_request` makes a
request with a fresh key (the runtime's serving certificate); :func:`sign` issues a
certificate for a request's public key and subject, signed by a CA.

Invariants: every parser here raises :class:`CSRError` (never anything else) on any input,
and refuses PEM longer than :data:`MAX_REQUEST_BYTES` before decoding it; :func:`sign`
never issues a CA certificate, and never one that outlives its CA.

Non-guarantees: only the key types ``cryptography`` loads are accepted (RSA, ECDSA, Ed25519,
Ed448); the request's own extensions other than subjectAltName are not copied (the usages
come from the CertificateSigningRequest, as Kubernetes' signers take them).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from setpoint.pki import certs
from setpoint.pki.certs import KeyPair

#: the largest ``spec.request`` (or ``status.certificate``) PEM read, in bytes
MAX_REQUEST_BYTES: Final = 64 * 1024
#: at most this many blocks in a ``status.certificate`` chain
MAX_CERTIFICATE_BLOCKS: Final = 16
#: certificates are backdated by this much (Kubernetes' signer backdates by five minutes)
BACKDATE: Final = dt.timedelta(minutes=5)

REQUEST_BLOCK: Final = "CERTIFICATE REQUEST"
CERTIFICATE_BLOCK: Final = "CERTIFICATE"


class CSRError(ValueError):
    """What is wrong with a request or a certificate, in Kubernetes' words."""


@dataclass(frozen=True, slots=True)
class Request:
    """A parsed, verified certificate signing request."""

    csr: x509.CertificateSigningRequest

    @property
    def common_name(self) -> str:
        names = _attribute_strings(self.csr.subject, NameOID.COMMON_NAME)
        return names[0] if names else ""

    @property
    def organizations(self) -> tuple[str, ...]:
        return tuple(_attribute_strings(self.csr.subject, NameOID.ORGANIZATION_NAME))

    def _sans(self) -> x509.SubjectAlternativeName | None:
        try:
            ext = self.csr.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except (x509.ExtensionNotFound, ValueError):
            return None
        return ext.value

    @property
    def dns_names(self) -> tuple[str, ...]:
        sans = self._sans()
        return tuple(sans.get_values_for_type(x509.DNSName)) if sans else ()

    @property
    def ip_addresses(self) -> tuple[str, ...]:
        sans = self._sans()
        return tuple(str(ip) for ip in sans.get_values_for_type(x509.IPAddress)) if sans \
            else ()

    @property
    def emails(self) -> tuple[str, ...]:
        sans = self._sans()
        return tuple(sans.get_values_for_type(x509.RFC822Name)) if sans else ()

    @property
    def uris(self) -> tuple[str, ...]:
        sans = self._sans()
        return tuple(sans.get_values_for_type(x509.UniformResourceIdentifier)) if sans \
            else ()


def _attribute_strings(name: x509.Name, oid: x509.ObjectIdentifier) -> list[str]:
    out: list[str] = []
    for attr in name.get_attributes_for_oid(oid):
        value = attr.value
        out.append(value if isinstance(value, str) else value.decode(errors="replace"))
    return out


def _pem_blocks(data: bytes) -> list[tuple[str, bool, bytes]]:
    """The PEM blocks of ``data`` as (type, has headers, DER), as Go's ``pem.Decode`` finds
    them one after another; text between blocks is skipped, an unterminated block ends the
    list."""
    blocks: list[tuple[str, bool, bytes]] = []
    rest = data
    while True:
        start = rest.find(b"-----BEGIN ")
        if start < 0:
            return blocks
        line_end = rest.find(b"\n", start)
        header = rest[start:line_end if line_end >= 0 else len(rest)].rstrip(b"\r")
        if line_end < 0 or not header.endswith(b"-----") or len(header) <= 16:
            rest = rest[start + 11:]
            continue
        kind = header[11:-5]
        end_marker = b"-----END " + kind + b"-----"
        end = rest.find(end_marker, line_end)
        if end < 0:
            rest = rest[start + 11:]
            continue
        body = rest[line_end + 1:end]
        has_headers = b":" in body
        lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
        if has_headers:
            # headers end at the first empty line; the base64 follows it
            parts = body.split(b"\n\n", 1)
            lines = [ln.strip() for ln in (parts[1] if len(parts) == 2 else b"").splitlines()
                     if ln.strip()]
        try:
            der = base64.b64decode(b"".join(lines), validate=True)
        except (binascii.Error, ValueError):
            rest = rest[start + 11:]
            continue
        blocks.append((kind.decode("ascii", "replace"), has_headers, der))
        rest = rest[end + len(end_marker):]


#: the PEM block reader other parsers of PEM fields share
pem_blocks = _pem_blocks


def _bounded(data: bytes) -> bytes:
    if len(data) > MAX_REQUEST_BYTES:
        raise CSRError(f"must be at most {MAX_REQUEST_BYTES} bytes")
    return data


def parse_request(pem: bytes) -> Request:
    """The request in ``pem`` with its signature checked, or :class:`CSRError` with
    Kubernetes' message."""
    blocks = _pem_blocks(_bounded(pem))
    if not blocks or blocks[0][0] != REQUEST_BLOCK:
        raise CSRError("PEM block type must be CERTIFICATE REQUEST")
    try:
        request = x509.load_der_x509_csr(blocks[0][2])
        valid = request.is_signature_valid
    except (ValueError, TypeError, x509.UnsupportedGeneralNameType) as e:
        raise CSRError(f"x509: malformed certificate request: {e}") from e
    except Exception as e:  # cryptography raises its own (Rust) errors on garbage
        raise CSRError(f"x509: malformed certificate request: {type(e).__name__}") from e
    if not valid:
        raise CSRError("x509: ECDSA verification failure"
                       if isinstance(_public_key(request), ec.EllipticCurvePublicKey)
                       else "crypto/rsa: verification error")
    return Request(request)


def _public_key(request: x509.CertificateSigningRequest) -> object:
    try:
        return request.public_key()
    except Exception:
        return None


def certificate_errors(pem: bytes) -> str | None:
    """Why ``pem`` is not a valid ``status.certificate`` (``None``: it is, or it is empty)."""
    if not pem:
        return None
    if len(pem) > MAX_REQUEST_BYTES:
        return f"must be at most {MAX_REQUEST_BYTES} bytes"
    blocks = _pem_blocks(pem)
    if not blocks:
        return "must contain at least one CERTIFICATE PEM block"
    if len(blocks) > MAX_CERTIFICATE_BLOCKS:
        return f"must contain at most {MAX_CERTIFICATE_BLOCKS} CERTIFICATE PEM blocks"
    for kind, has_headers, der in blocks:
        if kind != CERTIFICATE_BLOCK:
            return f'only CERTIFICATE PEM blocks are allowed, found "{kind}"'
        if has_headers:
            return "no PEM block headers are permitted"
        try:
            x509.load_der_x509_certificate(der)
        except Exception as e:
            return f"x509: malformed certificate: {type(e).__name__}"
    return None


def new_request(common_name: str, hosts: Sequence[str] = (),
                organizations: Sequence[str] = ()) -> tuple[bytes, bytes]:
    """A request for ``common_name`` with DNS/IP SANs of ``hosts``, and its new private key:
    (request PEM, key PEM)."""
    key = certs.new_key()
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(subject))
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(certs.subject_alt_names(hosts)),
                                        critical=False)
    request = builder.sign(key, hashes.SHA256())
    return request.public_bytes(serialization.Encoding.PEM), certs.key_pem(key)


#: Kubernetes' key usages that become X.509 KeyUsage bits
_KEY_USAGE_BITS: Final = {
    "digital signature": "digital_signature", "signing": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment",
}
#: and those that become extended key usages
_EXTENDED: Final = {
    "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
    "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
    "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
}


def sign(ca: KeyPair, request: Request, *, usages: Sequence[str], now: dt.datetime,
         duration: dt.timedelta) -> bytes:
    """A certificate (PEM) for ``request``'s public key, subject and subjectAltNames, with
    ``usages`` (Kubernetes' names), valid from :data:`BACKDATE` before ``now`` for
    ``duration`` but never past the CA's own expiry."""
    public = request.csr.public_key()
    if not isinstance(public, rsa.RSAPublicKey | ec.EllipticCurvePublicKey
                      | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        raise CSRError("unsupported public key type")
    ca_cert = ca.certificate
    ca_key = ca.private_key()
    bits = {_KEY_USAGE_BITS[u] for u in usages if u in _KEY_USAGE_BITS}
    extended = list(dict.fromkeys(_EXTENDED[u] for u in usages if u in _EXTENDED))
    not_after = min(now + duration, ca_cert.not_valid_after_utc)
    builder = (x509.CertificateBuilder()
               .subject_name(request.csr.subject).issuer_name(ca_cert.subject)
               .public_key(public).serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if bits:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature="digital_signature" in bits,
            content_commitment="content_commitment" in bits,
            key_encipherment="key_encipherment" in bits,
            data_encipherment="data_encipherment" in bits,
            key_agreement="key_agreement" in bits, key_cert_sign=False,
            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    names: list[x509.GeneralName] = [x509.DNSName(d) for d in request.dns_names]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in request.ip_addresses]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return cert.public_bytes(serialization.Encoding.PEM)
