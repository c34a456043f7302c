"""Who may approve a CertificateSigningRequest, and who may issue its certificate.

Kubernetes' ``CertificateApproval`` and ``CertificateSigning`` admission plugins: besides
``update`` on ``certificatesigningrequests/approval``, a write through ``/approval`` needs
verb ``approve`` on resource ``signers`` of group ``certificates.k8s.io`` with the request's
``signerName`` as resource name, or ``<domain>/*`` (``example.com/*`` covers every signer of
``example.com``); a write through ``/status`` that changes ``status.certificate`` needs verb
``sign`` likewise. Otherwise 403 with Kubernetes' message: ``certificatesigningrequests
.certificates.k8s.io "<name>" is forbidden: user not permitted to approve requests with
signerName "<signer>"``.

Kubernetes' ``ClusterTrustBundleAttest``: creating a ClusterTrustBundle with a
``spec.signerName``, or any update of one but a change of its owner references or finalizers
only (garbage collection, storage migration), needs verb ``attest`` on that signer likewise;
otherwise 403: ``clustertrustbundles.certificates.k8s.io "<name>" is forbidden: user not
permitted to attest for signerName "<signer>"``.

Invariants: the server's own writes (no user) are not checked; the signer name checked for
approval and signing is the stored one (the spec cannot change on these paths), for attest
the new one (validation refuses a changed signer anyway).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from setpoint.apimachinery import errors
from setpoint.auth.attributes import Attributes
from setpoint.auth.rbac.authorizer import Authorizer
from setpoint.auth.user import UserInfo
from setpoint.registry import certificates, clustertrustbundles
from setpoint.registry.options import AdmissionAttributes

Obj = dict[str, Any]
Admission = Callable[[Any, Any, AdmissionAttributes], Awaitable[None]]

SIGNERS: Final = "signers"


def authorized_for_signer(authorizer: Authorizer, user: UserInfo, verb: str,
                          signer: str) -> bool:
    """Kubernetes' ``IsAuthorizedForSignerName``: the exact signer, then ``<domain>/*``."""
    names = [signer]
    if "/" in signer:
        names.append(signer.split("/", 1)[0] + "/*")
    for name in names:
        attrs = Attributes(user=user, verb=verb, resource_request=True,
                           api_group=certificates.GROUP, api_version="*", resource=SIGNERS,
                           name=name)
        if authorizer.authorize(attrs).allowed:
            return True
    return False


def _forbidden(name: str, what: str, signer: str) -> errors.Forbidden:
    return errors.Forbidden(
        f'{certificates.RESOURCE}.{certificates.GROUP} "{name}" is forbidden: user not '
        f'permitted to {what} requests with signerName "{signer}"',
        details={"name": name, "group": certificates.GROUP, "kind": certificates.RESOURCE})


def admission(authorizer: Authorizer) -> Admission:
    """The admission hook of the CertificateSigningRequest store."""

    async def admit(new: Any, old: Any, attrs: AdmissionAttributes) -> None:
        if attrs.user is None or attrs.operation != "UPDATE" or not isinstance(old, dict):
            return
        signer = str((old.get("spec") or {}).get("signerName") or "")
        if attrs.subresource == certificates.APPROVAL:
            if not authorized_for_signer(authorizer, attrs.user, "approve", signer):
                raise _forbidden(attrs.name, "approve", signer)
        elif attrs.subresource == "status" and isinstance(new, dict):
            before = (old.get("status") or {}).get("certificate") or ""
            after = (new.get("status") or {}).get("certificate") or ""
            if before != after and not authorized_for_signer(authorizer, attrs.user, "sign",
                                                             signer):
                raise _forbidden(attrs.name, "sign", signer)

    return admit


#: metadata a garbage collector or a storage migration writes (Kubernetes'
#: ``IsOnlyMutatingGCFields``), and what the server itself sets on every write
_GC_FIELDS: Final = ("ownerReferences", "finalizers", "selfLink", "managedFields",
                     "resourceVersion", "generation")


def only_gc_fields_change(new: Obj, old: Obj) -> bool:
    """Whether ``new`` differs from ``old`` in nothing but :data:`_GC_FIELDS`."""
    def stripped(obj: Obj) -> Obj:
        meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _GC_FIELDS}
        return {**obj, "metadata": meta}
    return stripped(new) == stripped(old)


def attest_admission(authorizer: Authorizer) -> Admission:
    """The admission hook of the ClusterTrustBundle store."""

    async def admit(new: Any, old: Any, attrs: AdmissionAttributes) -> None:
        if attrs.user is None or not isinstance(new, dict):
            return
        if attrs.operation not in ("CREATE", "UPDATE"):
            return
        if attrs.operation == "UPDATE" and isinstance(old, dict) and \
                only_gc_fields_change(new, old):
            return
        signer = (new.get("spec") or {}).get("signerName")
        if not isinstance(signer, str) or not signer:
            return
        if not authorized_for_signer(authorizer, attrs.user, "attest", signer):
            raise errors.Forbidden(
                f'{clustertrustbundles.RESOURCE}.{certificates.GROUP} "{attrs.name}" is '
                f'forbidden: user not permitted to attest for signerName "{signer}"',
                details={"name": attrs.name, "group": certificates.GROUP,
                         "kind": clustertrustbundles.RESOURCE})

    return admit
