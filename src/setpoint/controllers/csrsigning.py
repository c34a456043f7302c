"""The signer of the built-in signers: approved CertificateSigningRequests get certificates.

An ordinary controller for CertificateSigningRequests (:func:`csr_signing_controller`,
``csrsigning``, acting as ``system:serviceaccount:kube-system:certificate-controller``), as
Kubernetes' csrsigning controller works. It holds the cluster CA (the one published in every
namespace's ``kube-root-ca.crt``) and signs requests of these signers:

==============================================  ==============================================
``kubernetes.io/kube-apiserver-client``         client certificates the API server accepts:
                                                usages ``client auth`` (required),
                                                ``digital signature``, ``key encipherment``
``kubernetes.io/kubelet-serving``               node agents' serving certificates (Kubernetes'
                                                rules): organization exactly
                                                ``system:nodes``, common name
                                                ``system:node:<name>``, a DNS or IP SAN, no
                                                email or URI SANs, usages ``digital
                                                signature``, ``server auth`` and optionally
                                                ``key encipherment``
``setpoint.dev/serving``                        serving certificates for workloads (webhooks):
                                                usages ``server auth`` (required), ``digital
                                                signature``, ``key encipherment``; a DNS or IP
                                                SAN; no email or URI SANs
==============================================  ==============================================

A request is signed when it is Approved, not Failed and has no certificate yet; the
certificate lasts ``spec.expirationSeconds`` (at least 600 s), at most
:attr:`SigningConfig.max_duration`, and never past the CA's own expiry. A request that breaks
its signer's rules gets a ``Failed`` condition (reason ``SignerValidationFailure``, the rule
as message) and no certificate. Requests of any other signer are left alone (pending), as in
Kubernetes: another signer may serve them.

Invariants: a certificate is written once, through ``/status`` with the resourceVersion it
was computed from (a conflict requeues; the server refuses a second certificate anyway);
denied requests are never signed.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors, timeutil
from setpoint.pki import csr as pkicsr
from setpoint.pki.certs import KeyPair

CSR: Final = ("certificates.k8s.io/v1", "CertificateSigningRequest")
KUBE_APISERVER_CLIENT: Final = "kubernetes.io/kube-apiserver-client"
KUBELET_SERVING: Final = "kubernetes.io/kubelet-serving"
SERVING: Final = "setpoint.dev/serving"
#: every signer this controller signs for
SIGNERS: Final = (KUBE_APISERVER_CLIENT, KUBELET_SERVING, SERVING)
FAILURE_REASON: Final = "SignerValidationFailure"
MIN_DURATION: Final = dt.timedelta(seconds=600)
#: the longest certificate issued by default, in seconds (a year, as kube-controller-manager's
#: ``--cluster-signing-duration``)
DEFAULT_SIGNING_DURATION: Final = 365 * 24 * 3600.0

Obj = dict[str, Any]
Now = Callable[[], dt.datetime]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True, slots=True)
class SigningConfig:
    """The signer's bounds (kube-controller-manager's ``--cluster-signing-duration``)."""

    max_duration: dt.timedelta = dt.timedelta(seconds=DEFAULT_SIGNING_DURATION)

    def __post_init__(self) -> None:
        if self.max_duration < MIN_DURATION:
            raise ValueError("max_duration must be at least 600 seconds")


def signing_config(seconds: float) -> SigningConfig:
    """The configuration of ``--cluster-signing-duration SECONDS`` (``ValueError`` below 600
    seconds or not finite)."""
    if not seconds == seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError("--cluster-signing-duration must be a number of seconds")
    if seconds < MIN_DURATION.total_seconds():
        raise ValueError("--cluster-signing-duration must be at least 600 seconds")
    return SigningConfig(max_duration=dt.timedelta(seconds=seconds))


def _client_usages(usages: list[str]) -> str | None:
    has_client_auth = False
    for usage in usages:
        if usage == "client auth":
            has_client_auth = True
        elif usage not in ("digital signature", "key encipherment"):
            return f"invalid usage for client certificate: {usage}"
    return None if has_client_auth else \
        "missing required usage for client certificate: client auth"


_KUBELET_SERVING_USAGES: Final = ({"digital signature", "key encipherment", "server auth"},
                                  {"digital signature", "server auth"})


def _kubelet_serving(request: pkicsr.Request, usages: list[str]) -> str | None:
    if list(request.organizations) != ["system:nodes"]:
        return "subject organization is not system:nodes"
    if not request.dns_names and not request.ip_addresses:
        return "DNS or IP subjectAltName is required"
    if request.emails:
        return "Email subjectAltNames are not allowed"
    if request.uris:
        return "URI subjectAltNames are not allowed"
    if set(usages) not in _KUBELET_SERVING_USAGES or len(set(usages)) != len(usages):
        return ("usages did not match [digital signature key encipherment server auth]")
    if not request.common_name.startswith("system:node:"):
        return "subject common name does not begin with system:node:"
    return None


def _serving(request: pkicsr.Request, usages: list[str]) -> str | None:
    if "server auth" not in usages:
        return "missing required usage for serving certificate: server auth"
    for usage in usages:
        if usage not in ("digital signature", "key encipherment", "server auth"):
            return f"invalid usage for serving certificate: {usage}"
    if not request.dns_names and not request.ip_addresses:
        return "DNS or IP subjectAltName is required"
    if request.emails:
        return "Email subjectAltNames are not allowed"
    if request.uris:
        return "URI subjectAltNames are not allowed"
    return None


def rule_violation(signer: str, request: pkicsr.Request, usages: list[str]) -> str | None:
    """Why ``signer`` refuses ``request`` with ``usages`` (``None``: it signs)."""
    if signer == KUBE_APISERVER_CLIENT:
        return _client_usages(usages)
    if signer == KUBELET_SERVING:
        return _kubelet_serving(request, usages)
    return _serving(request, usages)


def _true(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True"
               for c in conditions)


def duration_of(spec: Mapping[str, Any], config: SigningConfig) -> dt.timedelta:
    """``spec.expirationSeconds`` within [600 s, ``max_duration``]; ``max_duration`` when
    unset."""
    seconds = spec.get("expirationSeconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return config.max_duration
    return max(MIN_DURATION, min(dt.timedelta(seconds=seconds), config.max_duration))


class Signer:
    """The reconcile function (see the module docstring)."""

    def __init__(self, ca: KeyPair, config: SigningConfig, now: Now = _utcnow) -> None:
        self._ca = ca
        self._config = config
        self._now = now

    async def __call__(self, request: runtime.Request, ctx: runtime.Context) -> runtime.Result:
        obj = ctx.get(request)
        if obj is None:
            return runtime.Result.done()
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        signer = spec.get("signerName")
        if signer not in SIGNERS or status.get("certificate") or not _true(obj, "Approved") \
                or _true(obj, "Denied") or _true(obj, "Failed"):
            return runtime.Result.done()
        usages = [u for u in spec.get("usages") or [] if isinstance(u, str)]
        try:
            parsed = pkicsr.parse_request(base64.b64decode(spec.get("request") or ""))
            problem = rule_violation(str(signer), parsed, usages)
        except (pkicsr.CSRError, binascii.Error, ValueError) as e:
            parsed, problem = None, str(e)
        new = dict(obj)
        if problem is not None or parsed is None:
            message = problem or "invalid request"
            now = timeutil.format_time(self._now())
            new["status"] = {**status, "conditions": [
                *(status.get("conditions") or []),
                {"type": "Failed", "status": "True", "reason": FAILURE_REASON,
                 "message": message, "lastUpdateTime": now, "lastTransitionTime": now}]}
            ctx.logger.info("CertificateSigningRequest %s failed: %s", request.name, message)
        else:
            pem = pkicsr.sign(self._ca, parsed, usages=usages, now=self._now(),
                              duration=duration_of(spec, self._config))
            new["status"] = {**status, "certificate": base64.b64encode(pem).decode()}
            ctx.logger.info("signed CertificateSigningRequest %s (%s)", request.name, signer)
        try:
            await ctx.client.update_status(new, resource=CSR)
        except errors.Conflict:
            return runtime.Result(requeue=True)
        except (errors.NotFound, errors.Invalid):
            pass  # gone, or changed meanwhile (denied, signed by another manager)
        return runtime.Result.done()


def csr_signing_controller(ca: KeyPair, config: SigningConfig | None = None, *,
                           now: Now = _utcnow) -> runtime.Controller:
    return runtime.Controller(for_=CSR, reconcile=Signer(ca, config or SigningConfig(), now),
                              name="csrsigning")
