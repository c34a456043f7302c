"""What the CEL engine reads of a schema: the :class:`Schema` and :class:`RuleEntry` protocols.

Kubernetes keeps its CEL library apart from the structural-schema model the same way: the
library states the ``common.Schema`` interface it needs, and apiextensions adapts its
``Structural`` to it. Here :class:`setpoint.schema.structural.Node` and
:class:`~setpoint.schema.structural.ValidationRule` satisfy these protocols as they are (no
adapter object is built), so :mod:`setpoint.cel` depends on nothing in :mod:`setpoint.schema`
while :mod:`setpoint.schema.celrules` hands it the schema nodes themselves.

:class:`PlainSchema` is the engine's own small implementation, for the nodes it adds to what a
schema declares (``apiVersion``, ``kind`` and ``metadata.name`` at a resource root).

Invariants: the protocols are read-only (the engine never writes to a schema node); a node is
identified by ``id()`` for caching, so callers keep a node alive while its rules are cached
(:class:`~setpoint.cel.compile.RuleCache` holds a reference itself).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


class RuleEntry(Protocol):
    """One ``x-kubernetes-validations`` entry as written in a schema."""

    @property
    def rule(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def message_expression(self) -> str: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def field_path(self) -> str: ...

    @property
    def optional_old_self(self) -> bool | None: ...


class Schema(Protocol):
    """One structural schema node, as far as CEL types and converts its values.

    Field names follow the JSON keywords in snake case; ``properties`` is ``None`` when absent
    or empty; ``additional_properties`` is ``None`` (absent), a boolean or a node, and
    ``additional_schema`` is that node or ``None``.
    """

    @property
    def type(self) -> str: ...

    @property
    def format(self) -> str: ...

    @property
    def nullable(self) -> bool: ...

    @property
    def int_or_string(self) -> bool: ...

    @property
    def embedded_resource(self) -> bool: ...

    @property
    def preserve_unknown_fields(self) -> bool: ...

    @property
    def properties(self) -> Mapping[str, Schema] | None: ...

    @property
    def additional_properties(self) -> bool | Schema | None: ...

    @property
    def additional_schema(self) -> Schema | None: ...

    @property
    def items(self) -> Schema | None: ...

    @property
    def list_type(self) -> str | None: ...

    @property
    def list_map_keys(self) -> Sequence[str]: ...

    @property
    def validations(self) -> Sequence[RuleEntry]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainSchema:
    """A :class:`Schema` built by the engine itself: a type, properties, nothing else."""

    type: str = ""
    properties: Mapping[str, Schema] | None = None
    format: str = ""
    nullable: bool = False
    int_or_string: bool = False
    embedded_resource: bool = False
    preserve_unknown_fields: bool = False
    additional_properties: bool | Schema | None = None
    items: Schema | None = None
    list_type: str | None = None
    list_map_keys: Sequence[str] = ()
    validations: Sequence[RuleEntry] = ()

    @property
    def additional_schema(self) -> Schema | None:
        ap = self.additional_properties
        return None if ap is None or isinstance(ap, bool) else ap
