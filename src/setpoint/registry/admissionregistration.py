"""admissionregistration.k8s.io/v1: ValidatingAdmissionPolicy and its binding, as stored kinds.

Both are cluster-scoped. A policy has ``spec`` (validated and defaulted by
:mod:`setpoint.admission.validation`: every CEL expression must compile) and a ``status``
subresource the server fills in on every spec change: ``observedGeneration`` and
``typeChecking.expressionWarnings`` (the expressions checked against the schemas of the
custom resources the policy matches, :mod:`setpoint.admission.typechecking`). A binding has
only ``spec``. Enforcement is :mod:`setpoint.registry.policies`.

MutatingAdmissionPolicy and its binding (``v1beta1``, stored, and ``v1alpha1``: one shape)
are cluster-scoped with ``spec`` only (validated by :mod:`setpoint.admission.validation`);
they are enforced by :mod:`setpoint.registry.mutatingpolicies`.

ValidatingWebhookConfiguration and MutatingWebhookConfiguration are cluster-scoped too, with
``webhooks`` (defaulted and validated by :mod:`setpoint.admission.webhookconfig`); they are
enforced by :mod:`setpoint.registry.webhooks`.
"""

from __future__ import annotations

from typing import Any, Final

from setpoint.admission import typechecking, validation, webhookconfig
from setpoint.apimachinery import gotypes
from setpoint.apimachinery.fields import FieldError
from setpoint.apimachinery.gotypes import BYTES, INT32, INT64, STRING, MapOf, SliceOf, Struct
from setpoint.registry import builtintypes, table
from setpoint.registry.podtemplates import drop_nulls
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy

Obj = dict[str, Any]

GROUP: Final = "admissionregistration.k8s.io"
POLICIES: Final = "validatingadmissionpolicies"
BINDINGS: Final = "validatingadmissionpolicybindings"
MUTATING_POLICIES: Final = "mutatingadmissionpolicies"
MUTATING_BINDINGS: Final = "mutatingadmissionpolicybindings"
#: the versions MutatingAdmissionPolicy and its binding are served in (one shape; stored in
#: the newer one)
MUTATING_POLICY_VERSIONS: Final = ("v1beta1", "v1alpha1")
VALIDATING_WEBHOOKS: Final = "validatingwebhookconfigurations"
MUTATING_WEBHOOKS: Final = "mutatingwebhookconfigurations"


def _named(name: str) -> gotypes.Scalar:
    return gotypes.Scalar(name, "string")


def _selector() -> Struct:
    requirement = Struct("v1.LabelSelectorRequirement", {
        "key": STRING, "operator": _named("v1.LabelSelectorOperator"),
        "values": SliceOf(STRING)})
    return Struct("v1.LabelSelector", {"matchLabels": MapOf(STRING),
                                       "matchExpressions": SliceOf(requirement)})


def _match_resources(prefix: str = "v1") -> Struct:
    rule = Struct(f"{prefix}.NamedRuleWithOperations", {
        "resourceNames": SliceOf(STRING), "operations": SliceOf(_named("v1.OperationType")),
        "apiGroups": SliceOf(STRING), "apiVersions": SliceOf(STRING),
        "resources": SliceOf(STRING), "scope": _named("v1.ScopeType")})
    return Struct(f"{prefix}.MatchResources", {
        "namespaceSelector": _selector(), "objectSelector": _selector(),
        "resourceRules": SliceOf(rule), "excludeResourceRules": SliceOf(rule),
        "matchPolicy": _named("v1.MatchPolicyType")})


def policy_type() -> Struct:
    spec = Struct("v1.ValidatingAdmissionPolicySpec", {
        "paramKind": Struct("v1.ParamKind", {"apiVersion": STRING, "kind": STRING}),
        "matchConstraints": _match_resources(),
        "validations": SliceOf(Struct("v1.Validation", {
            "expression": STRING, "message": STRING,
            "reason": _named("v1.StatusReason"), "messageExpression": STRING})),
        "failurePolicy": _named("v1.FailurePolicyType"),
        "auditAnnotations": SliceOf(Struct("v1.AuditAnnotation", {
            "key": STRING, "valueExpression": STRING})),
        "matchConditions": SliceOf(Struct("v1.MatchCondition", {
            "name": STRING, "expression": STRING})),
        "variables": SliceOf(Struct("v1.Variable", {"name": STRING, "expression": STRING}))})
    condition = Struct("v1.Condition", {
        "type": STRING, "status": _named("v1.ConditionStatus"), "observedGeneration": INT64,
        "lastTransitionTime": gotypes.TIME, "reason": STRING, "message": STRING})
    status = Struct("v1.ValidatingAdmissionPolicyStatus", {
        "observedGeneration": INT64,
        "typeChecking": Struct("v1.TypeChecking", {"expressionWarnings": SliceOf(Struct(
            "v1.ExpressionWarning", {"fieldRef": STRING, "warning": STRING}))}),
        "conditions": SliceOf(condition)})
    return Struct("v1.ValidatingAdmissionPolicy", {
        "apiVersion": STRING, "kind": STRING, "metadata": builtintypes.object_meta(),
        "spec": spec, "status": status})


