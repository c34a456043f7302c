"""certificates.k8s.io/v1 CertificateSigningRequest: validation, the three write paths, columns.

A CertificateSigningRequest (cluster-scoped, short name ``csr``) asks a *signer* for a
certificate. Its write paths are Kubernetes':

* **Create**: the server records who asks: ``spec.username``, ``uid``, ``groups`` and
  ``extra`` come from the requesting user, never from the body; the status is cleared (no
  request is created approved).
* **Update of the object**: only metadata changes; spec and status are kept as stored (the
  spec is immutable).
* **/approval**: only ``status.conditions`` change; Approved and Denied may be added here and
  nowhere else (who may add them is :mod:`setpoint.registry.signerauthz`).
* **/status**: conditions other than Approved/Denied (Failed) and ``status.certificate``,
  which is set once and never changed.

**Validation** (Kubernetes' ``ValidateCertificateSigningRequest``): ``spec.request`` is a PEM
``CERTIFICATE REQUEST`` whose signature verifies (at most
:data:`~setpoint.pki.csr.MAX_REQUEST_BYTES`); ``signerName`` is required and of the form
``example.com/name``; ``expirationSeconds`` is at least 600; ``usages`` are non-empty, known
and unique; conditions have a type and a status (``True`` only for Approved, Denied and
Failed), no type twice, not both Approved and Denied; Approved, Denied and Failed conditions
are never removed; ``status.certificate`` holds only ``CERTIFICATE`` PEM blocks, only once
the request is Approved.

Columns: NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION, as kubectl prints them.

Non-guarantees: the legacy ``kubernetes.io/legacy-unknown`` signer is refused (as in v1);
condition timestamps are the server's clock when the write is prepared.
"""

from __future__ import annotations

import base64
import binascii
import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from setpoint.apimachinery import fields, timeutil, validation
from setpoint.apimachinery.fields import ErrorType, FieldError, FieldPath
from setpoint.auth.user import UserInfo
from setpoint.pki import csr as pkicsr
from setpoint.registry import table
from setpoint.registry.resources import ResourceInfo, SubresourceInfo, VersionInfo
from setpoint.registry.typedstrategy import TypedStrategy

Obj = dict[str, Any]

GROUP: Final = "certificates.k8s.io"
RESOURCE: Final = "certificatesigningrequests"
APPROVAL: Final = "approval"
APPROVED: Final = "Approved"
DENIED: Final = "Denied"
FAILED: Final = "Failed"
LEGACY_UNKNOWN_SIGNER: Final = "kubernetes.io/legacy-unknown"
MIN_EXPIRATION_SECONDS: Final = 600
#: a signer name's domain part (a DNS subdomain) plus ``/`` plus its path part
MAX_SIGNER_NAME: Final = 571
KEY_USAGES: Final = (
    "any", "cert sign", "client auth", "code signing", "content commitment", "crl sign",
    "data encipherment", "decipher only", "digital signature", "email protection",
    "encipher only", "ipsec end system", "ipsec tunnel", "ipsec user", "key agreement",
    "key encipherment", "microsoft sgc", "netscape sgc", "ocsp signing", "s/mime",
    "server auth", "signing", "timestamping")
CONDITION_STATUSES: Final = ("False", "True", "Unknown")
#: condition types whose status may only be True
TRUE_ONLY: Final = (APPROVED, DENIED, FAILED)

SPEC: Final = FieldPath.root("spec")
CONDITIONS: Final = FieldPath.root("status").child("conditions")
CERTIFICATE: Final = FieldPath.root("status").child("certificate")

Now = Callable[[], datetime]


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def pem_of(value: Any) -> bytes:
    """The bytes of a base64 ``[]byte`` field (empty when absent or not base64: decoding has
    refused such a body already)."""
    if not isinstance(value, str) or not value:
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def conditions_of(obj: Obj, kind: str) -> list[Obj]:
    return [c for c in _list(_dict(obj.get("status")).get("conditions"))
            if isinstance(c, dict) and c.get("type") == kind]


