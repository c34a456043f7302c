"""Client TLS towards etcd: three files, read and checked, and what gRPC makes of them.

As Kubernetes' apiserver (``--etcd-cafile``, ``--etcd-certfile``, ``--etcd-keyfile``), a
:class:`ClientTLS` names:

* ``ca_file``: the PEM certificates etcd's serving certificate must chain to. Without it the
  roots gRPC ships with are trusted (public CAs; ``$GRPC_DEFAULT_SSL_ROOTS_FILE_PATH``
  replaces them), which fits an etcd with a publicly signed certificate and nothing else.
* ``cert_file`` and ``key_file``: the client certificate (chain, leaf first) this side
  presents, and its unencrypted private key; both or neither. etcd run with
  ``--client-cert-auth`` refuses a client without one signed by its ``--trusted-ca-file``.

:func:`load` reads the files and checks what gRPC would only find out during a handshake
(or never say clearly): each file exists, is at most :data:`MAX_FILE_BYTES`, holds PEM
certificates (or a PEM key), and the key belongs to the certificate.

Non-guarantees: the files are read when the backend is made (to fail early) and again when
it starts; the channel then keeps what it read for its whole life, reconnections included.
A rotated client certificate is therefore used from the next start of the backend (for
``setpoint serve``, a restart; API servers are stateless, so a rolling restart rotates a
cluster's). Certificate expiry is not checked here: etcd refuses an expired certificate, and
the error then says TLS (:func:`hint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

MAX_FILE_BYTES = 1024 * 1024
"""The largest certificate or key file read (a CA bundle of a few hundred roots fits)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientTLS:
    """Which files; ``None`` for each that is not used. Only the pairing is checked here;
    :func:`load` reads them."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("etcd client certificate and key go together: give both or "
                             "neither")


@dataclass(frozen=True, slots=True)
class Material:
    """The PEM bytes gRPC's ``ssl_channel_credentials`` takes (``None``: not used)."""

    root_certificates: bytes | None
    private_key: bytes | None
    certificate_chain: bytes | None


def load(tls: ClientTLS) -> Material:
    """Read and check ``tls``'s files; ``ValueError`` naming the file that is wrong."""
    roots = None
    if tls.ca_file is not None:
        roots = _read(tls.ca_file, "CA file")
        _certificates(roots, tls.ca_file, "CA file")
    if tls.cert_file is None or tls.key_file is None:
        return Material(roots, None, None)
    chain = _read(tls.cert_file, "client certificate")
    leaf = _certificates(chain, tls.cert_file, "client certificate")[0]
    key = _read(tls.key_file, "client key")
    try:
        private = serialization.load_pem_private_key(key, password=None)
    except TypeError:
        raise ValueError(f"etcd client key {tls.key_file} is encrypted; gRPC needs it "
                         "unencrypted (keep it readable by this user only)") from None
    except (ValueError, UnsupportedAlgorithm) as e:
        raise ValueError(f"etcd client key {tls.key_file} is not a PEM private key: "
                         f"{e}") from None
    if _spki(private.public_key()) != _spki(leaf.public_key()):
        raise ValueError(f"etcd client key {tls.key_file} does not belong to the "
                         f"certificate in {tls.cert_file}")
    return Material(roots, key, chain)


def _read(path: Path, what: str) -> bytes:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ValueError(f"etcd {what} {path}: {e.strerror or e}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"etcd {what} {path} is larger than {MAX_FILE_BYTES} bytes")
    return data


def _certificates(data: bytes, path: Path, what: str) -> list[x509.Certificate]:
    try:
        found = x509.load_pem_x509_certificates(data)
    except ValueError:
        found = []
    if not found:
        raise ValueError(f"etcd {what} {path} holds no PEM certificate")
    return found


def _spki(key: object) -> bytes:
    public_bytes = getattr(key, "public_bytes", None)
    if public_bytes is None:  # pragma: no cover - every key type cryptography loads has it
        raise ValueError("unsupported key type")
    data: bytes = public_bytes(serialization.Encoding.DER,
                               serialization.PublicFormat.SubjectPublicKeyInfo)
    return data


_HINTS = (
    ("Hostname Verification", "etcd's certificate is not valid for the endpoint's host "
     "(with several endpoints, every member's certificate must be valid for the first "
     "one's host)"),
    ("CERTIFICATE_VERIFY_FAILED", "etcd's certificate is not trusted (not signed by the CA "
     "file, or expired)"),
    ("WRONG_VERSION_NUMBER", "the endpoint does not speak TLS (an http:// member?)"),
    ("TSI_DATA_CORRUPTED", "etcd refused this client's certificate (none, expired, or not "
     "signed by a CA etcd trusts)"),
    ("CERTIFICATE_REQUIRED", "etcd requires a client certificate and got none"),
    ("BAD_CERTIFICATE", "etcd refused this client's certificate (expired, or not signed by "
     "a CA etcd trusts)"),
    ("handshake failed", "the TLS handshake with etcd failed"),
    ("TSI_", "the TLS connection to etcd failed"),
)
"""gRPC's words for a TLS failure (in its status details), first match wins, and what they
mean for an operator. gRPC reports a refused client certificate as a failed decryption
("Unwrap failed (TSI_DATA_CORRUPTED)"): in TLS 1.3 the refusal arrives after the handshake."""


def hint(details: str) -> str | None:
    """What a gRPC failure's ``details`` say about TLS, for a person; ``None``: nothing."""
    lowered = details.lower()
    for marker, meaning in _HINTS:
        if marker.lower() in lowered:
            return meaning
    return None
