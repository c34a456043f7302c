"""certificates.k8s.io ClusterTrustBundle: a signer's published CA certificates.

A ClusterTrustBundle (cluster-scoped, served in ``v1beta1``, stored as such, and ``v1alpha1``,
the same shape) holds ``spec.trustBundle``, PEM CA certificates, and optionally
``spec.signerName``, the signer whose certificates they verify. Validation is Kubernetes'
``ValidateClusterTrustBundle``:

* ``spec.trustBundle`` holds one or more ``CERTIFICATE`` PEM blocks without headers,
  each a CA certificate that parses, none twice, at most
  :data:`~setpoint.pki.trustbundle.MAX_TRUST_BUNDLE_BYTES` (:mod:`setpoint.pki.trustbundle`);
* a bundle with a signer is named ``<signerName with '/' replaced by ':'>:<name>`` (the rest a
  DNS subdomain), one without must not contain ``:``; ``spec.signerName`` is a qualified
  signer name and immutable.

Who may publish for a signer (``attest``) is :mod:`setpoint.registry.signerauthz`. Field
selector ``spec.signerName`` is supported (how a workload finds its signer's bundles);
columns are kubectl's: NAME SIGNERNAME.

Non-guarantees: no protobuf encoding (JSON only); the OpenAPI schema is built from the Go
shape here (the recorded Kubernetes document has none for this beta kind), without
Kubernetes' descriptions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from setpoint.apimachinery import fields, gotypes, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.gotypes import STRING, Struct
from setpoint.pki import trustbundle
from setpoint.registry import builtintypes, table
from setpoint.registry.certificates import GROUP, validate_signer_name
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy

Obj = dict[str, Any]

RESOURCE: Final = "clustertrustbundles"
KIND: Final = "ClusterTrustBundle"
#: served versions, the first stored (the shapes are the same)
VERSIONS: Final = ("v1beta1", "v1alpha1")
SIGNER_FIELD: Final = "spec.signerName"

SPEC: Final = FieldPath.root("spec")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def bundle_type(version: str) -> Struct:
    return Struct(f"{version}.{KIND}", {
        "apiVersion": STRING, "kind": STRING, "metadata": builtintypes.object_meta(),
        "spec": Struct(f"{version}.ClusterTrustBundleSpec",
                       {"signerName": STRING, "trustBundle": STRING})})


def name_prefix(signer: str) -> str:
    """The prefix of the names of ``signer``'s bundles."""
    return signer.replace("/", ":") + ":"


def name_check(signer: str) -> Any:
    """Kubernetes' ``ValidateClusterTrustBundleName`` for a bundle of ``signer``."""

    def check(name: str) -> list[str]:
        if not signer:
            if ":" in name:
                return ['ClusterTrustBundle without signer name must not have ":" in its name']
            return validation.is_dns1123_subdomain(name)
        prefix = name_prefix(signer)
        if not name.startswith(prefix):
            return [f"ClusterTrustBundle for signerName {signer} must be named with prefix "
                    f"{prefix}"]
        return validation.is_dns1123_subdomain(name[len(prefix):])

    return check


def validate_trust_bundle(value: Any) -> list[FieldError]:
    path = SPEC.child("trustBundle")
    if not isinstance(value, str):
        value = ""  # absent: Kubernetes' empty string, which holds no anchor
    if len(value.encode()) > trustbundle.MAX_TRUST_BUNDLE_BYTES:
        return [fields.too_long(path, trustbundle.MAX_TRUST_BUNDLE_BYTES)]
    return [fields.invalid(path, "<value omitted>", problem)
            for problem in trustbundle.trust_bundle_errors(value)]


def signer_of(obj: Obj) -> str:
    signer = _dict(obj.get("spec")).get("signerName")
    return signer if isinstance(signer, str) else ""


class ClusterTrustBundleStrategy(Strategy):
    known_fields = frozenset({"spec"})
    selectable_fields = (SIGNER_FIELD,)

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return bundle_type(version.name)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        signer = signer_of(obj)
        errs = validation.validate_object_meta(obj.get("metadata") or {}, namespaced=False,
                                               name_check=name_check(signer))
        if signer:
            errs += validate_signer_name(signer, SPEC.child("signerName"))
        errs += validate_trust_bundle(_dict(obj.get("spec")).get("trustBundle"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = super().validate_update(new, old, version)
        if signer_of(new) != signer_of(old):
            errs.append(fields.invalid(SPEC.child("signerName"), signer_of(new),
                                       validation.FIELD_IMMUTABLE))
        return errs

    def field_labels(self, obj: Obj) -> dict[str, str]:
        labels = super().field_labels(obj)
        labels[SIGNER_FIELD] = signer_of(obj)
        return labels

    def columns(self, version: VersionInfo) -> list[table.Column]:
        def signer(obj: Obj, now: datetime) -> str:
            return signer_of(obj) or "<none>"

        return [table.name_column(),
                table.Column("SignerName", "string", signer,
                             description="Signer name of the trust bundle.")]


def cluster_trust_bundle_resource() -> ResourceInfo:
    return ResourceInfo(group=GROUP, resource=RESOURCE, kind=KIND,
                        singular="clustertrustbundle", namespaced=False,
                        versions=tuple(VersionInfo(v, storage=i == 0)
                                       for i, v in enumerate(VERSIONS)))