def has_condition(obj: Obj, kind: str) -> bool:
    return any(c.get("status") == "True" for c in conditions_of(obj, kind))


def validate_signer_name(name: Any, path: FieldPath) -> list[FieldError]:
    """Kubernetes' ``ValidateSignerName``: ``<DNS subdomain with a dot>/<path>``."""
    if not isinstance(name, str) or not name:
        return [fields.required(path)]
    segments = name.split("/")
    if len(segments) != 2:
        return [fields.invalid(path, name, "must be a fully qualified domain and path of the "
                                           "form 'example.com/signer-name'")]
    domain, rest = segments
    errs: list[FieldError] = []
    if len(domain) > validation.DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(fields.too_long(path, validation.DNS1123_SUBDOMAIN_MAX_LENGTH))
    labels = domain.split(".")
    for label in labels:
        problems = validation.is_dns1123_label(label)
        if problems:
            errs.extend(fields.invalid(path, domain, f'validating label "{label}": {p}')
                        for p in problems)
            break
    if len(labels) < 2:
        errs.append(fields.invalid(path, domain, "should be a domain with at least two "
                                                 "segments separated by dots"))
    for component in rest.split("."):
        errs.extend(fields.invalid(path, rest, f'validating component "{component}": {p}')
                    for p in validation.is_dns1123_subdomain(component))
    if len(name) > MAX_SIGNER_NAME:
        errs.append(fields.too_long(path, MAX_SIGNER_NAME))
    return errs


