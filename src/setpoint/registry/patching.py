"""PATCH: which patch types a resource takes, applying a patch, and server-side apply.

* :func:`check_patch_type` is the one choice of patch types, for objects and their ``/scale``
  alike: JSON patch, merge patch and apply (YAML, only with a ``fieldManager``) for every
  resource, strategic merge patch for the built-in kinds (``Strategy.strategic_merge``);
  anything else (apply in CBOR included: setpoint does not decode CBOR) is a 415 listing
  what the resource takes, as kube-apiserver lists it.
* :func:`apply_patch` computes the patched object from a base (pure: the base is the caller's
  copy, the body is not changed). A malformed JSON patch is 422 on ``patch``, as is one
  whose copies add more than 3 MiB or whose operations move more than 50 million array
  elements (:func:`~setpoint.apimachinery.patch.json_patch`), or whose copies nest the
  object deeper than can be walked; one of more than 10,000
  operations 413 (kube-apiserver's bounds but the last); any other malformed patch 400; a
  result that is not an object 400.
* :meth:`Patching.patch` patches the current object and writes it back through the
  update path: retried on a fresh read when it loses its compare-and-swap (a patch is
  unconditional unless it sets a resourceVersion itself, which is then a precondition).
  An apply to an object that does not exist creates it.
* Server-side apply takes a configuration that fits the schema only: an unknown field is a
  400 whatever the field validation (``field not declared in schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from setpoint.apimachinery import errors, patch
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry.options import WriteOptions, WriteResult
from setpoint.registry.resources import VersionInfo
from setpoint.registry.storebase import Obj, StaleStart, _check_name, start_again
from setpoint.registry.writing import Writes
from setpoint.storage import interface as st

PATCH_JSON: Final = "application/json-patch+json"
PATCH_MERGE: Final = "application/merge-patch+json"
PATCH_STRATEGIC: Final = "application/strategic-merge-patch+json"
PATCH_APPLY: Final = "application/apply-patch+yaml"
PATCH_APPLY_CBOR: Final = "application/apply-patch+cbor"

#: the patch types every resource takes, in the order a 415 lists them
_SUPPORTED: Final = (PATCH_JSON, PATCH_MERGE, PATCH_APPLY)
#: ... and those of a resource that takes strategic merge patches
_SUPPORTED_STRATEGIC: Final = (PATCH_JSON, PATCH_MERGE, PATCH_STRATEGIC, PATCH_APPLY)

#: operations one JSON patch may hold (kube-apiserver's ``maxJSONPatchOperations``; 413
#: beyond): a body of a few MiB holds tens of thousands
MAX_JSON_PATCH_OPERATIONS: Final = 10_000


def check_patch_type(patch_type: str, *, strategic: bool, field_manager: str) -> None:
    """Refuse a patch type the resource does not take (415, listing those it takes) and
    apply without a ``fieldManager`` (400)."""
    supported = _SUPPORTED_STRATEGIC if strategic else _SUPPORTED
    if patch_type not in supported:
        raise errors.unsupported_patch_type(supported)
    if patch_type == PATCH_APPLY and not field_manager:
        raise errors.BadRequest("fieldManager is required for apply requests")


def apply_patch(base: Obj, patch_type: str, body: Any, *, name: str, group: str,
                resource: str, merge_keys: Mapping[str, str]) -> Obj:
    """``base`` patched with ``body`` of ``patch_type`` (see the module invariants)."""
    try:
        if patch_type == PATCH_JSON:
            if not isinstance(body, list):
                raise errors.BadRequest(
                    "the body of a json-patch must be a JSON array of operations, got "
                    f"{json_type(body)}")
            if len(body) > MAX_JSON_PATCH_OPERATIONS:
                raise errors.RequestEntityTooLarge(
                    "The allowed maximum operations in a JSON patch is "
                    f"{MAX_JSON_PATCH_OPERATIONS}, got {len(body)}")
            result = patch.json_patch(base, body)
        elif patch_type in (PATCH_MERGE, PATCH_APPLY):
            if not isinstance(body, dict):
                raise errors.BadRequest(
                    f"the body of a {'merge' if patch_type == PATCH_MERGE else 'apply'} "
                    f"patch must be a JSON object, got {json_type(body)}")
            result = patch.merge_patch(base, body)
        elif patch_type == PATCH_STRATEGIC:
            if not isinstance(body, dict):
                raise errors.BadRequest(
                    "the body of a strategic merge patch must be a JSON object, got "
                    f"{json_type(body)}")
            result = patch.strategic_merge_patch(base, body, merge_keys=merge_keys)
        else:
            raise errors.unsupported_patch_type(_SUPPORTED)
    except patch.PatchError as e:
        if patch_type == PATCH_JSON:
            raise errors.Invalid(
                "the server rejected our request due to an error in our request",
                details={"name": name, "group": group, "kind": resource,
                         "causes": [{"reason": "FieldValueInvalid", "message": str(e),
                                     "field": "patch"}]}) from e
        raise errors.BadRequest(str(e)) from e
    if not isinstance(result, dict):
        raise errors.BadRequest("the patched object must be a JSON object")
    return result


def json_type(value: Any) -> str:
    """How an error message names the JSON type of ``value``."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return "a scalar"


