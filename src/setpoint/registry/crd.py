"""CustomResourceDefinition: one stored object (v1 form), served as v1 and v1beta1.

v1beta1 is what older tutorials use. Its single-version fields (``spec.version``,
``spec.validation``, top-level ``subresources`` and ``additionalPrinterColumns`` with
``JSONPath``) are mapped into per-version fields on the way in, and hoisted back out on
the way out when every version shares them. ``preserveUnknownFields`` defaults to true there,
as it did in Kubernetes, which keeps unknown fields of custom resources.

Names, as Kubernetes rules them: a group that is ``k8s.io`` or ``kubernetes.io`` or under
either is protected, and a CRD of it needs the ``api-approved.kubernetes.io`` annotation (a
URL of the approving review, or a reason starting with ``unapproved``) when it is created or
when the annotation changes. A CRD may not define a resource this server serves as a
built-in (``leases.coordination.k8s.io``): creating one is refused; one already stored (from
an older server) never has its names accepted, so it is never established nor served.
"""

from __future__ import annotations

import copy
import urllib.parse
from typing import Any

from setpoint.admission import webhookconfig
from setpoint.apimachinery import fields, gotypes, regexp, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.registry import builtintypes, core, table
from setpoint.registry.resources import (
    PrinterColumn,
    ResourceInfo,
    ScaleSpec,
    VersionInfo,
)
from setpoint.registry.strategy import Strategy, meta_of
from setpoint.schema import check_structural

Obj = dict[str, Any]

