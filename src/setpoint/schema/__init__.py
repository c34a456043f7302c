"""Structural-schema semantics of CustomResourceDefinitions: prune, default, validate, check.

Pure Python (no I/O): what Kubernetes' apiextensions-apiserver does with a CRD version's
``openAPIV3Schema``, with its messages and field paths. Compile once, use per request::

    schema = CompiledSchema.from_openapi(crd_version["schema"]["openAPIV3Schema"])
    warnings = schema.prune(obj)
    schema.default(obj)
    errors = schema.validate(obj)          # or schema.validate_update(obj, old)

``validate`` and ``validate_update`` include the CEL rules (``x-kubernetes-validations``).
Judge a schema when a CRD is written (CEL rules are compiled and type-checked there too)::

    errors = check_structural(openapi_v3_schema)

Modules: :mod:`~setpoint.schema.structural` (model), :mod:`~setpoint.schema.pruning`,
:mod:`~setpoint.schema.defaulting`, :mod:`~setpoint.schema.values` (value validation and
ratcheting) with :mod:`~setpoint.schema.keywords` and :mod:`~setpoint.schema.correlation`,
:mod:`~setpoint.schema.formats`, :mod:`~setpoint.schema.listtype`,
:mod:`~setpoint.schema.objectmeta` (embedded resources),
:mod:`~setpoint.schema.structuralcheck` (CRD-time checks) with
:mod:`~setpoint.schema.defaultcheck` and :mod:`~setpoint.schema.openapicheck`,
:mod:`~setpoint.schema.paths`, :mod:`~setpoint.schema.celrules` (where and when rules run).

Below it, and importing nothing from it: the CEL engine :mod:`setpoint.cel` (celrules hands
it the schema's nodes, which satisfy its :class:`~setpoint.cel.schemas.Schema` protocol), and
the Go semantics both share, :mod:`setpoint.apimachinery.goregexp` (``pattern`` and CEL
regular expressions as Go checks them, on RE2) and :mod:`setpoint.apimachinery.govalues`.
"""

from setpoint.schema.compiled import CompiledSchema
from setpoint.schema.structural import ValidationRule
from setpoint.schema.structuralcheck import check_structural

__all__ = ["CompiledSchema", "ValidationRule", "check_structural"]