def validate_spec(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    request = pem_of(spec.get("request"))
    try:
        pkicsr.parse_request(request)
    except pkicsr.CSRError as e:
        errs.append(FieldError(ErrorType.INVALID, str(SPEC.child("request")), str(e)))
    usages = _list(spec.get("usages"))
    if not usages:
        errs.append(fields.required(SPEC.child("usages")))
    seen: set[str] = set()
    for i, usage in enumerate(usages):
        where = SPEC.child("usages").index(i)
        if usage not in KEY_USAGES:
            errs.append(fields.not_supported(where, usage, KEY_USAGES))
        elif usage in seen:
            errs.append(fields.duplicate(where, usage))
        seen.add(str(usage))
    signer = spec.get("signerName")
    if signer == LEGACY_UNKNOWN_SIGNER:
        errs.append(fields.invalid(SPEC.child("signerName"), signer,
                                   "the legacy signerName is not allowed via this API "
                                   "version"))
    else:
        errs += validate_signer_name(signer, SPEC.child("signerName"))
    expiration = spec.get("expirationSeconds")
    if isinstance(expiration, int) and expiration < MIN_EXPIRATION_SECONDS:
        errs.append(fields.invalid(SPEC.child("expirationSeconds"), expiration,
                                   "may not specify a duration less than 600 seconds "
                                   "(10 minutes)"))
    return errs


def validate_conditions(obj: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    approved = denied = False
    for i, raw in enumerate(_list(_dict(obj.get("status")).get("conditions"))):
        cond, where = _dict(raw), CONDITIONS.index(i)
        kind = cond.get("type")
        if not kind:
            errs.append(fields.required(where.child("type")))
        status = cond.get("status")
        allowed = ("True",) if kind in TRUE_ONLY else CONDITION_STATUSES
        if not status:
            errs.append(fields.required(where.child("status")))
        elif status not in allowed:
            errs.append(fields.not_supported(where.child("status"), status, allowed))
        if kind == APPROVED:
            approved = True
            if denied:
                errs.append(fields.invalid(where.child("type"), kind, "Approved and Denied "
                                           "conditions are mutually exclusive"))
        elif kind == DENIED:
            denied = True
            if approved:
                errs.append(fields.invalid(where.child("type"), kind, "Approved and Denied "
                                           "conditions are mutually exclusive"))
        if isinstance(kind, str) and kind:
            if kind in seen:
                errs.append(fields.duplicate(where.child("type"), kind))
            seen.add(kind)
    return errs


def validate_csr(obj: Obj) -> list[FieldError]:
    errs = validate_spec(_dict(obj.get("spec")))
    errs += validate_conditions(obj)
    problem = pkicsr.certificate_errors(pem_of(_dict(obj.get("status")).get("certificate")))
    if problem is not None:
        errs.append(fields.invalid(CERTIFICATE, "<certificate data>", problem))
    return errs


def validate_transition(new: Obj, old: Obj, subresource: str) -> list[FieldError]:
    """What an update through ``subresource`` may not do to the conditions and certificate."""
    errs: list[FieldError] = []
    for kind in (APPROVED, DENIED, FAILED):
        if len(conditions_of(new, kind)) < len(conditions_of(old, kind)):
            errs.append(fields.forbidden(CONDITIONS, f'updates may not remove a condition of '
                                                     f'type "{kind}"'))
    if subresource != APPROVAL:
        for kind in (APPROVED, DENIED):
            before, after = conditions_of(old, kind), conditions_of(new, kind)
            if len(after) > len(before):
                errs.append(fields.forbidden(CONDITIONS, f'updates may not add a condition '
                                                         f'of type "{kind}"'))
            elif len(after) == len(before) and after != before:
                errs.append(fields.forbidden(CONDITIONS, f'updates may not modify a '
                                                         f'condition of type "{kind}"'))
    new_cert = _dict(new.get("status")).get("certificate") or ""
    old_cert = _dict(old.get("status")).get("certificate") or ""
    if new_cert != old_cert:
        if subresource != "status":
            errs.append(fields.forbidden(CERTIFICATE, "updates may not set certificate "
                                                      "content"))
        elif old_cert:
            errs.append(fields.forbidden(CERTIFICATE, "updates may not modify existing "
                                                      "certificate content"))
        elif not has_condition(new, APPROVED):
            errs.append(fields.forbidden(CERTIFICATE, "certificate may only be set on an "
                                                      "approved request"))
    return errs


def _stamp_conditions(new: Obj, old: Obj, now: str) -> None:
    """Kubernetes' ``populateConditionTimestamps``: a condition without ``lastUpdateTime``
    gets now; without ``lastTransitionTime`` the old one of the same type and status, or
    now."""
    old_by_type = {c.get("type"): c for c in _list(_dict(old.get("status")).get("conditions"))
                   if isinstance(c, dict)}
    for cond in _list(_dict(new.get("status")).get("conditions")):
        if not isinstance(cond, dict):
            continue
        cond.setdefault("lastUpdateTime", now)
        if not cond.get("lastTransitionTime"):
            before = old_by_type.get(cond.get("type"))
            if before is not None and before.get("status") == cond.get("status") \
                    and before.get("lastTransitionTime"):
                cond["lastTransitionTime"] = before["lastTransitionTime"]
            else:
                cond["lastTransitionTime"] = now


def _keep_instances(new: Obj, old: Obj, kind: str) -> None:
    """Kubernetes' ``preserveConditionInstances``: through /status, the Approved and Denied
    conditions stay as stored (when their number is unchanged; validation refuses the
    rest)."""
    new_list = _list(_dict(new.get("status")).get("conditions"))
    new_at = [i for i, c in enumerate(new_list) if isinstance(c, dict) and c.get("type") == kind]
    old_ones = conditions_of(old, kind)
    if len(new_at) == len(old_ones):
        for i, cond in zip(new_at, old_ones, strict=True):
            new_list[i] = copy.deepcopy(cond)


def condition_cell(obj: Obj) -> str:
    """kubectl's CONDITION: Denied, Approved or Pending, then ``,Failed`` and ``,Issued``."""
    kinds = {c.get("type") for c in _list(_dict(obj.get("status")).get("conditions"))
             if isinstance(c, dict)}
    text = DENIED if DENIED in kinds else APPROVED if APPROVED in kinds else "Pending"
    if FAILED in kinds:
        text += ",Failed"
    if _dict(obj.get("status")).get("certificate"):
        text += ",Issued"
    return text


def requestor(user: UserInfo) -> Obj:
    """``spec``'s requestor fields for ``user``."""
    out: Obj = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    if user.groups:
        out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in sorted(user.extra.items())}
    return out


class CertificateSigningRequestStrategy(TypedStrategy):
    type_key = ("certificates.k8s.io/v1", "CertificateSigningRequest")
    known_fields = frozenset({"spec", "status"})
    merge_keys = {"status.conditions": "type"}

    def __init__(self, info: ResourceInfo, now: Now) -> None:
        super().__init__(info)
        self._clock_now = now

    def check_name(self, name: str) -> list[str]:
        return []  # "We don't care what you call your certificate requests."

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        obj["status"] = {}
        spec = obj.get("spec")
        if isinstance(spec, dict):
            for key in ("username", "uid", "groups", "extra"):
                spec.pop(key, None)

    def prepare_requestor(self, obj: Obj, user: UserInfo | None) -> None:
        if user is not None and isinstance(obj.get("spec"), dict):
            obj["spec"].update(requestor(user))

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        new["spec"] = copy.deepcopy(old.get("spec", {}))
        now = timeutil.format_time(self._clock_now())
        if subresource == "status":
            for kind in (APPROVED, DENIED):
                _keep_instances(new, old, kind)
            _stamp_conditions(new, old, now)
        elif subresource == APPROVAL:
            status = _dict(new.get("status"))
            certificate = _dict(old.get("status")).get("certificate")
            status = {k: v for k, v in status.items() if k != "certificate"}
            if certificate:
                status["certificate"] = certificate
            new["status"] = status
            _stamp_conditions(new, old, now)
        else:
            new["status"] = copy.deepcopy(old.get("status", {}))

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + validate_csr(obj)

    def validate_subresource_update(self, new: Obj, old: Obj, version: VersionInfo,
                                    subresource: str) -> list[FieldError]:
        errs = self.validate_update(new, old, version)
        errs += validate_transition(new, old, subresource)
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        return self.validate_subresource_update(new, old, version, "status")

    def columns(self, version: VersionInfo) -> list[table.Column]:
        def signer(obj: Obj, now: datetime) -> str:
            return str(_dict(obj.get("spec")).get("signerName") or "<none>")

        def who(obj: Obj, now: datetime) -> str:
            return str(_dict(obj.get("spec")).get("username") or "")

        def duration(obj: Obj, now: datetime) -> str:
            seconds = _dict(obj.get("spec")).get("expirationSeconds")
            if not isinstance(seconds, int) or isinstance(seconds, bool):
                return "<none>"
            return timeutil.human_duration(seconds)

        return [table.name_column(), table.age_column(),
                table.Column("SignerName", "string", signer,
                             description="Only one of signerName or the legacy signer is "
                                         "set."),
                table.Column("Requestor", "string", who,
                             description="Name of the user who created the request."),
                table.Column("RequestedDuration", "string", duration,
                             description="The requested duration of the issued certificate."),
                table.Column("Condition", "string", lambda o, _n: condition_cell(o),
                             description="Approved, Denied, Pending, Failed and Issued.")]


def csr_resource() -> ResourceInfo:
    return ResourceInfo(group=GROUP, resource=RESOURCE, kind="CertificateSigningRequest",
                        singular="certificatesigningrequest", namespaced=False,
                        versions=(VersionInfo("v1", storage=True, status=True),),
                        short_names=("csr",),
                        extra_subresources=(SubresourceInfo(APPROVAL,
                                                            verbs=("get", "patch", "update")),))