def binding_type() -> Struct:
    spec = Struct("v1.ValidatingAdmissionPolicyBindingSpec", {
        "policyName": STRING,
        "paramRef": Struct("v1.ParamRef", {
            "name": STRING, "namespace": STRING, "selector": _selector(),
            "parameterNotFoundAction": _named("v1.ParameterNotFoundActionType")}),
        "matchResources": _match_resources(),
        "validationActions": SliceOf(_named("v1.ValidationAction"))})
    return Struct("v1.ValidatingAdmissionPolicyBinding", {
        "apiVersion": STRING, "kind": STRING, "metadata": builtintypes.object_meta(),
        "spec": spec})


def mutating_policy_type(version: str) -> Struct:
    """MutatingAdmissionPolicy, the same in v1alpha1 and v1beta1."""
    spec = Struct(f"{version}.MutatingAdmissionPolicySpec", {
        "paramKind": Struct(f"{version}.ParamKind", {"apiVersion": STRING, "kind": STRING}),
        "matchConstraints": _match_resources(version),
        "variables": SliceOf(Struct(f"{version}.Variable", {
            "name": STRING, "expression": STRING})),
        "mutations": SliceOf(Struct(f"{version}.Mutation", {
            "patchType": _named(f"{version}.PatchType"),
            "applyConfiguration": Struct(f"{version}.ApplyConfiguration",
                                         {"expression": STRING}),
            "jsonPatch": Struct(f"{version}.JSONPatch", {"expression": STRING})})),
        "failurePolicy": _named(f"{version}.FailurePolicyType"),
        "matchConditions": SliceOf(Struct(f"{version}.MatchCondition", {
            "name": STRING, "expression": STRING})),
        "reinvocationPolicy": _named("v1.ReinvocationPolicyType")})
    return Struct(f"{version}.MutatingAdmissionPolicy", {
        "apiVersion": STRING, "kind": STRING, "metadata": builtintypes.object_meta(),
        "spec": spec})


def mutating_binding_type(version: str) -> Struct:
    spec = Struct(f"{version}.MutatingAdmissionPolicyBindingSpec", {
        "policyName": STRING,
        "paramRef": Struct(f"{version}.ParamRef", {
            "name": STRING, "namespace": STRING, "selector": _selector(),
            "parameterNotFoundAction": _named(f"{version}.ParameterNotFoundActionType")}),
        "matchResources": _match_resources(version)})
    return Struct(f"{version}.MutatingAdmissionPolicyBinding", {
        "apiVersion": STRING, "kind": STRING, "metadata": builtintypes.object_meta(),
        "spec": spec})


def webhook_configuration_type(mutating: bool) -> Struct:
    prefix = "Mutating" if mutating else "Validating"
    rule = Struct("v1.RuleWithOperations", {
        "operations": SliceOf(_named("v1.OperationType")), "apiGroups": SliceOf(STRING),
        "apiVersions": SliceOf(STRING), "resources": SliceOf(STRING),
        "scope": _named("v1.ScopeType")})
    client = Struct("v1.WebhookClientConfig", {
        "url": STRING, "caBundle": BYTES,
        "service": Struct("v1.ServiceReference", {
            "namespace": STRING, "name": STRING, "path": STRING, "port": INT32})})
    hook: dict[str, gotypes.GoType] = {
        "name": STRING, "clientConfig": client, "rules": SliceOf(rule),
        "failurePolicy": _named("v1.FailurePolicyType"),
        "matchPolicy": _named("v1.MatchPolicyType"),
        "namespaceSelector": _selector(), "objectSelector": _selector(),
        "sideEffects": _named("v1.SideEffectClass"), "timeoutSeconds": INT32,
        "admissionReviewVersions": SliceOf(STRING),
        "matchConditions": SliceOf(Struct("v1.MatchCondition", {
            "name": STRING, "expression": STRING}))}
    if mutating:
        hook["reinvocationPolicy"] = _named("v1.ReinvocationPolicyType")
    return Struct(f"v1.{prefix}WebhookConfiguration", {
        "apiVersion": STRING, "kind": STRING, "metadata": builtintypes.object_meta(),
        "webhooks": SliceOf(Struct(f"v1.{prefix}Webhook", hook))})


