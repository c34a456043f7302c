"""A serving certificate for an operator's hooks, issued by the cluster through a
CertificateSigningRequest.

:func:`cluster_certificate` does what a person would do by hand: it makes a key in memory and
a PKCS#10 request for the hook server's names, creates a CertificateSigningRequest for the
serving signer (``setpoint.dev/serving``, which setpoint's controller manager runs), approves
it when its own identity may (``approve`` on that signer), otherwise logs the ``kubectl
certificate approve`` command someone who may must run and waits for them, then reads the
certificate the signer writes. The CA bundle the webhook configurations then carry is the
cluster CA: the ``ca.crt`` of ``kube-root-ca.crt`` in the client's namespace, or the CA the
client itself trusts, whichever verifies the issued certificate.

It returns ``None`` (the caller then makes a CA of its own, and says so) when the cluster
cannot issue one: no cluster CA the client can read (a server without TLS), no
CertificateSigningRequest API (404), an identity that may not create requests (403), a
request denied or failed, no certificate within :attr:`CertificateConfig.timeout` (a real
cluster without the serving signer leaves the request pending for ever), or a certificate
no CA the client can read verifies.

Invariants: the private key never leaves memory (it is not in the request, nor written to
the API); the request is deleted once the certificate is read or abandoned (the certificate
is the hook server's alone); waiting is bounded by ``timeout``.

Non-guarantees: the certificate is not renewed (it lasts ``expiration_seconds``; the hook
server is restarted with the operator); polling, not a watch, finds the certificate (one
GET per ``poll_interval``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from dataclasses import dataclass
from typing import Any, Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from setpoint import client as sp_client
from setpoint.apimachinery import errors
from setpoint.pki import csr as pkicsr

CSR: Final = ("certificates.k8s.io/v1", "CertificateSigningRequest")
CONFIG_MAP: Final = ("v1", "ConfigMap")
SERVING_SIGNER: Final = "setpoint.dev/serving"
ROOT_CA: Final = "kube-root-ca.crt"
USAGES: Final = ("digital signature", "server auth")
APPROVAL_REASON: Final = "SetpointHooksApproved"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CertificateConfig:
    """Bounds of asking the cluster for a certificate."""

    #: how long to wait for approval and signing before falling back to an own CA
    timeout: float = 30.0
    #: how often the request is read while waiting
    poll_interval: float = 0.2
    #: the certificate's requested lifetime (``spec.expirationSeconds``)
    expiration_seconds: int = 365 * 24 * 3600

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ValueError("timeout must be positive")
        if not 0 < self.poll_interval <= self.timeout:
            raise ValueError("poll_interval must be positive and at most timeout")
        if self.expiration_seconds < 600:
            raise ValueError("expiration_seconds must be at least 600")


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    """A serving certificate and its key (PEM), and the CA (PEM) that verifies it."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes
    #: the CertificateSigningRequest it came from
    request_name: str


