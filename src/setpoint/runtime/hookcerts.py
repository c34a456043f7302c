"""A serving certificate for an operator's hooks, issued by the cluster through a
CertificateSigningRequest.

:func:`cluster_certificate` does what a person would do by hand. First it asks whether
anything in the cluster signs for the serving signer (``setpoint.dev/serving``, which
setpoint's controller manager runs): it lists ClusterTrustBundles with
``fieldSelector=spec.signerName=setpoint.dev/serving`` (``certificates.k8s.io`` ``v1beta1``,
then ``v1alpha1``; Kubernetes' KEP-3257), where a signer publishes the CA its certificates
verify against. None there, the API not served (404) or not readable by this identity (403):
it returns ``None`` at once, with a log line saying why (on a cluster without the signer,
nobody would ever sign). Otherwise it makes a key in memory and a PKCS#10 request for the
hook server's names, creates a CertificateSigningRequest for that signer, approves it when its
own identity may (``approve`` on that signer), otherwise logs the ``kubectl certificate
approve`` command someone who may must run and waits for them, then reads the certificate
the signer writes. The CA bundle the webhook configurations then carry is the signer's
bundles' PEM (every bundle of the signer, in name order), which must verify the certificate.

It returns ``None`` (the caller then makes a CA of its own, and says so) when the cluster
cannot issue one: no bundle for the signer (as above), no CertificateSigningRequest API
(404), an identity that may not create requests (403), a request denied or failed, no
certificate within :attr:`CertificateConfig.timeout` (a signer that publishes its bundle but
does not sign, or nobody approves), or a certificate the signer's bundles do not verify.

Invariants: the private key never leaves memory (it is not in the request, nor written to
the API); the request is deleted once the certificate is read or abandoned (the certificate
is the hook server's alone); waiting is bounded by ``timeout``; nothing is asked of a signer
that has no ClusterTrustBundle.

Non-guarantees: the certificate is not renewed (it lasts ``expiration_seconds``; the hook
server is restarted with the operator), nor is the CA bundle when the signer's bundles
change; polling, not a watch, finds the certificate (one GET per ``poll_interval``).
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
SERVING_SIGNER: Final = "setpoint.dev/serving"
#: the ClusterTrustBundle versions asked, in order (v1beta1 from Kubernetes 1.33)
CTB_VERSIONS: Final = ("certificates.k8s.io/v1beta1", "certificates.k8s.io/v1alpha1")
USAGES: Final = ("digital signature", "server auth")
APPROVAL_REASON: Final = "SetpointHooksApproved"

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class CertificateConfig:
    """Bounds of asking the cluster for a certificate."""

    #: how long to wait for approval and signing (once the signer's ClusterTrustBundle is
    #: found) before falling back to an own CA
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


async def _signer_bundle(client: sp_client.Client, name: str,
                         log: logging.Logger) -> bytes | None:
    """The PEM of the serving signer's ClusterTrustBundles, or ``None`` (logged why)."""
    why = ""
    for version in CTB_VERSIONS:
        try:
            found = await client.list((version, "ClusterTrustBundle"),
                                      field_selector=f"spec.signerName={SERVING_SIGNER}")
        except (errors.NotFound, sp_client.NoMatchError) as e:
            why = f"the cluster serves no ClusterTrustBundles ({e})"
            continue
        except errors.ApiError as e:
            log.warning("%s: cannot list ClusterTrustBundles (%s: %s); the hooks use a CA of "
                        "their own", name, type(e).__name__, e)
            return None
        items = sorted((i for i in found.get("items") or [] if isinstance(i, dict)),
                       key=lambda i: str((i.get("metadata") or {}).get("name") or ""))
        pems = [str((i.get("spec") or {}).get("trustBundle") or "") for i in items]
        pem = "".join(p if p.endswith("\n") else p + "\n" for p in pems if p)
        if pem:
            return pem.encode()
        why = f"no ClusterTrustBundle for signer {SERVING_SIGNER} (nothing signs for it)"
        break
    log.info("%s: %s; the hooks use a CA of their own", name, why)
    return None


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
    bundle = await _signer_bundle(client, name, log)
    if bundle is None:
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
        return await _wait_issued(client, created, key_pem, bundle, config, log)
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
                       bundle: bytes, config: CertificateConfig,
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
    if not _verifies(bundle, cert_pem):
        log.warning("CertificateSigningRequest %s: the ClusterTrustBundles of %s do not "
                    "verify the certificate; the hooks use a CA of their own", request_name,
                    SERVING_SIGNER)
        return None
    log.info("serving certificate issued by the cluster (CertificateSigningRequest %s)",
             request_name)
    return IssuedCertificate(cert_pem, key_pem, bundle, request_name)
