"""What a served resource is: names, scope, verbs, versions and subresources.

A :class:`ResourceInfo` describes one resource (``books.example.com``) across all the versions
it is served in; one :class:`~setpoint.registry.store.Store` holds its objects, always in the
storage version. Storage keys are ``/registry/<group or core>/<resource>/<namespace>/<name>``
(cluster-scoped: no namespace segment), so that a prefix selects one resource, one namespace
or one object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ScaleSpec:
    """Where the ``/scale`` subresource finds replicas in the object (dotted paths)."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None


@dataclass(frozen=True, slots=True)
class SubresourceInfo:
    """A subresource besides status and scale (``namespaces/finalize``,
    ``serviceaccounts/token``): its verbs, and the kind it takes and answers when that is not
    the resource's own (TokenRequest in ``authentication.k8s.io/v1``)."""

    name: str
    verbs: tuple[str, ...] = ("update",)
    kind: str | None = None
    group: str | None = None
    version: str | None = None


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    format: str = ""
    description: str = ""
    priority: int = 0


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One served version of a resource."""

    name: str
    served: bool = True
    storage: bool = False
    deprecated: bool = False
    deprecation_warning: str | None = None
    status: bool = False
    scale: ScaleSpec | None = None
    printer_columns: tuple[PrinterColumn, ...] = ()
    schema: dict[str, Any] | None = None
    selectable_fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """A resource and every version it is served in."""

    group: str
    resource: str
    kind: str
    singular: str
    namespaced: bool
    versions: tuple[VersionInfo, ...]
    list_kind: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    #: store objects under another group's keys (events.k8s.io Events live with core Events)
    storage_group: str | None = None
    #: subresources served besides status and scale (``namespaces/finalize``)
    extra_subresources: tuple[SubresourceInfo, ...] = ()

    def __post_init__(self) -> None:
        if not self.list_kind:
            object.__setattr__(self, "list_kind", self.kind + "List")
        if sum(1 for v in self.versions if v.storage) != 1:
            raise ValueError(f"{self.resource}: exactly one storage version is required")

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def storage_version(self) -> VersionInfo:
        return next(v for v in self.versions if v.storage)

    def version(self, name: str) -> VersionInfo | None:
        for v in self.versions:
            if v.name == name and v.served:
                return v
        return None

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def served_versions(self) -> tuple[VersionInfo, ...]:
        return tuple(v for v in self.versions if v.served)

    def prefix(self) -> str:
        """The storage prefix of every object of this resource (ends with ``/``)."""
        group = self.group if self.storage_group is None else self.storage_group
        return f"/registry/{group or 'core'}/{self.resource}/"

    def key(self, namespace: str | None, name: str) -> str:
        if self.namespaced:
            return f"{self.prefix()}{namespace}/{name}"
        return f"{self.prefix()}{name}"

    def namespace_prefix(self, namespace: str | None) -> str:
        """Prefix selecting the objects of one namespace (or all, for ``None``)."""
        if self.namespaced and namespace:
            return f"{self.prefix()}{namespace}/"
        return self.prefix()
