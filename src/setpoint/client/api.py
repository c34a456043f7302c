"""The async client: CRUD, patch, list paging and watch on any resource, as plain dicts.

Addressing: every call takes a *resource* that is either an explicit
:class:`~setpoint.client.discovery.ResourceRef`, an ``(apiVersion, kind)`` pair resolved through
discovery, or a name kubectl would accept (``"configmaps"``, ``"cm"``,
``"widgets.example.com"``). Calls that take an object (``create``, ``update``, ``apply``)
resolve it from the object's own ``apiVersion`` and ``kind`` unless ``resource=`` is given.

Namespaces: for a namespaced resource, the namespace is the ``namespace`` argument, else the
object's ``metadata.namespace`` (object calls), else the configuration's default namespace.
:data:`ALL_NAMESPACES` (``"*"``) addresses every namespace and is accepted by collection
calls (``list``, ``list_pages``, ``list_all``, ``watch``, ``delete_collection``) only. For
cluster-scoped resources the namespace is ignored.

Failures are :mod:`setpoint.apimachinery.errors` exceptions (see
:mod:`setpoint.client.transport`); an unknown resource is
:class:`~setpoint.client.discovery.NoMatchError`; a malformed call (no name, apply without a
field manager) is ``ValueError`` before anything is sent.

Invariants: objects passed in are never mutated; items of a list response and watched
objects carry ``apiVersion`` and ``kind`` (filled in when a server omits them, as real
Kubernetes does for built-in list items). The client holds no global state; each instance
owns one connection pool, closed by :meth:`Client.close` or ``async with``.

Non-guarantees: no retries, no client-side rate limiting, no caching of objects (that is the
runtime's informer), JSON only (no protobuf, no Table).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson

from setpoint.apimachinery import clock as clocks
from setpoint.apimachinery import errors
from setpoint.client import config as cfg
from setpoint.client import discovery as disc
from setpoint.client import transport
from setpoint.client import watch as watching

if TYPE_CHECKING:
    import aiohttp

Obj = dict[str, Any]
#: a JSON patch is a list of operations; every other patch is an object
PatchBody = Mapping[str, Any] | list[Any]
ResourceLike = disc.ResourceRef | tuple[str, str] | str
PropagationPolicy = Literal["Foreground", "Background", "Orphan"]

#: the namespace argument that addresses every namespace (collection calls only)
ALL_NAMESPACES: Final = "*"

#: the default ``Accept`` header
JSON: Final = "application/json"

#: kubectl's page size
DEFAULT_PAGE_SIZE: Final = 500


class PatchType(enum.StrEnum):
    """The patch formats, by their Content-Type."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


def _params(**values: str | int | bool | None) -> dict[str, str]:
    """Query parameters with Kubernetes' spelling; ``None`` and ``False`` are left out."""
    params: dict[str, str] = {}
    for key, value in values.items():
        if value is None or value is False:
            continue
        params[key] = "true" if value is True else str(value)
    return params


def _name_of(obj: Mapping[str, Any]) -> str:
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("the object has no metadata.name")
    return name


def _fill_items(result: Any, ref: disc.ResourceRef) -> Any:
    if isinstance(result, dict) and isinstance(result.get("items"), list):
        for item in result["items"]:
            if isinstance(item, dict):
                item.setdefault("apiVersion", ref.api_version)
                item.setdefault("kind", ref.kind)
    return result


def delete_options(*, propagation_policy: PropagationPolicy | None = None,
                   grace_period_seconds: int | None = None, uid: str | None = None,
                   resource_version: str | None = None, dry_run: bool = False) -> Obj:
    """A ``DeleteOptions`` body; ``uid`` and ``resource_version`` are preconditions."""
    body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
    if propagation_policy is not None:
        body["propagationPolicy"] = propagation_policy
    if grace_period_seconds is not None:
        if grace_period_seconds < 0:
            raise ValueError("grace_period_seconds must not be negative")
        body["gracePeriodSeconds"] = grace_period_seconds
    preconditions = {key: value for key, value in (("uid", uid),
                                                   ("resourceVersion", resource_version))
                     if value is not None}
    if preconditions:
        body["preconditions"] = preconditions
    if dry_run:
        body["dryRun"] = ["All"]
    return body


