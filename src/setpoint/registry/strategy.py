"""Per-resource behaviour of the generic store: the hooks Kubernetes calls a *strategy*.

The :class:`~setpoint.registry.store.Store` calls, for every write, in this order::

    create: decode_error(obj, version)               -> a wrong-typed value (400)
            normalize(obj, version)                  -> prune + default (warnings)
            prepare_for_create(obj)                  -> server-owned fields
            prepare_requestor(obj, user)             -> who asked (CSRs)
            validate(obj, version)                   -> field errors (422)
    update: decode_error(new, version)
            normalize(new, version)
            prepare_for_update(new, old, subresource) -> keep what the endpoint may not change
            validate_update(new, old, version)

Objects reach the strategy in the *request* version; :meth:`Strategy.to_storage` and
:meth:`Strategy.from_storage` convert between it and the storage version. The base class
serves a single-version resource whose objects need no conversion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from setpoint.apimachinery import fields, gotypes, typed, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.apimachinery.metafields import OBJECT_META_FIELDS
from setpoint.auth.user import UserInfo
from setpoint.registry import table
from setpoint.registry.options import DeleteOptions
from setpoint.registry.resources import ResourceInfo, VersionInfo

Obj = dict[str, Any]



def prune_object_meta(obj: Obj) -> list[str]:
    """Drop unknown ``metadata`` fields; returns the pruned paths."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    unknown = sorted(k for k in meta if k not in OBJECT_META_FIELDS)
    for k in unknown:
        del meta[k]
    return [f"metadata.{k}" for k in unknown]


