"""A strategy for built-in kinds whose Go types come from the protobuf tables.

Decoding refuses values of the wrong type as Go would, and pruning drops unknown fields at
every depth (not only at the top, as the base :class:`Strategy` does), with the paths strict
field validation reports (``unknown field "spec.containers[0].colour"``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from setpoint.apimachinery import gotypes
from setpoint.registry import gotables
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.strategy import Strategy, prune_object_meta

Obj = dict[str, Any]


class TypedStrategy(Strategy):
    """Subclasses name their kind's protobuf message by ``type_key`` (apiVersion, kind)."""

    type_key: ClassVar[tuple[str, str]]

    def __init__(self, info: ResourceInfo) -> None:
        super().__init__(info)
        self._type: gotypes.Struct | None = None

    @property
    def kind_type(self) -> gotypes.Struct:
        """The kind's Go type, built on first use (the tables load then, not at start-up)."""
        if self._type is None:
            self._type = gotables.kind_type(*self.type_key)
        return self._type

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        return self.kind_type

    def prune(self, obj: Obj, version: VersionInfo) -> list[str]:
        pruned = prune_object_meta(obj)
        pruned.extend(gotables.prune(obj, self.kind_type))
        return sorted(pruned)
