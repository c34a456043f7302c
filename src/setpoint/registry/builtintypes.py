"""The Go types of the built-in kinds, as far as decoding a request body goes.

One :class:`~setpoint.apimachinery.gotypes.Struct` per kind and version, with Kubernetes' JSON
field names and Go type names (``v1.ConfigMap``, ``v1.LeaseSpec``,
``v1.CustomResourceDefinitionSpec``), so that a value of the wrong type is refused with the
message kube-apiserver gives (see :mod:`setpoint.apimachinery.gotypes`). Only what setpoint
serves is described; fields a kind does not declare are pruned later, as decoding drops them.

Invariant: the tables are built by functions (no module state); the CRD types are recursive
through ``JSONSchemaProps``.
"""

from __future__ import annotations

from typing import Any

from setpoint.apimachinery import gotypes as go
from setpoint.apimachinery.gotypes import (
    BOOL,
    BYTES,
    FLOAT64,
    INT32,
    INT64,
    MICRO_TIME,
    STRING,
    TIME,
    Custom,
    GoType,
    MapOf,
    Scalar,
    SliceOf,
    Struct,
)


def _named(name: str) -> Scalar:
    """A named string type (``v1.SecretType``)."""
    return Scalar(name, "string")


def object_meta() -> Struct:
    owner = Struct("v1.OwnerReference", {
        "apiVersion": STRING, "kind": STRING, "name": STRING, "uid": _named("types.UID"),
        "controller": BOOL, "blockOwnerDeletion": BOOL})
    managed = Struct("v1.ManagedFieldsEntry", {
        "manager": STRING, "operation": _named("v1.ManagedFieldsOperationType"),
        "apiVersion": STRING, "time": TIME, "fieldsType": STRING,
        "fieldsV1": go.AnyValue("v1.FieldsV1"), "subresource": STRING})
    return Struct("v1.ObjectMeta", {
        "name": STRING, "generateName": STRING, "namespace": STRING, "selfLink": STRING,
        "uid": _named("types.UID"), "resourceVersion": STRING, "generation": INT64,
        "creationTimestamp": TIME, "deletionTimestamp": TIME,
        "deletionGracePeriodSeconds": INT64, "labels": MapOf(STRING),
        "annotations": MapOf(STRING), "ownerReferences": SliceOf(owner),
        "finalizers": SliceOf(STRING), "managedFields": SliceOf(managed)})


def _kind(name: str, fields: dict[str, GoType]) -> Struct:
    return Struct(name, {"apiVersion": STRING, "kind": STRING, "metadata": object_meta(),
                         **fields})


def namespace() -> Struct:
    condition = Struct("v1.NamespaceCondition", {
        "type": _named("v1.NamespaceConditionType"), "status": _named("v1.ConditionStatus"),
        "lastTransitionTime": TIME, "reason": STRING, "message": STRING})
    return _kind("v1.Namespace", {
        "spec": Struct("v1.NamespaceSpec", {"finalizers": SliceOf(_named("v1.FinalizerName"))}),
        "status": Struct("v1.NamespaceStatus", {"phase": _named("v1.NamespacePhase"),
                                                "conditions": SliceOf(condition)})})


def config_map() -> Struct:
    return _kind("v1.ConfigMap", {"data": MapOf(STRING), "binaryData": MapOf(BYTES),
                                  "immutable": BOOL})


def secret() -> Struct:
    return _kind("v1.Secret", {"data": MapOf(BYTES), "stringData": MapOf(STRING),
                               "type": _named("v1.SecretType"), "immutable": BOOL})


def _object_reference() -> Struct:
    return Struct("v1.ObjectReference", {
        "kind": STRING, "namespace": STRING, "name": STRING, "uid": _named("types.UID"),
        "apiVersion": STRING, "resourceVersion": STRING, "fieldPath": STRING})


def _event_source() -> Struct:
    return Struct("v1.EventSource", {"component": STRING, "host": STRING})


def core_event() -> Struct:
    return _kind("v1.Event", {
        "involvedObject": _object_reference(), "reason": STRING, "message": STRING,
        "source": _event_source(), "firstTimestamp": TIME, "lastTimestamp": TIME,
        "count": INT32, "type": STRING, "eventTime": MICRO_TIME,
        "series": Struct("v1.EventSeries", {"count": INT32, "lastObservedTime": MICRO_TIME}),
        "action": STRING, "related": _object_reference(), "reportingComponent": STRING,
        "reportingInstance": STRING})