class Patching(Writes):
    """PATCH and server-side apply of one resource's objects."""

    def check_patch_type(self, patch_type: str, opts: WriteOptions) -> None:
        """:func:`check_patch_type` for this resource: what a PATCH checks before its body
        is read."""
        check_patch_type(patch_type, strategic=self.strategy.strategic_merge,
                         field_manager=opts.field_manager)

    async def patch(self, namespace: str | None, name: str, patch_type: str, body: Any,
                    version_name: str, opts: WriteOptions, subresource: str = "") -> WriteResult:
        version = self._version(version_name)
        self.check_patch_type(patch_type, opts)
        async with self._writes.hold(self.info.key(namespace, name)):
            async for attempt in self._attempts():
                try:
                    kv, current, cached = await self._start(namespace, name, attempt)
                except errors.NotFound:
                    if patch_type == PATCH_APPLY and not subresource:
                        try:
                            return await self._apply_create(namespace, name, body, version, opts)
                        except errors.AlreadyExists:
                            continue  # created meanwhile: apply to what is there now
                    raise
                try:
                    return await self._patch_once(kv, current, namespace, name, patch_type,
                                                  body, version, opts, subresource, cached)
                except st.RevisionConflict:
                    continue
                except (errors.ApiError, StaleStart) as e:
                    if start_again(e, cached):
                        continue  # computed from the cache's copy: again from storage
                    raise
            raise self._conflict(name)

    async def _patch_once(self, kv: st.KeyValue, current: Obj, namespace: str | None,
                          name: str, patch_type: str, body: Any, version: VersionInfo,
                          opts: WriteOptions, subresource: str, cached: bool) -> WriteResult:
        """One attempt of :meth:`patch`, from ``current`` at ``kv``'s revision."""
        base = deep_copy(await self._output(current, version))
        applying = patch_type == PATCH_APPLY
        if applying:
            patched = self._server_side_apply(namespace, base, body, name, version, opts,
                                              subresource)
        else:
            patched = apply_patch(base, patch_type, body, name=name,
                                  group=self.info.group, resource=self.info.resource,
                                  merge_keys=self._merge_keys)
        if isinstance(patched, dict):
            self._check_depth(patched, name, current)
        meta = self._check_type(patched, version, "patch")
        _check_name(meta, name)
        # The patched object carries the resourceVersion it was computed from, unless the
        # patch set one: a different one is the client's precondition, and fails now. The
        # same one may be the client's too; when the write loses its compare-and-swap, the
        # next attempt patches the newer object, and only a resourceVersion the patch itself
        # set still differs then (Kubernetes: a patch is unconditional unless it names a
        # resourceVersion).
        precondition = meta.get("resourceVersion")
        if precondition and self._body_revision(precondition, name) != kv.mod_revision:
            raise self._conflict(name)
        self._check_namespace(meta, namespace)
        warnings = self.strategy.warnings(version)
        self._normalize(patched, version, opts, warnings, is_patch=True)
        return await self._write_update(kv, current, patched, version, opts, subresource,
                                        warnings, applied=applying, cached=cached)

    def _server_side_apply(self, namespace: str | None, live: Obj | None, body: Any,
                           name: str, version: VersionInfo, opts: WriteOptions,
                           subresource: str) -> Obj:
        """The object an apply of ``body`` makes of ``live`` (None when it creates).

        A configuration must fit the schema: an unknown field is a 400 whatever the field
        validation, as Kubernetes cannot type it (``field not declared in schema``)."""
        if not isinstance(body, dict):
            raise errors.BadRequest(
                f"the body of an apply patch must be a JSON object, got {json_type(body)}")
        config = deep_copy(body)
        meta = self._check_type(config, version, "apply",
                                f"{namespace}/{name}" if namespace else name)
        if meta.get("name") not in (None, name):
            raise errors.BadRequest(
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({name})")
        meta["name"] = name
        pruned = self.strategy.prune(config, version)
        if pruned:
            paths = [f".{p}: field not declared in schema" for p in pruned]
            raise errors.BadRequest(
                f"failed to create typed patch object ({namespace + '/' if namespace else ''}"
                f"{name}; {self.info.group}/{version.name}, Kind={self.info.kind}): "
                + (paths[0] if len(paths) == 1 else "errors:\n  " + "\n  ".join(paths)))
        return self._fields(version).apply(live, config, opts.field_manager, self._now(),
                                           force=opts.force, subresource=subresource)

    async def _apply_create(self, namespace: str | None, name: str, body: Any,
                            version: VersionInfo, opts: WriteOptions) -> WriteResult:
        obj = self._server_side_apply(namespace, None, body, name, version, opts, "")
        return await self.create(namespace, obj, version.name, opts, applied=True)