class ValidatingAdmissionPolicyStrategy(Strategy):
    known_fields = frozenset({"spec", "status"})
    uses_generation = True

    def __init__(self, info: ResourceInfo,
                 resolve: typechecking.Resolver | None = None) -> None:
        super().__init__(info)
        self._resolve: typechecking.Resolver = resolve or (lambda g, v, r: None)

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return policy_type()

    def default(self, obj: Obj, version: VersionInfo) -> None:
        validation.default_policy(obj)

    def _status(self, obj: Obj) -> None:
        spec = obj.get("spec")
        warnings = typechecking.expression_warnings(spec, self._resolve) \
            if isinstance(spec, dict) else []
        status: Obj = {"observedGeneration": obj["metadata"].get("generation", 1),
                       "typeChecking": {}}
        if warnings:
            status["typeChecking"]["expressionWarnings"] = warnings
        obj["status"] = status

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        super().prepare_for_create(obj, version)
        self._status(obj)

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        super().prepare_for_update(new, old, version, subresource)
        if subresource != "status" and new.get("spec") != old.get("spec"):
            self._status(new)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + validation.validate_policy(obj)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.Column("Validations", "integer",
                             lambda o, _n: len((o.get("spec") or {}).get("validations") or []),
                             description="Number of validations"),
                table.path_column("ParamKind", "string", ".spec.paramKind.kind"),
                table.age_column()]


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    known_fields = frozenset({"spec"})
    uses_generation = True

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return binding_type()

    def default(self, obj: Obj, version: VersionInfo) -> None:
        validation.default_binding(obj)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + validation.validate_binding(obj)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("PolicyName", "string", ".spec.policyName"),
                table.path_column("ParamRef", "string", ".spec.paramRef.name"),
                table.age_column()]


def policy_resource() -> ResourceInfo:
    return ResourceInfo(group=GROUP, resource=POLICIES, kind="ValidatingAdmissionPolicy",
                        singular="validatingadmissionpolicy", namespaced=False,
                        versions=(VersionInfo("v1", storage=True, status=True),),
                        categories=("api-extensions",))


def binding_resource() -> ResourceInfo:
    return ResourceInfo(group=GROUP, resource=BINDINGS, kind="ValidatingAdmissionPolicyBinding",
                        singular="validatingadmissionpolicybinding", namespaced=False,
                        versions=(VersionInfo("v1", storage=True),),
                        categories=("api-extensions",))




class MutatingAdmissionPolicyStrategy(Strategy):
    known_fields = frozenset({"spec"})
    uses_generation = True

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return mutating_policy_type(version.name)

    def default(self, obj: Obj, version: VersionInfo) -> None:
        validation.default_mutating_policy(obj)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + validation.validate_mutating_policy(obj)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.Column("Mutations", "integer",
                             lambda o, _n: len((o.get("spec") or {}).get("mutations") or []),
                             description="Number of mutations"),
                table.path_column("ParamKind", "string", ".spec.paramKind.kind"),
                table.age_column()]


class MutatingAdmissionPolicyBindingStrategy(Strategy):
    known_fields = frozenset({"spec"})
    uses_generation = True

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return mutating_binding_type(version.name)

    def default(self, obj: Obj, version: VersionInfo) -> None:
        validation.default_binding(obj)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + validation.validate_mutating_binding(obj)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.path_column("PolicyName", "string", ".spec.policyName"),
                table.path_column("ParamRef", "string", ".spec.paramRef.name"),
                table.age_column()]


def _mutating_versions() -> tuple[VersionInfo, ...]:
    return tuple(VersionInfo(v, storage=i == 0) for i, v in enumerate(MUTATING_POLICY_VERSIONS))


def mutating_policy_resource() -> ResourceInfo:
    return ResourceInfo(group=GROUP, resource=MUTATING_POLICIES,
                        kind="MutatingAdmissionPolicy", singular="mutatingadmissionpolicy",
                        namespaced=False, versions=_mutating_versions(),
                        categories=("api-extensions",))


def mutating_binding_resource() -> ResourceInfo:
    return ResourceInfo(group=GROUP, resource=MUTATING_BINDINGS,
                        kind="MutatingAdmissionPolicyBinding",
                        singular="mutatingadmissionpolicybinding", namespaced=False,
                        versions=_mutating_versions(), categories=("api-extensions",))


class WebhookConfigurationStrategy(Strategy):
    """Validating- and MutatingWebhookConfiguration: ``webhooks`` and nothing else."""

    known_fields = frozenset({"webhooks"})

    def __init__(self, info: ResourceInfo) -> None:
        super().__init__(info)
        self._mutating = info.resource == MUTATING_WEBHOOKS

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return webhook_configuration_type(self._mutating)

    def default(self, obj: Obj, version: VersionInfo) -> None:
        # every webhook is a Go struct: a null member (``objectSelector: null``, as kopf
        # writes a webhook without label filters) decodes to its zero value and is defaulted
        drop_nulls(obj.get("webhooks"))
        webhookconfig.default_configuration(obj, mutating=self._mutating)

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        return super().validate(obj, version) + webhookconfig.validate_configuration(
            obj, mutating=self._mutating)

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(),
                table.Column("Webhooks", "integer",
                             lambda o, _n: len(o.get("webhooks") or []),
                             description="Number of webhooks"),
                table.age_column()]


def webhook_configuration_resource(mutating: bool) -> ResourceInfo:
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    return ResourceInfo(group=GROUP, resource=MUTATING_WEBHOOKS if mutating
                        else VALIDATING_WEBHOOKS, kind=kind, singular=kind.lower(),
                        namespaced=False, versions=(VersionInfo("v1", storage=True),),
                        categories=("api-extensions",))