def events_v1_event() -> Struct:
    return _kind("v1.Event", {
        "eventTime": MICRO_TIME,
        "series": Struct("v1.EventSeries", {"count": INT32, "lastObservedTime": MICRO_TIME}),
        "reportingController": STRING, "reportingInstance": STRING, "action": STRING,
        "reason": STRING, "regarding": _object_reference(), "related": _object_reference(),
        "note": STRING, "type": STRING, "deprecatedSource": _event_source(),
        "deprecatedFirstTimestamp": TIME, "deprecatedLastTimestamp": TIME,
        "deprecatedCount": INT32})


def lease() -> Struct:
    return _kind("v1.Lease", {"spec": Struct("v1.LeaseSpec", {
        "holderIdentity": STRING, "leaseDurationSeconds": INT32, "acquireTime": MICRO_TIME,
        "renewTime": MICRO_TIME, "leaseTransitions": INT32,
        "strategy": _named("v1.CoordinatedLeaseStrategy"), "preferredHolder": STRING})})


# --- CustomResourceDefinition ------------------------------------------------------------------


def _schema_props(pkg: str) -> Struct:
    """``JSONSchemaProps`` of ``pkg`` (v1 or v1beta1), with its custom-decoded parts."""
    props = Struct(f"{pkg}.JSONSchemaProps")
    props_list = SliceOf(props)

    def nested(value: Any) -> str | None:
        # these types decode an object with a json.Unmarshal of their own: no outer context
        return go.decode_error(value, props)

    def or_array(value: Any) -> str | None:
        if isinstance(value, dict):
            return nested(value)
        if isinstance(value, list):
            return go.decode_error(value, props_list)
        return None  # anything else decodes to nothing

    def or_bool(value: Any) -> str | None:
        if isinstance(value, dict):
            return nested(value)
        if isinstance(value, bool):
            return None
        return "boolean or JSON schema expected"

    def or_string_array(value: Any) -> str | None:
        if isinstance(value, dict):
            return nested(value)
        if isinstance(value, list):
            return go.decode_error(value, SliceOf(STRING))
        return None

    json_value = go.AnyValue(f"{pkg}.JSON")
    optional_int = INT64
    rule = Struct(f"{pkg}.ValidationRule", {
        "rule": STRING, "message": STRING, "messageExpression": STRING,
        "reason": _named(f"{pkg}.FieldValueErrorReason"), "fieldPath": STRING,
        "optionalOldSelf": BOOL})
    props.fields.update({
        "id": STRING, "$schema": _named(f"{pkg}.JSONSchemaURL"), "$ref": STRING,
        "description": STRING, "type": STRING, "format": STRING, "title": STRING,
        "default": json_value, "maximum": FLOAT64, "exclusiveMaximum": BOOL,
        "minimum": FLOAT64, "exclusiveMinimum": BOOL, "maxLength": optional_int,
        "minLength": optional_int, "pattern": STRING, "maxItems": optional_int,
        "minItems": optional_int, "uniqueItems": BOOL, "multipleOf": FLOAT64,
        "enum": SliceOf(json_value), "maxProperties": optional_int,
        "minProperties": optional_int, "required": SliceOf(STRING),
        "items": Custom(f"{pkg}.JSONSchemaPropsOrArray", or_array),
        "allOf": props_list, "oneOf": props_list, "anyOf": props_list, "not": props,
        "properties": MapOf(props),
        "additionalProperties": Custom(f"{pkg}.JSONSchemaPropsOrBool", or_bool),
        "patternProperties": MapOf(props),
        "dependencies": MapOf(Custom(f"{pkg}.JSONSchemaPropsOrStringArray",
                                     or_string_array)),
        "additionalItems": Custom(f"{pkg}.JSONSchemaPropsOrBool", or_bool),
        "definitions": MapOf(props),
        "externalDocs": Struct(f"{pkg}.ExternalDocumentation",
                               {"description": STRING, "url": STRING}),
        "example": json_value, "nullable": BOOL,
        "x-kubernetes-preserve-unknown-fields": BOOL,
        "x-kubernetes-embedded-resource": BOOL, "x-kubernetes-int-or-string": BOOL,
        "x-kubernetes-list-map-keys": SliceOf(STRING), "x-kubernetes-list-type": STRING,
        "x-kubernetes-map-type": STRING, "x-kubernetes-validations": SliceOf(rule),
    })
    return props