GROUP = "apiextensions.k8s.io"
API_APPROVAL = "api-approved.kubernetes.io"
APPROVAL_CONDITION = "KubernetesAPIApprovalPolicyConformant"
_APPROVAL_HELP = "see https://github.com/kubernetes/enhancements/pull/1111"
CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
DNS_LABEL = regexp.Regexp(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def crd_resource() -> ResourceInfo:
    return ResourceInfo(
        group=GROUP, resource="customresourcedefinitions", kind="CustomResourceDefinition",
        singular="customresourcedefinition", namespaced=False, short_names=("crd", "crds"),
        categories=("api-extensions",),
        versions=(VersionInfo("v1", storage=True, status=True),
                  VersionInfo("v1beta1", status=True, deprecated=True,
                              deprecation_warning="apiextensions.k8s.io/v1beta1 "
                              "CustomResourceDefinition is deprecated in v1.16+, "
                              "unavailable in v1.22+; use apiextensions.k8s.io/v1 "
                              "CustomResourceDefinition")),
    )


# --- conversion -----------------------------------------------------------------------------


def _rename_column_key(columns: Any, old: str, new: str) -> list[Obj]:
    """Printer columns with their JSONPath key renamed (``JSONPath`` in v1beta1,
    ``jsonPath`` in v1); entries that are not objects are dropped."""
    out = []
    for col in columns or []:
        if not isinstance(col, dict):
            continue
        c = dict(col)
        if old in c:
            c[new] = c.pop(old)
        out.append(c)
    return out


def v1beta1_to_v1(obj: Obj) -> Obj:
    """The v1 form of a v1beta1 CRD (a new object; ``obj`` is not changed)."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{GROUP}/v1"
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    top_schema = spec.pop("validation", None)
    top_subresources = spec.pop("subresources", None)
    top_columns = spec.pop("additionalPrinterColumns", None)
    single = spec.pop("version", None)
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        versions = [{"name": single, "served": True, "storage": True}] if single else []
    new_versions = []
    for v in versions:
        if not isinstance(v, dict):
            new_versions.append(v)
            continue
        nv = dict(v)
        if "schema" not in nv and isinstance(top_schema, dict):
            nv["schema"] = copy.deepcopy(top_schema)
        if "subresources" not in nv and isinstance(top_subresources, dict):
            nv["subresources"] = copy.deepcopy(top_subresources)
        if "additionalPrinterColumns" in nv:
            nv["additionalPrinterColumns"] = _rename_column_key(
                nv["additionalPrinterColumns"], "JSONPath", "jsonPath")
        elif top_columns:
            nv["additionalPrinterColumns"] = _rename_column_key(top_columns, "JSONPath", "jsonPath")
        new_versions.append(nv)
    spec["versions"] = new_versions
    spec.setdefault("preserveUnknownFields", True)
    conversion = spec.get("conversion")
    if isinstance(conversion, dict) and conversion.get("strategy") == "Webhook":
        hook = {}
        if "webhookClientConfig" in conversion:
            hook["clientConfig"] = conversion.pop("webhookClientConfig")
        # v1beta1 defaults the review versions to its own (Kubernetes' SetDefaults)
        hook["conversionReviewVersions"] = conversion.pop("conversionReviewVersions",
                                                          None) or ["v1beta1"]
        conversion["webhook"] = hook
    return out


def v1_to_v1beta1(obj: Obj) -> Obj:
    """The v1beta1 view of a stored v1 CRD."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{GROUP}/v1beta1"
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    versions = [v for v in spec.get("versions") or [] if isinstance(v, dict)]
    if versions:
        spec["version"] = versions[0].get("name")
        for name, target in (("schema", "validation"), ("subresources", "subresources"),
                             ("additionalPrinterColumns", "additionalPrinterColumns")):
            values = [v.get(name) for v in versions]
            if values[0] is not None and all(x == values[0] for x in values):
                value = values[0]
                if name == "additionalPrinterColumns":
                    value = _rename_column_key(value, "jsonPath", "JSONPath")
                spec[target] = value
                for v in versions:
                    v.pop(name, None)
            else:
                for v in versions:
                    if name == "additionalPrinterColumns" and name in v:
                        v[name] = _rename_column_key(v[name], "jsonPath", "JSONPath")
    return out


# --- reading a CRD --------------------------------------------------------------------------


def resource_info(crd: Obj) -> ResourceInfo:
    """The ResourceInfo a (valid, stored v1) CRD defines."""
    spec = crd["spec"]
    names = (crd.get("status") or {}).get("acceptedNames") or spec["names"]
    kind = names.get("kind") or spec["names"]["kind"]
    versions = []
    for v in spec.get("versions") or []:
        sub = v.get("subresources") or {}
        scale = sub.get("scale")
        versions.append(VersionInfo(
            name=v["name"], served=bool(v.get("served", True)),
            storage=bool(v.get("storage", False)),
            deprecated=bool(v.get("deprecated", False)),
            deprecation_warning=v.get("deprecationWarning"),
            status="status" in sub,
            scale=ScaleSpec(scale.get("specReplicasPath", ".spec.replicas"),
                            scale.get("statusReplicasPath", ".status.replicas"),
                            scale.get("labelSelectorPath")) if isinstance(scale, dict) else None,
            printer_columns=tuple(
                PrinterColumn(name=c.get("name", ""), type=c.get("type", "string"),
                              json_path=c.get("jsonPath", ""), format=c.get("format", ""),
                              description=c.get("description", ""),
                              priority=int(c.get("priority") or 0))
                for c in v.get("additionalPrinterColumns") or []),
            schema=(v.get("schema") or {}).get("openAPIV3Schema"),
            selectable_fields=tuple(
                f.get("jsonPath", "") for f in v.get("selectableFields") or []),
        ))
    return ResourceInfo(
        group=spec["group"], resource=names.get("plural") or spec["names"]["plural"],
        kind=kind,
        singular=names.get("singular") or spec["names"].get("singular") or kind.lower(),
        namespaced=spec.get("scope") == "Namespaced", versions=tuple(versions),
        list_kind=names.get("listKind") or spec["names"].get("listKind") or kind + "List",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
    )


def condition(crd: Obj, type_: str) -> Obj | None:
    for c in (crd.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def is_established(crd: Obj) -> bool:
    c = condition(crd, "Established")
    return c is not None and c.get("status") == "True"


# --- names -----------------------------------------------------------------------------------


def is_protected_group(group: Any) -> bool:
    """``k8s.io``, ``kubernetes.io`` and their subdomains belong to the Kubernetes project."""
    if not isinstance(group, str):
        return False
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


def api_approval(annotations: Any) -> tuple[str, str]:
    """The state of a CRD's ``api-approved.kubernetes.io`` annotation (``Missing``,
    ``Bypassed``, ``Approved`` or ``Invalid``) and the reason Kubernetes gives for it."""
    value = annotations.get(API_APPROVAL) if isinstance(annotations, dict) else None
    if not isinstance(value, str) or not value:
        return "Missing", (f'protected groups must have approval annotation "{API_APPROVAL}", '
                           f"{_APPROVAL_HELP}")
    if value.startswith("unapproved"):
        return "Bypassed", f'not approved: "{value}"'
    try:
        url = urllib.parse.urlsplit(value)
    except ValueError:
        url = None
    controls = any(ord(c) < 0x20 or ord(c) == 0x7F for c in value)
    if url is not None and url.scheme and url.netloc and not controls:
        return "Approved", f"approved in {value}"
    return "Invalid", (f'protected groups must have approval annotation "{API_APPROVAL}" with '
                       f'either a URL or a reason starting with "unapproved", {_APPROVAL_HELP}')


def validate_api_approval(new: Obj, old: Obj | None) -> list[FieldError]:
    """A CRD of a protected group is approved when created, and when its approval changes."""
    spec = new.get("spec")
    if not isinstance(spec, dict) or not is_protected_group(spec.get("group")):
        return []
    annotations = meta_of(new).get("annotations")
    state, reason = api_approval(annotations)
    if old is not None and api_approval(meta_of(old).get("annotations"))[0] == state:
        return []
    path = FieldPath.root("metadata").child("annotations").key(API_APPROVAL)
    if state == "Missing":
        return [fields.required(path, reason)]
    if state == "Invalid":
        return [fields.invalid(path, annotations.get(API_APPROVAL) if isinstance(
            annotations, dict) else None, reason)]
    return []


def approval_condition(crd: Obj) -> tuple[str, str, str] | None:
    """``(status, reason, message)`` of the KubernetesAPIApprovalPolicyConformant condition
    of a CRD of a protected group; None for other groups (they have no such condition)."""
    spec = crd.get("spec") or {}
    if not is_protected_group(spec.get("group")):
        return None
    state, reason = api_approval(meta_of(crd).get("annotations"))
    return {"Approved": ("True", "ApprovedAnnotation", reason),
            "Bypassed": ("False", "UnapprovedAnnotation", reason),
            "Missing": ("False", "MissingAnnotation", reason),
            "Invalid": ("False", "InvalidAnnotation", reason)}[state]


def builtin_names(group: str) -> dict[str, str]:
    """The names the built-in resources of ``group`` hold, keyed as
    :meth:`~setpoint.registry.catalog.Catalog.names_in_use` keys them (``p:leases``)."""
    taken: dict[str, str] = {}
    for info in (*(i for i, _ in core.builtin_resources()), crd_resource()):
        if info.group != group:
            continue
        taken[f"p:{info.resource}"] = taken[f"s:{info.singular}"] = info.resource
        taken[f"k:{info.kind}"] = taken[f"L:{info.list_kind}"] = info.resource
        for short in info.short_names:
            taken[f"s:{short}"] = info.resource
    return taken


def shadows_builtin(crd: Obj) -> bool:
    """Whether ``crd`` defines a resource the server serves as a built-in."""
    spec = crd.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("names"), dict):
        return False
    plural = spec["names"].get("plural")
    return isinstance(spec.get("group"), str) and isinstance(plural, str) and \
        f"p:{plural}" in builtin_names(spec["group"])


# --- strategy -------------------------------------------------------------------------------


class CRDStrategy(Strategy):
    known_fields = frozenset({"spec", "status"})
    strategic_merge = False
    uses_generation = True
    allow_unconditional_update = False

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return builtintypes.crd_v1beta1() if version.name == "v1beta1" else builtintypes.crd_v1()

    def to_storage(self, obj: Obj, version: str) -> Obj:
        if version == "v1beta1":
            return v1beta1_to_v1(obj)
        obj["apiVersion"] = f"{GROUP}/v1"
        return obj

    def from_storage(self, obj: Obj, version: str) -> Obj:
        if version == "v1beta1":
            return v1_to_v1beta1(obj)
        return obj

    def default(self, obj: Obj, version: VersionInfo) -> None:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        names = spec.get("names")
        if isinstance(names, dict) and isinstance(names.get("kind"), str):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        spec.setdefault("conversion", {"strategy": "None"})
        conversion = spec.get("conversion")
        if isinstance(conversion, dict):
            hook = conversion.get("webhook")
            # v1 nests the client config in webhook, v1beta1 has it beside the strategy
            client = hook.get("clientConfig") if isinstance(hook, dict) else \
                conversion.get("webhookClientConfig")
            service = client.get("service") if isinstance(client, dict) else None
            if isinstance(service, dict):
                service.setdefault("port", 443)
        if version.name == "v1beta1":
            spec.setdefault("preserveUnknownFields", True)
            spec.setdefault("scope", "Namespaced")
        for v in spec.get("versions") or []:
            if isinstance(v, dict):
                v.setdefault("served", True)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)
        meta["finalizers"] = finalizers
        obj["status"] = {"conditions": [], "acceptedNames": {"plural": "", "kind": ""},
                         "storedVersions": []}

    def spec_changed(self, new: Obj, old: Obj, version: VersionInfo) -> bool:
        return new.get("spec") != old.get("spec")

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        errs = validation.validate_object_meta(meta_of(obj), namespaced=False)
        v1 = v1beta1_to_v1(obj) if version.name == "v1beta1" else obj
        errs.extend(validate_crd_spec(v1, legacy=version.name == "v1beta1",
                                      name=str(meta_of(obj).get("name", ""))))
        errs.extend(validate_api_approval(v1, None))
        if shadows_builtin(v1):
            spec = v1["spec"]
            errs.append(fields.invalid(
                "spec.names.plural", spec["names"]["plural"],
                f"{spec['names']['plural']}.{spec['group']} is a built-in resource of this "
                "server and cannot be defined by a CustomResourceDefinition"))
        return errs

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        old_v1 = v1beta1_to_v1(old) if version.name == "v1beta1" else old
        new_v1 = v1beta1_to_v1(new) if version.name == "v1beta1" else new
        old_spec, new_spec = old_v1.get("spec") or {}, new_v1.get("spec") or {}
        # a CRD created through v1beta1 keeps that version's allowances when written as v1
        legacy = version.name == "v1beta1" or old_spec.get("preserveUnknownFields") is True
        errs = validation.validate_object_meta(meta_of(new), namespaced=False)
        errs.extend(validate_crd_spec(new_v1, legacy=legacy,
                                      name=str(meta_of(new).get("name", ""))))
        errs.extend(validation.validate_object_meta_update(meta_of(new), meta_of(old)))
        errs.extend(validate_api_approval(new_v1, old_v1))
        if old_spec.get("scope") != new_spec.get("scope"):
            errs.append(fields.invalid("spec.scope", new_spec.get("scope"),
                                       "field is immutable"))
        if old_spec.get("group") != new_spec.get("group"):
            errs.append(fields.invalid("spec.group", new_spec.get("group"),
                                       "field is immutable"))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        return validation.validate_object_meta_update(meta_of(new), meta_of(old))

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.Column("Created At", "date",
                             lambda o, _n: meta_of(o).get("creationTimestamp"))]


