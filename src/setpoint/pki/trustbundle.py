"""The PEM of a ClusterTrustBundle's ``spec.trustBundle``: CA certificates only.

:func:`trust_bundle_errors` reads it as Kubernetes' ``validateTrustBundle`` does: at most
:data:`MAX_TRUST_BUNDLE_BYTES`; PEM blocks one after another (text between them is ignored);
each must be a ``CERTIFICATE`` block without headers whose DER parses as an X.509 certificate
with valid basic constraints and the CA bit set; the same certificate twice is refused; at
least one must be there. :func:`certificates` returns the anchors of a valid bundle.

Invariants: never raises on any input (every problem is a message, in Kubernetes' words, with
the entry's index); the size is checked before anything is decoded.

Non-guarantees: the certificates' validity periods and signatures are not checked (as in
Kubernetes, a bundle may carry an expired or self-signed anchor).
"""

from __future__ import annotations

from typing import Final

from cryptography import x509

from setpoint.pki.csr import CERTIFICATE_BLOCK, pem_blocks

#: the largest ``spec.trustBundle``, in bytes (Kubernetes' ``MaxTrustBundleSize``)
MAX_TRUST_BUNDLE_BYTES: Final = 1024 * 1024


def _ca_problem(der: bytes, index: int) -> str | None:
    try:
        cert = x509.load_der_x509_certificate(der)
        constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return f"entry {index} does not have the CA bit set"
    except Exception:  # cryptography raises its own (Rust) errors on garbage
        return f"entry {index} does not parse as X.509"
    if not constraints.ca:
        return f"entry {index} does not have the CA bit set"
    return None


def trust_bundle_errors(text: str) -> list[str]:
    """What is wrong with ``text`` as a trust bundle (empty: nothing)."""
    if len(text.encode()) > MAX_TRUST_BUNDLE_BYTES:
        return [f"may not be more than {MAX_TRUST_BUNDLE_BYTES} bytes"]
    problems: list[str] = []
    seen: dict[bytes, list[int]] = {}
    for index, (kind, has_headers, der) in enumerate(pem_blocks(text.encode())):
        if kind != CERTIFICATE_BLOCK:
            problems.append(f"entry {index} has bad block type: {kind}")
            continue
        if has_headers:
            problems.append(f"entry {index} has PEM block headers")
            continue
        problem = _ca_problem(der, index)
        if problem is not None:
            problems.append(problem)
            continue
        seen.setdefault(der, []).append(index)
    if not seen and not problems:
        problems.append("at least one trust anchor must be provided")
    for indices in seen.values():
        if len(indices) > 1:
            problems.append(f"duplicate trust anchor (indices [{' '.join(map(str, indices))}])")
    return problems


def certificates(text: str) -> list[x509.Certificate]:
    """The anchors of a bundle :func:`trust_bundle_errors` accepts (others: what parses)."""
    out: list[x509.Certificate] = []
    if len(text.encode()) > MAX_TRUST_BUNDLE_BYTES:
        return out
    for kind, has_headers, der in pem_blocks(text.encode()):
        if kind == CERTIFICATE_BLOCK and not has_headers:
            try:
                out.append(x509.load_der_x509_certificate(der))
            except Exception:
                continue
    return out