def _condition(obj: Obj, kind: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == kind and cond.get("status") == "True":
            return cond
    return None


def _verifies(ca_pem: bytes, cert_pem: bytes) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        for ca in x509.load_pem_x509_certificates(ca_pem):
            try:
                cert.verify_directly_issued_by(ca)
                return True
            except (ValueError, TypeError, InvalidSignature):
                continue
    except ValueError:
        return False
    return False


async def _cluster_cas(client: sp_client.Client) -> list[bytes]:
    """The cluster CAs this client can read: ``kube-root-ca.crt``, then the client's own."""
    candidates: list[bytes] = []
    try:
        root = await client.get(CONFIG_MAP, ROOT_CA, namespace=client.config.namespace)
        ca = (root.get("data") or {}).get("ca.crt")
        if isinstance(ca, str):
            candidates.append(ca.encode())
    except errors.ApiError:
        pass
    if client.config.ca_data:
        candidates.append(client.config.ca_data)
    return candidates


async def _approve(client: sp_client.Client, obj: Obj, log: logging.Logger) -> bool:
    """Approve ``obj`` if this identity may; False when it may not."""
    approved = dict(obj)
    approved["status"] = {"conditions": [{
        "type": "Approved", "status": "True", "reason": APPROVAL_REASON,
        "message": "approved by the operator that serves these hooks"}]}
    try:
        await client.update(approved, resource=CSR, subresource="approval")
    except errors.Forbidden:
        return False
    return True


async def cluster_certificate(client: sp_client.Client, *, name: str, hosts: tuple[str, ...],
                              config: CertificateConfig,
                              log: logging.Logger) -> IssuedCertificate | None:
    """A certificate for ``hosts`` issued by the cluster (see the module doc), or ``None``."""
    cas = await _cluster_cas(client)
    if not cas:
        log.info("%s: no cluster CA to verify a certificate the cluster issues (a server "
                 "without TLS?); the hooks use a CA of their own", name)
        return None
    request_pem, key_pem = pkicsr.new_request(name, hosts)
    body = {"apiVersion": CSR[0], "kind": CSR[1],
            "metadata": {"generateName": f"{name}-",
                         "labels": {"app.kubernetes.io/managed-by": "setpoint"}},
            "spec": {"request": base64.b64encode(request_pem).decode(),
                     "signerName": SERVING_SIGNER, "usages": list(USAGES),
                     "expirationSeconds": config.expiration_seconds}}
    try:
        created = await client.create(body)
    except errors.ApiError as e:
        log.warning("%s: the cluster cannot issue a serving certificate (%s: %s); the hooks "
                    "use a CA of their own", name, type(e).__name__, e)
        return None
    request_name = str(created["metadata"]["name"])
    try:
        return await _wait_issued(client, created, key_pem, cas, config, log)
    except errors.ApiError as e:
        log.warning("CertificateSigningRequest %s: %s: %s; the hooks use a CA of their own",
                    request_name, type(e).__name__, e)
        return None
    finally:
        try:
            await client.delete(CSR, request_name)
        except errors.ApiError as e:
            log.debug("%s: deleting CertificateSigningRequest %s: %s", name, request_name, e)


async def _wait_issued(client: sp_client.Client, created: Obj, key_pem: bytes,
                       cas: list[bytes], config: CertificateConfig,
                       log: logging.Logger) -> IssuedCertificate | None:
    request_name = str(created["metadata"]["name"])
    if not await _approve(client, created, log):
        log.warning("CertificateSigningRequest %s waits for approval (up to %gs): this "
                    "identity may not approve requests for %s; run: kubectl certificate "
                    "approve %s", request_name, config.timeout, SERVING_SIGNER, request_name)
    current = created
    try:
        async with asyncio.timeout(config.timeout):
            while True:
                current = await client.get(CSR, request_name)
                for kind in ("Denied", "Failed"):
                    cond = _condition(current, kind)
                    if cond is not None:
                        log.warning("CertificateSigningRequest %s was %s (%s); the hooks use "
                                    "a CA of their own", request_name, kind.lower(),
                                    cond.get("message") or cond.get("reason") or "")
                        return None
                encoded = (current.get("status") or {}).get("certificate")
                if encoded:
                    break
                await asyncio.sleep(config.poll_interval)
    except TimeoutError:
        approved = _condition(current, "Approved") is not None
        log.warning("CertificateSigningRequest %s was not %s within %gs; the hooks use a CA "
                    "of their own", request_name, "signed" if approved else "approved",
                    config.timeout)
        return None
    try:
        cert_pem = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        log.warning("CertificateSigningRequest %s: the certificate is not base64; the hooks "
                    "use a CA of their own", request_name)
        return None
    ca_pem = next((ca for ca in cas if _verifies(ca, cert_pem)), None)
    if ca_pem is None:
        log.warning("CertificateSigningRequest %s: no cluster CA this client can read "
                    "verifies the certificate; the hooks use a CA of their own", request_name)
        return None
    log.info("serving certificate issued by the cluster (CertificateSigningRequest %s)",
             request_name)
    return IssuedCertificate(cert_pem, key_pem, ca_pem, request_name)