class Client:
    """An async Kubernetes API client; see the module docstring for addressing rules.

    ``session`` injects an aiohttp session (e.g. a test server's); the caller then owns it.
    """

    def __init__(self, config: cfg.ClientConfig, *, session: aiohttp.ClientSession | None = None,
                 clock: clocks.Clock | None = None, discovery_concurrency: int = 8) -> None:
        self.config = config
        self._transport = transport.Transport(config, session=session, clock=clock)
        self.discovery = disc.Discovery(self._get, concurrency=discovery_concurrency)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool (open watches break). Idempotent."""
        await self._transport.close()

    # --- plumbing -----------------------------------------------------------------------

    async def _get(self, path: str) -> Any:
        return await self._transport.request("GET", path)

    async def request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                      body: Any = None, content_type: str = "application/json",
                      accept: str | None = None) -> Any:
        """Send any request to the server; ``body`` is JSON-encoded unless it is bytes.

        ``accept`` replaces the ``Accept`` header (default ``application/json``), e.g. to ask
        for ``application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io`` or a
        ``Table``; the response must still be JSON.
        """
        data = body if body is None or isinstance(body, bytes) else orjson.dumps(body)
        return await self._transport.request(method, path, params=params, body=data,
                                             content_type=content_type if data else None,
                                             accept=accept or JSON)

    async def resolve(self, resource: ResourceLike) -> disc.ResourceRef:
        """The :class:`ResourceRef` a resource argument names."""
        if isinstance(resource, disc.ResourceRef):
            return resource
        if isinstance(resource, tuple):
            api_version, kind = resource
            return await self.discovery.resolve(api_version, kind)
        return await self.discovery.find(resource)

    async def _resolve_object(self, obj: Mapping[str, Any],
                              resource: ResourceLike | None) -> disc.ResourceRef:
        if resource is not None:
            return await self.resolve(resource)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise ValueError("the object needs apiVersion and kind (or pass resource=)")
        return await self.discovery.resolve(api_version, kind)

    def _namespace(self, ref: disc.ResourceRef, namespace: str | None,
                   obj: Mapping[str, Any] | None = None, *,
                   collection: bool = False) -> str | None:
        if not ref.namespaced:
            return None
        if namespace == ALL_NAMESPACES:
            if collection:
                return None
            raise ValueError("this call needs one namespace, not ALL_NAMESPACES")
        if namespace:
            return namespace
        if obj is not None:
            own = (obj.get("metadata") or {}).get("namespace")
            if isinstance(own, str) and own:
                return own
        return self.config.namespace

    # --- reads --------------------------------------------------------------------------

    async def version(self) -> Obj:
        """The server's ``/version`` document."""
        result: Obj = await self._get("/version")
        return result

    async def get(self, resource: ResourceLike, name: str, *, namespace: str | None = None,
                  subresource: str | None = None) -> Obj:
        """One object (or one subresource of it, e.g. ``"status"`` or ``"scale"``)."""
        ref = await self.resolve(resource)
        path = ref.path(namespace=self._namespace(ref, namespace), name=name,
                        subresource=subresource)
        result: Obj = await self._get(path)
        return result

    async def list(self, resource: ResourceLike, *, namespace: str | None = None,
                   label_selector: str | None = None, field_selector: str | None = None,
                   limit: int | None = None, continue_: str | None = None,
                   resource_version: str | None = None,
                   resource_version_match: str | None = None,
                   timeout_seconds: int | None = None) -> Obj:
        """One list response (one page when ``limit`` is given; see ``metadata.continue``)."""
        ref = await self.resolve(resource)
        path = ref.path(namespace=self._namespace(ref, namespace, collection=True))
        params = _params(labelSelector=label_selector, fieldSelector=field_selector,
                         limit=limit, resourceVersion=resource_version,
                         resourceVersionMatch=resource_version_match,
                         timeoutSeconds=timeout_seconds)
        if continue_:
            params["continue"] = continue_
        result: Obj = _fill_items(await self._transport.request("GET", path, params=params),
                                  ref)
        return result

    async def list_pages(self, resource: ResourceLike, *, namespace: str | None = None,
                         label_selector: str | None = None, field_selector: str | None = None,
                         limit: int = DEFAULT_PAGE_SIZE,
                         resource_version: str | None = None) -> AsyncIterator[Obj]:
        """Every page of a list, following ``continue`` tokens; pages share one snapshot.

        An expired continue token raises ``Expired`` (410): start again, or use
        :meth:`list_all`, which falls back to one unpaged list.
        """
        if limit < 1:
            raise ValueError("limit must be positive")
        token: str | None = None
        while True:
            page = await self.list(resource, namespace=namespace, label_selector=label_selector,
                                   field_selector=field_selector, limit=limit, continue_=token,
                                   resource_version=None if token else resource_version)
            yield page
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return

    async def list_all(self, resource: ResourceLike, *, namespace: str | None = None,
                       label_selector: str | None = None, field_selector: str | None = None,
                       limit: int = DEFAULT_PAGE_SIZE,
                       resource_version: str | None = None) -> Obj:
        """All items in one list object, fetched in pages of ``limit``.

        ``metadata.resourceVersion`` is the snapshot's, the point to start a watch from. When
        a continue token expires mid-way, the whole list is read again without paging
        (client-go's pager does the same).
        """
        items: list[Any] = []
        first: Obj | None = None
        last: Obj | None = None
        try:
            async for page in self.list_pages(resource, namespace=namespace,
                                              label_selector=label_selector,
                                              field_selector=field_selector, limit=limit,
                                              resource_version=resource_version):
                first = first or page
                last = page
                items.extend(page.get("items") or [])
        except errors.Gone:
            if first is None:
                raise
            return await self.list(resource, namespace=namespace,
                                   label_selector=label_selector,
                                   field_selector=field_selector)
        if first is None or last is None:  # pragma: no cover - list_pages yields at least once
            raise AssertionError("no list page")
        metadata = dict(last.get("metadata") or {})
        metadata.pop("continue", None)
        metadata.pop("remainingItemCount", None)
        return {"apiVersion": first.get("apiVersion", "v1"), "kind": first.get("kind", "List"),
                "metadata": metadata, "items": items}

    # --- writes -------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any], *, resource: ResourceLike | None = None,
                     namespace: str | None = None, dry_run: bool = False,
                     field_manager: str | None = None) -> Obj:
        """POST ``obj`` to its collection; returns the stored object."""
        ref = await self._resolve_object(obj, resource)
        path = ref.path(namespace=self._namespace(ref, namespace, obj))
        result: Obj = await self.request(
            "POST", path, body=obj,
            params=_params(dryRun="All" if dry_run else None, fieldManager=field_manager))
        return result

    async def update(self, obj: Mapping[str, Any], *, resource: ResourceLike | None = None,
                     namespace: str | None = None, subresource: str | None = None,
                     dry_run: bool = False, field_manager: str | None = None) -> Obj:
        """PUT ``obj`` (``metadata.resourceVersion`` makes it conditional: 409 when stale)."""
        ref = await self._resolve_object(obj, resource)
        path = ref.path(namespace=self._namespace(ref, namespace, obj), name=_name_of(obj),
                        subresource=subresource)
        result: Obj = await self.request(
            "PUT", path, body=obj,
            params=_params(dryRun="All" if dry_run else None, fieldManager=field_manager))
        return result

    async def update_status(self, obj: Mapping[str, Any], *,
                            resource: ResourceLike | None = None, namespace: str | None = None,
                            dry_run: bool = False, field_manager: str | None = None) -> Obj:
        """PUT ``obj`` to its ``/status`` subresource (only ``.status`` is written)."""
        return await self.update(obj, resource=resource, namespace=namespace,
                                 subresource="status", dry_run=dry_run,
                                 field_manager=field_manager)

    async def patch(self, resource: ResourceLike, name: str, patch: PatchBody, *,
                    namespace: str | None = None, patch_type: PatchType = PatchType.MERGE,
                    subresource: str | None = None, field_manager: str | None = None,
                    force: bool | None = None, dry_run: bool = False) -> Obj:
        """PATCH one object. ``APPLY`` needs ``field_manager``; ``force`` is for ``APPLY``."""
        if patch_type is PatchType.APPLY and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        if force is not None and patch_type is not PatchType.APPLY:
            raise ValueError("force applies to server-side apply only")
        if (patch_type is PatchType.JSON) != isinstance(patch, list):
            raise ValueError("a JSON patch is a list of operations; other patches are objects")
        ref = await self.resolve(resource)
        path = ref.path(namespace=self._namespace(ref, namespace), name=name,
                        subresource=subresource)
        params = _params(dryRun="All" if dry_run else None, fieldManager=field_manager,
                         force=force)
        if force is False:
            params["force"] = "false"
        result: Obj = await self.request("PATCH", path, body=patch, params=params,
                                         content_type=patch_type.value)
        return result

    async def patch_status(self, resource: ResourceLike, name: str, patch: PatchBody, *,
                           namespace: str | None = None,
                           patch_type: PatchType = PatchType.MERGE,
                           field_manager: str | None = None, force: bool | None = None,
                           dry_run: bool = False) -> Obj:
        """PATCH the ``/status`` subresource of one object."""
        return await self.patch(resource, name, patch, namespace=namespace,
                                patch_type=patch_type, subresource="status",
                                field_manager=field_manager, force=force, dry_run=dry_run)

    async def apply(self, obj: Mapping[str, Any], *, field_manager: str, force: bool = False,
                    resource: ResourceLike | None = None, namespace: str | None = None,
                    subresource: str | None = None, dry_run: bool = False) -> Obj:
        """Server-side apply of ``obj`` (created when missing) as ``field_manager``."""
        ref = await self._resolve_object(obj, resource)
        return await self.patch(ref, _name_of(obj), dict(obj),
                                namespace=self._namespace(ref, namespace, obj),
                                patch_type=PatchType.APPLY, subresource=subresource,
                                field_manager=field_manager, force=force, dry_run=dry_run)

    async def delete(self, resource: ResourceLike, name: str, *, namespace: str | None = None,
                     propagation_policy: PropagationPolicy | None = None,
                     grace_period_seconds: int | None = None, uid: str | None = None,
                     resource_version: str | None = None, dry_run: bool = False) -> Obj:
        """DELETE one object; returns what the server returns (the object or a Status).

        ``uid`` and ``resource_version`` are preconditions (409 when they do not hold).
        """
        ref = await self.resolve(resource)
        path = ref.path(namespace=self._namespace(ref, namespace), name=name)
        body = delete_options(propagation_policy=propagation_policy,
                              grace_period_seconds=grace_period_seconds, uid=uid,
                              resource_version=resource_version, dry_run=dry_run)
        result: Obj = await self.request(
            "DELETE", path, body=body, params=_params(dryRun="All" if dry_run else None))
        return result

    async def delete_collection(self, resource: ResourceLike, *,
                                namespace: str | None = None,
                                label_selector: str | None = None,
                                field_selector: str | None = None,
                                propagation_policy: PropagationPolicy | None = None,
                                grace_period_seconds: int | None = None,
                                dry_run: bool = False) -> Obj:
        """DELETE every object that the selectors match in one namespace (or cluster-wide)."""
        ref = await self.resolve(resource)
        path = ref.path(namespace=self._namespace(ref, namespace, collection=True))
        body = delete_options(propagation_policy=propagation_policy,
                              grace_period_seconds=grace_period_seconds, dry_run=dry_run)
        result: Obj = _fill_items(await self.request(
            "DELETE", path, body=body,
            params=_params(labelSelector=label_selector, fieldSelector=field_selector,
                           dryRun="All" if dry_run else None)), ref)
        return result

    # --- watch --------------------------------------------------------------------------

    def watch(self, resource: ResourceLike, *, namespace: str | None = None,
              label_selector: str | None = None, field_selector: str | None = None,
              resource_version: str | None = None, allow_bookmarks: bool = True,
              timeout_seconds: int | None = None,
              inactivity_timeout: float | None = None,
              accept: str | None = None) -> watching.Watch:
        """A streaming watch; use as ``async with client.watch(...) as events``.

        ``resource_version`` unset or ``"0"`` starts with synthetic ADDED events for what
        exists; a list's resourceVersion gives exactly the changes after that list. The
        request is sent when the ``async with`` block is entered (or on first iteration).
        ``accept`` replaces the ``Accept`` header, e.g.
        ``application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io`` for events that carry
        only metadata (their objects then keep the ``kind`` the server gives them).
        """
        async def opener() -> tuple[transport.BodyStream, str, str]:
            ref = await self.resolve(resource)
            path = ref.path(namespace=self._namespace(ref, namespace, collection=True))
            params = _params(watch=True, labelSelector=label_selector,
                             fieldSelector=field_selector, resourceVersion=resource_version,
                             allowWatchBookmarks=allow_bookmarks,
                             timeoutSeconds=timeout_seconds)
            response = await self._transport.stream("GET", path, params=params,
                                                    accept=accept or JSON)
            return response, ref.api_version, ref.kind

        return watching.Watch(
            opener, inactivity_timeout=inactivity_timeout or self.config.watch_inactivity_timeout)