def validate_crd_spec(crd: Obj, *, legacy: bool, name: str) -> list[FieldError]:
    """The checks Kubernetes makes of a CRD spec (v1 form); ``legacy`` = sent as v1beta1."""
    errs: list[FieldError] = []
    spec = crd.get("spec")
    root = FieldPath.root("spec")
    if not isinstance(spec, dict):
        return [fields.required(root)]
    group = spec.get("group")
    if not group:
        errs.append(fields.required(root.child("group")))
    elif not isinstance(group, str) or "." not in group:
        errs.append(fields.invalid(root.child("group"), group,
                                   "should be a domain with at least one dot"))
    else:
        errs.extend(fields.invalid(root.child("group"), group, m)
                    for m in validation.is_dns1123_subdomain(group))
    names = spec.get("names")
    npath = root.child("names")
    if not isinstance(names, dict):
        errs.append(fields.required(npath))
        names = {}
    plural = names.get("plural")
    kind = names.get("kind")
    if not plural:
        errs.append(fields.required(npath.child("plural")))
    elif not isinstance(plural, str) or not DNS_LABEL.match(plural):
        errs.append(fields.invalid(npath.child("plural"), plural,
                                   "a lowercase RFC 1123 label must consist of lower case "
                                   "alphanumeric characters or '-', and must start and end "
                                   "with an alphanumeric character"))
    singular = names.get("singular")
    if singular and (not isinstance(singular, str) or not DNS_LABEL.match(singular)):
        errs.append(fields.invalid(npath.child("singular"), singular,
                                   "a lowercase RFC 1123 label must consist of lower case "
                                   "alphanumeric characters or '-', and must start and end "
                                   "with an alphanumeric character"))
    if not kind:
        errs.append(fields.required(npath.child("kind")))
    for i, short in enumerate(names.get("shortNames") or []):
        if not isinstance(short, str) or not DNS_LABEL.match(short):
            errs.append(fields.invalid(npath.child("shortNames").index(i), short,
                                       "a lowercase RFC 1123 label must consist of lower "
                                       "case alphanumeric characters or '-'"))
    if plural and group and name != f"{plural}.{group}":
        errs.append(fields.invalid("metadata.name", name,
                                   'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope is None:
        errs.append(fields.required(root.child("scope")))
    elif scope not in ("Namespaced", "Cluster"):
        errs.append(fields.not_supported(root.child("scope"), scope, ("Cluster", "Namespaced")))
    versions = spec.get("versions")
    vpath = root.child("versions")
    if not isinstance(versions, list) or not versions:
        errs.append(fields.invalid(vpath, versions if isinstance(versions, list) else None,
                                   "must have exactly one version marked as storage version"))
        return errs
    seen: set[str] = set()
    storage = 0
    for i, v in enumerate(versions):
        path = vpath.index(i)
        if not isinstance(v, dict):
            errs.append(fields.type_invalid(path, v, "must be an object"))
            continue
        vname = v.get("name")
        if not vname:
            errs.append(fields.required(path.child("name")))
        elif not isinstance(vname, str) or not DNS_LABEL.match(vname):
            errs.append(fields.invalid(path.child("name"), vname,
                                       "a DNS-1035 label must consist of lower case "
                                       "alphanumeric characters or '-'"))
        elif vname in seen:
            errs.append(fields.invalid(vpath, versions and vname, "must contain unique "
                                       "version names"))
        if isinstance(vname, str):
            seen.add(vname)
        if v.get("storage"):
            storage += 1
        schema = (v.get("schema") or {}).get("openAPIV3Schema") if isinstance(
            v.get("schema"), dict) else None
        if schema is None:
            if not legacy:
                errs.append(fields.required(path.child("schema").child("openAPIV3Schema"),
                                            "schemas are required"))
        elif not isinstance(schema, dict):
            errs.append(fields.type_invalid(path.child("schema").child("openAPIV3Schema"),
                                            schema, "must be an object"))
        elif not legacy:
            errs.extend(check_structural(
                schema, path=path.child("schema").child("openAPIV3Schema")))
        for j, col in enumerate(v.get("additionalPrinterColumns") or []):
            cpath = path.child("additionalPrinterColumns").index(j)
            if not isinstance(col, dict):
                continue
            if not col.get("name"):
                errs.append(fields.required(cpath.child("name")))
            if col.get("type") not in ("integer", "number", "string", "boolean", "date"):
                errs.append(fields.not_supported(cpath.child("type"), col.get("type"),
                                                 ("boolean", "date", "integer", "number",
                                                  "string")))
            if not col.get("jsonPath"):
                errs.append(fields.required(cpath.child("jsonPath")))
    if storage != 1:
        errs.append(fields.invalid(vpath, None,
                                   "must have exactly one version marked as storage version"))
    if not legacy and spec.get("preserveUnknownFields") is True:
        errs.append(fields.invalid(root.child("preserveUnknownFields"), True,
                                   "cannot set to true, set x-kubernetes-preserve-unknown-"
                                   "fields to true in spec.versions[*].schema instead"))
    errs.extend(_validate_conversion(spec, root.child("conversion")))
    return errs


#: the ConversionReview versions setpoint speaks (Kubernetes accepts the same)
REVIEW_VERSIONS = ("v1", "v1beta1")


def _validate_conversion(spec: Obj, path: FieldPath) -> list[FieldError]:
    """Kubernetes' ``validateCustomResourceConversion`` (its field names are the internal
    version's, as kube-apiserver reports them: ``webhookClientConfig``)."""
    conversion = spec.get("conversion")
    if conversion is None:
        return []
    if not isinstance(conversion, dict):
        return [fields.type_invalid(path, conversion, "must be an object")]
    errs: list[FieldError] = []
    strategy = conversion.get("strategy")
    webhook = conversion.get("webhook")
    hook: Obj = webhook if isinstance(webhook, dict) else {}
    client = hook.get("clientConfig")
    reviews = hook.get("conversionReviewVersions")
    if strategy not in ("None", "Webhook"):
        errs.append(fields.not_supported(path.child("strategy"), strategy, ("None", "Webhook")))
    if strategy != "Webhook":
        if client is not None:
            errs.append(fields.forbidden(path.child("webhookClientConfig"),
                                         "should not be set when strategy is not set to "
                                         "Webhook"))
        if reviews:
            errs.append(fields.forbidden(path.child("conversionReviewVersions"),
                                         "should not be set when strategy is not set to "
                                         "Webhook"))
        return errs
    if client is None:
        errs.append(fields.required(path.child("webhookClientConfig"),
                                    "required when strategy is set to Webhook"))
    else:
        errs.extend(webhookconfig.validate_client_config(
            client, path.child("webhookClientConfig")))
    rpath = path.child("conversionReviewVersions")
    if not isinstance(reviews, list) or not reviews:
        errs.append(fields.required(rpath))
    else:
        seen: set[Any] = set()
        for i, v in enumerate(reviews):
            if not isinstance(v, str):
                errs.append(fields.type_invalid(rpath.index(i), v, "must be a string"))
                continue
            if v in seen:
                errs.append(fields.invalid(rpath.index(i), v, "duplicate version"))
                continue
            seen.add(v)
        if not any(v in REVIEW_VERSIONS for v in reviews):
            errs.append(fields.invalid(rpath, reviews, "must include at least one of "
                                       + ", ".join(REVIEW_VERSIONS)))
    if spec.get("preserveUnknownFields") is True:
        errs.append(fields.invalid(path.child("strategy"), strategy,
                                   "must be None if spec.preserveUnknownFields is true"))
    return errs