class Strategy:
    """Defaults for a plain, single-version, namespaced-or-not resource."""

    #: top-level fields an object may carry besides apiVersion, kind and metadata;
    #: ``None`` means anything (no pruning at the top level)
    known_fields: frozenset[str] | None = None
    #: objects have metadata.generation, bumped when anything but metadata/status changes
    uses_generation: bool = False
    #: a PUT without metadata.resourceVersion overwrites (ConfigMap, Secret) instead of 422
    allow_unconditional_update: bool = True
    #: bodies must name apiVersion and kind (custom resources); built-ins default them, as
    #: typed clients (V1ConfigMap, V1Lease) leave them out
    requires_type_meta: bool = False
    #: extra field selectors beyond metadata.name and metadata.namespace
    selectable_fields: tuple[str, ...] = ()
    #: a DELETE that removes the object answers with the object, not a Status (Kubernetes'
    #: ``ReturnDeletedObject``: Pods, Services)
    return_deleted_object: bool = False
    #: lists a strategic merge patch merges, by dotted path (see
    #: :data:`setpoint.apimachinery.patch.DEFAULT_MERGE_KEYS`, which is always included)
    merge_keys: Mapping[str, str] = {}
    #: whether PATCH takes a strategic merge patch (the built-in kinds; not custom resources,
    #: nor CustomResourceDefinitions, as kube-apiserver serves them)
    strategic_merge: bool = True

    def __init__(self, info: ResourceInfo) -> None:
        self.info = info
        self._go_types: dict[str, gotypes.GoType | None] = {}

    # --- decoding ------------------------------------------------------------------------

    def go_type(self, version: VersionInfo) -> gotypes.GoType | None:
        """The Go type a body of ``version`` decodes into (built-in kinds); ``None`` for
        bodies that are any JSON object (custom resources). Built once per version."""
        return None

    def decode_error(self, obj: Obj, version: VersionInfo) -> str | None:
        """Why ``obj`` would not decode into this kind's Go type, or ``None``."""
        if version.name not in self._go_types:
            self._go_types[version.name] = self.go_type(version)
        go_type = self._go_types[version.name]
        return None if go_type is None else gotypes.decode_error(obj, go_type)

    # --- conversion ----------------------------------------------------------------------

    def to_storage(self, obj: Obj, version: str) -> Obj:
        """Convert an object in ``version`` to the storage version (may mutate ``obj``)."""
        obj["apiVersion"] = self.info.api_version(self.info.storage_version.name)
        return obj

    def from_storage(self, obj: Obj, version: str) -> Obj:
        """A stored object as seen through ``version``; ``obj`` is shared (the watch cache's,
        or decoded from storage: its content is what storage holds at its resourceVersion)
        and so is the result: neither may be changed."""
        api_version = self.info.api_version(version)
        if obj.get("apiVersion") == api_version:
            return obj
        out = dict(obj)
        out["apiVersion"] = api_version
        return out

    def from_storage_owned(self, obj: Obj, version: str) -> Obj:
        """:meth:`from_storage` of an object the caller owns (one it just wrote or made),
        which a strategy may convert in place instead of copying (it need not)."""
        return self.from_storage(obj, version)

    # --- normalisation -------------------------------------------------------------------

    def prune(self, obj: Obj, version: VersionInfo) -> list[str]:
        """Drop unknown fields; returns their paths, sorted."""
        pruned = prune_object_meta(obj)
        if self.known_fields is not None:
            unknown = sorted(k for k in obj if k not in self.known_fields
                             and k not in ("apiVersion", "kind", "metadata"))
            for k in unknown:
                del obj[k]
            pruned.extend(unknown)
        return sorted(pruned)

    def default(self, obj: Obj, version: VersionInfo) -> None:
        """Fill in defaults (in place)."""

    # --- preparation ---------------------------------------------------------------------

    def has_status(self, version: VersionInfo) -> bool:
        return version.status

    def field_type(self, version: VersionInfo) -> typed.TypeSpec:
        """How objects merge under server-side apply and field ownership: ObjectMeta, the
        known top-level fields, and below them no schema (objects granular, lists atomic)
        except the lists of :attr:`merge_keys`, associative as in Kubernetes' schemas (so that
        an apply of the containers a create set conflicts with nothing)."""
        declared = {name: typed.DEDUCED for name in self.known_fields or ()}
        return typed.with_list_keys(typed.object_type(declared), self.merge_keys)

    def prepare_for_create(self, obj: Obj, version: VersionInfo) -> None:
        if self.has_status(version):
            obj.pop("status", None)
        if self.uses_generation:
            obj["metadata"]["generation"] = 1

    def prepare_requestor(self, obj: Obj, user: UserInfo | None) -> None:
        """Record who creates ``obj`` (in place), after :meth:`prepare_for_create`; ``user``
        is ``None`` for the server's own writes. Kinds that keep their requestor (a
        CertificateSigningRequest's ``spec.username``) set it here, never from the body."""

    def prepare_for_update(self, new: Obj, old: Obj, version: VersionInfo,
                           subresource: str) -> None:
        """Keep what this endpoint may not change; bump generation on spec changes."""
        if self.has_status(version):
            if subresource == "status":
                status = new.get("status")
                new.clear()
                new.update(deep_copy(old))
                if status is None:
                    new.pop("status", None)
                else:
                    new["status"] = status
            elif "status" in old:
                new["status"] = deep_copy(old["status"])
            else:
                new.pop("status", None)
        if self.uses_generation:
            generation = int(old.get("metadata", {}).get("generation") or 1)
            if self.spec_changed(new, old, version):
                generation += 1
            new["metadata"]["generation"] = generation

    def spec_changed(self, new: Obj, old: Obj, version: VersionInfo) -> bool:
        ignored = {"metadata", "apiVersion", "kind"}
        if self.has_status(version):
            ignored.add("status")
        keys = (set(new) | set(old)) - ignored
        return any(new.get(k) != old.get(k) for k in keys)

    # --- validation ----------------------------------------------------------------------

    def validate(self, obj: Obj, version: VersionInfo) -> list[FieldError]:
        # a kind that keeps the default name rule names none, so that plain metadata takes
        # validate_object_meta's quick way (whose default rule is the same)
        name_check = None if type(self).check_name is Strategy.check_name else self.check_name
        return validation.validate_object_meta(obj.get("metadata") or {},
                                               namespaced=self.info.namespaced,
                                               name_check=name_check)

    def check_name(self, name: str) -> list[str]:
        """What is wrong with ``name`` for this kind (DNS-1123 subdomains, by default)."""
        return validation.is_dns1123_subdomain(name)

    def validate_update(self, new: Obj, old: Obj, version: VersionInfo) -> list[FieldError]:
        errs = self.validate(new, version)
        errs.extend(validation.validate_object_meta_update(new.get("metadata") or {},
                                                           old.get("metadata") or {}))
        return errs

    def validate_status_update(self, new: Obj, old: Obj,
                               version: VersionInfo) -> list[FieldError]:
        """Validation of a write through ``/status`` (the rest is the old object's)."""
        return self.validate_update(new, old, version)

    def validate_subresource_update(self, new: Obj, old: Obj, version: VersionInfo,
                                    subresource: str) -> list[FieldError]:
        """Validation of an update through ``subresource`` (``""`` for the object itself)."""
        if subresource == "status":
            return self.validate_status_update(new, old, version)
        return self.validate_update(new, old, version)

    def check_delete(self, obj: Obj) -> None:
        """Raise an ApiError when ``obj`` may not be deleted at all."""

    def blocks_deletion(self, obj: Obj) -> bool:
        """Whether something besides ``metadata.finalizers`` keeps ``obj`` once it is marked
        for deletion (a Namespace's ``spec.finalizers``). The store removes a marked object
        only when it has no finalizers and this is False."""
        return False

    def grace_period(self, obj: Obj, opts: DeleteOptions) -> int | None:
        """The seconds a DELETE with ``opts`` leaves ``obj`` to finish (Pods), or ``None`` for
        kinds without graceful deletion. With a positive period the store marks the object
        (``deletionTimestamp`` = now + period) instead of removing it, and
        :meth:`blocks_deletion` should hold it until a DELETE with period 0."""
        return None

    def prepare_for_delete(self, obj: Obj) -> None:
        """Change ``obj`` (in place) as it is marked for deletion (a Namespace's phase)."""

    def scale_selector(self, obj: Obj) -> str | None:
        """The ``status.selector`` of the Scale of ``obj`` (built-in kinds, whose selector is
        an object, print it in the query syntax); ``None``: the version's scale path."""
        return None

    # --- presentation --------------------------------------------------------------------

    def field_labels(self, obj: Obj) -> dict[str, str]:
        """The values field selectors match against."""
        meta = obj.get("metadata") or {}
        labels = {"metadata.name": str(meta.get("name", ""))}
        if self.info.namespaced:
            labels["metadata.namespace"] = str(meta.get("namespace", ""))
        return labels

    def field_labels_in(self, obj: Obj, version: str) -> dict[str, str]:
        """The values field selectors of a request in ``version`` match against, for ``obj``
        as stored (kinds whose fields differ between versions convert it first)."""
        return self.field_labels(obj)

    def supported_field_selectors(self, version: VersionInfo) -> tuple[str, ...]:
        base: tuple[str, ...] = ("metadata.name",)
        if self.info.namespaced:
            base += ("metadata.namespace",)
        return base + self.selectable_fields

    def columns(self, version: VersionInfo) -> list[table.Column]:
        return [table.name_column(), table.age_column()]

    def warnings(self, version: VersionInfo) -> list[str]:
        if version.deprecated:
            return [version.deprecation_warning or
                    f"{self.info.api_version(version.name)} {self.info.kind} is deprecated"]
        return []


def meta_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def require_fields(obj: Mapping[str, Any], *names: str) -> list[FieldError]:
    return [fields.required(FieldPath.root(n)) for n in names if n not in obj]