def _crd_parts(pkg: str) -> dict[str, GoType]:
    names = Struct(f"{pkg}.CustomResourceDefinitionNames", {
        "plural": STRING, "singular": STRING, "shortNames": SliceOf(STRING), "kind": STRING,
        "listKind": STRING, "categories": SliceOf(STRING)})
    validation = Struct(f"{pkg}.CustomResourceValidation",
                        {"openAPIV3Schema": _schema_props(pkg)})
    subresources = Struct(f"{pkg}.CustomResourceSubresources", {
        "status": Struct(f"{pkg}.CustomResourceSubresourceStatus"),
        "scale": Struct(f"{pkg}.CustomResourceSubresourceScale", {
            "specReplicasPath": STRING, "statusReplicasPath": STRING,
            "labelSelectorPath": STRING})})
    column = Struct(f"{pkg}.CustomResourceColumnDefinition", {
        "name": STRING, "type": STRING, "format": STRING, "description": STRING,
        "priority": INT32, "jsonPath" if pkg == "v1" else "JSONPath": STRING})
    selectable = Struct(f"{pkg}.SelectableField", {"jsonPath": STRING})
    client_config = Struct(f"{pkg}.WebhookClientConfig", {
        "url": STRING, "caBundle": BYTES,
        "service": Struct(f"{pkg}.ServiceReference", {
            "namespace": STRING, "name": STRING, "path": STRING, "port": INT32})})
    condition = Struct(f"{pkg}.CustomResourceDefinitionCondition", {
        "type": _named(f"{pkg}.CustomResourceDefinitionConditionType"),
        "status": _named(f"{pkg}.ConditionStatus"), "lastTransitionTime": TIME,
        "reason": STRING, "message": STRING})
    return {"names": names, "validation": validation, "subresources": subresources,
            "column": column, "selectable": selectable, "client_config": client_config,
            "status": Struct(f"{pkg}.CustomResourceDefinitionStatus", {
                "conditions": SliceOf(condition), "acceptedNames": names,
                "storedVersions": SliceOf(STRING)})}


def _crd_version(pkg: str, parts: dict[str, GoType]) -> Struct:
    return Struct(f"{pkg}.CustomResourceDefinitionVersion", {
        "name": STRING, "served": BOOL, "storage": BOOL, "deprecated": BOOL,
        "deprecationWarning": STRING, "schema": parts["validation"],
        "subresources": parts["subresources"],
        "additionalPrinterColumns": SliceOf(parts["column"]),
        "selectableFields": SliceOf(parts["selectable"])})


def crd_v1() -> Struct:
    parts = _crd_parts("v1")
    conversion = Struct("v1.CustomResourceConversion", {
        "strategy": _named("v1.ConversionStrategyType"),
        "webhook": Struct("v1.WebhookConversion", {
            "clientConfig": parts["client_config"],
            "conversionReviewVersions": SliceOf(STRING)})})
    return _kind("v1.CustomResourceDefinition", {
        "spec": Struct("v1.CustomResourceDefinitionSpec", {
            "group": STRING, "names": parts["names"],
            "scope": _named("v1.ResourceScope"),
            "versions": SliceOf(_crd_version("v1", parts)), "conversion": conversion,
            "preserveUnknownFields": BOOL}),
        "status": parts["status"]})


def crd_v1beta1() -> Struct:
    parts = _crd_parts("v1beta1")
    conversion = Struct("v1beta1.CustomResourceConversion", {
        "strategy": _named("v1beta1.ConversionStrategyType"),
        "webhookClientConfig": parts["client_config"],
        "conversionReviewVersions": SliceOf(STRING)})
    return _kind("v1beta1.CustomResourceDefinition", {
        "spec": Struct("v1beta1.CustomResourceDefinitionSpec", {
            "group": STRING, "version": STRING, "names": parts["names"],
            "scope": _named("v1beta1.ResourceScope"), "validation": parts["validation"],
            "subresources": parts["subresources"],
            "versions": SliceOf(_crd_version("v1beta1", parts)),
            "additionalPrinterColumns": SliceOf(parts["column"]),
            "selectableFields": SliceOf(parts["selectable"]), "conversion": conversion,
            "preserveUnknownFields": BOOL}),
        "status": parts["status"]})


def delete_options() -> Struct:
    """``metav1.DeleteOptions``, the body of a DELETE."""
    return Struct("v1.DeleteOptions", {
        "kind": STRING, "apiVersion": STRING, "gracePeriodSeconds": INT64,
        "preconditions": Struct("v1.Preconditions", {"uid": _named("types.UID"),
                                                     "resourceVersion": STRING}),
        "orphanDependents": BOOL, "propagationPolicy": _named("v1.DeletionPropagation"),
        "dryRun": SliceOf(STRING), "ignoreStoreReadErrorWithClusterBreakingPotential": BOOL})
