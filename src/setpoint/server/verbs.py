"""The verbs on resources: get, list, watch, create, update, patch, delete, deletecollection.

HTTP in, registry calls out. A handler parses the request (path, query, body, Accept),
calls the store, and shapes the answer (object, List, Table, PartialObjectMetadata).
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from setpoint.apimachinery import errors, fields, gotypes, selectors
from setpoint.apimachinery.clock import Clock
from setpoint.registry import actions, builtintypes, listbudget, table
from setpoint.registry.catalog import Catalog, Served
from setpoint.registry.fieldmanager import manager_from_user_agent
from setpoint.registry.options import (
    AdmissionSink,
    DeleteOptions,
    ListOptions,
    WatchOptions,
    WriteOptions,
)
from setpoint.registry.resources import ResourceInfo, VersionInfo
from setpoint.registry.store import PATCH_APPLY, Store
from setpoint.server import limits, negotiation, nodeproxy, responses, security, streaming
from setpoint.server.bodydecoding import BodyDecoder
from setpoint.server.request_info import RequestInfo
from setpoint.server.watchresponse import WatchConfig, serve_watch

Obj = dict[str, Any]


class ResourceHandler:
    def __init__(self, catalog: Catalog, clock: Clock, watch_config: WatchConfig,
                 lists: listbudget.ListBudget | None = None,
                 request_limits: limits.Limits | None = None, *,
                 pod_streams: nodeproxy.PodStreams | None = None,
                 bodies: BodyDecoder | None = None) -> None:
        self._catalog = catalog
        self._bodies = bodies or BodyDecoder()
        self._pod_streams = pod_streams
        self._clock = clock
        self._watch = watch_config
        self._lists = lists or listbudget.ListBudget()
        self._limits = request_limits or limits.Limits()
        self._delete_options_type = builtintypes.delete_options()

    def _no_route(self, ri: RequestInfo) -> errors.NotFound:
        """A path under an API version that names nothing served. kube-apiserver answers
        those of its built-in group versions with a bare NotFound Status, and the others with
        a plain-text ``404 page not found`` (which clients turn into the same Status with
        that text as its cause)."""
        if any(not s.custom for s in self._catalog.resources_in(ri.group, ri.version)):
            return errors.NotFound("the server could not find the requested resource")
        return errors.path_not_found()

    async def handle(self, request: web.Request, ri: RequestInfo) -> web.StreamResponse:
        served = self._catalog.lookup(ri.group, ri.version, ri.resource)
        if served is None:
            virtual = self._catalog.virtual(ri.group, ri.version, ri.resource)
            if virtual is not None:
                if virtual.read is not None and request.method in ("GET", "HEAD"):
                    return await self._virtual_read(request, virtual, virtual.read, ri)
                return await self._virtual_create(request, virtual, ri)
            raise self._no_route(ri)
        info = served.info
        version = info.version(ri.version)
        assert version is not None
        if ri.namespace is not None and not info.namespaced:
            raise self._no_route(ri)
        if ri.subresource in streaming.SUBRESOURCES and info.group == "" \
                and info.resource == "pods" and ri.name and ri.namespace \
                and self._pod_streams is not None:
            return await self._pod_streams.serve(request, ri.namespace, ri.name,
                                                 ri.subresource)
        if ri.subresource and ri.subresource not in subresources(info, version):
            if served.custom:
                # as kube-apiserver's custom resource handler: the object "is not found"
                raise errors.not_found(info.resource, info.group, ri.name)
            raise self._no_route(ri)
        if ri.name and info.namespaced and ri.namespace is None:
            raise self._no_route(ri)
        method = request.method
        if method == "POST" and ri.name and ri.subresource:
            action = self._catalog.subresource_action(info.group, info.resource,
                                                      ri.subresource)
            if action is not None:
                return await self._act(request, action, ri, self._body(request, served))
        if method == "GET":
            if ri.name:
                return await self._get(request, served, version, ri)
            if responses.parse_bool(request.query, "watch"):
                return await self._watch_collection(request, served, version, ri)
            return await self._list(request, served, version, ri)
        if method == "POST" and not ri.name:
            if info.namespaced and ri.namespace is None:
                raise errors.MethodNotAllowed(
                    "the server does not allow this method on the requested resource")
            return await self._create(request, served, version, ri)
        if method == "PUT" and ri.name:
            return await self._update(request, served, version, ri)
        if method == "PATCH" and ri.name:
            return await self._patch(request, served, version, ri)
        if method == "DELETE":
            if ri.name and not ri.subresource:
                return await self._delete(request, served, version, ri)
            if not ri.name:
                return await self._delete_collection(request, served, version, ri)
        raise errors.MethodNotAllowed(
            "the server does not allow this method on the requested resource")

    # --- reads ---------------------------------------------------------------------------

    async def _get(self, request: web.Request, served: Served, version: VersionInfo,
                   ri: RequestInfo) -> web.StreamResponse:
        output = negotiation.choose(negotiation.parse_accept(request.headers.get("Accept")),
                                    allow_table=True, allow_partial=True)
        store = served.store
        if ri.subresource == "scale":
            return responses.json_response(await store.get_scale(
                ri.namespace, ri.name, version.name,
                resource_version=request.query.get("resourceVersion", "")))
        obj = await store.get(ri.namespace, ri.name, version.name,
                              resource_version=request.query.get("resourceVersion", ""))
        if output.kind == "table":
            tbl = table.build(store.strategy.columns(version), [obj], self._clock.now(),
                              include_object=request.query.get("includeObject", "Metadata"),
                              metadata={"resourceVersion": obj["metadata"].get(
                                  "resourceVersion", "")})
            return responses.json_response(tbl, content_type=output.content_type)
        if output.kind == "partial":
            return responses.json_response(table.partial_metadata(obj),
                                           content_type=output.content_type)
        return responses.json_response(obj, warnings=store.strategy.warnings(version))

    def _list_options(self, query: Mapping[str, str], store: Store,
                      version: VersionInfo) -> ListOptions:
        label = query.get("labelSelector")
        field = query.get("fieldSelector")
        field_sel = selectors.FieldSelector.parse(field) if field else None
        if field_sel is not None:
            selectors.check_supported(field_sel, store.strategy.supported_field_selectors(
                version))
        limit = responses.parse_int(query, "limit", 0) or 0
        # parsed by lists too, as ListOptions are: a malformed one is a 400 either way
        responses.parse_int(query, "timeoutSeconds")
        responses.parse_bool(query, "allowWatchBookmarks")
        responses.parse_bool(query, "sendInitialEvents")
        return ListOptions(
            label_selector=selectors.LabelSelector.parse(label) if label else None,
            field_selector=field_sel, limit=max(limit, 0),
            continue_token=query.get("continue", ""),
            resource_version=query.get("resourceVersion", ""),
            resource_version_match=query.get("resourceVersionMatch", ""))

    async def _list(self, request: web.Request, served: Served, version: VersionInfo,
                    ri: RequestInfo) -> web.StreamResponse:
        output = negotiation.choose(negotiation.parse_accept(request.headers.get("Accept")),
                                    allow_table=True, allow_partial=True)
        store = served.store
        opts = self._list_options(request.query, store, version)
        # the reservation covers the objects, their encoding and handing it to the socket
        async with self._lists.reserve(store.list_estimate(ri.namespace, opts)):
            return await self._send_list(request, store, version, ri, opts, output)

    async def _send_list(self, request: web.Request, store: Store, version: VersionInfo,
                         ri: RequestInfo, opts: ListOptions, output: negotiation.Output
                         ) -> web.StreamResponse:
        page = await store.list(ri.namespace, version.name, opts)
        meta: Obj = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        if output.kind == "table":
            tbl = table.build(store.strategy.columns(version), page.items, self._clock.now(),
                              include_object=request.query.get("includeObject", "Metadata"),
                              metadata=meta)
            response = responses.json_response(tbl, content_type=output.content_type)
            await response.prepare(request)
            await response.write_eof()
            return response
        if output.kind == "partial":
            head = {"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta}
            return await responses.stream_list(
                request, head, map(table.partial_metadata, page.items),
                content_type=output.content_type)
        head = {"apiVersion": store.info.api_version(version.name),
                "kind": store.info.list_kind, "metadata": meta}
        return await responses.stream_list(request, head, page.items,
                                           warnings=store.strategy.warnings(version))

    async def _watch_collection(self, request: web.Request, served: Served,
                                version: VersionInfo, ri: RequestInfo) -> web.StreamResponse:
        output = negotiation.choose(negotiation.parse_accept(request.headers.get("Accept")),
                                    allow_table=True, allow_partial=True)
        store = served.store
        list_opts = self._list_options(request.query, store, version)
        send_initial: bool | None = None
        if "sendInitialEvents" in request.query:
            send_initial = responses.parse_bool(request.query, "sendInitialEvents")
        timeout = responses.parse_int(request.query, "timeoutSeconds")
        opts = WatchOptions(label_selector=list_opts.label_selector,
                            field_selector=list_opts.field_selector,
                            resource_version=list_opts.resource_version,
                            send_initial_events=send_initial,
                            allow_bookmarks=responses.parse_bool(request.query,
                                                                 "allowWatchBookmarks"),
                            timeout_seconds=float(timeout) if timeout and timeout > 0 else None)
        columns = store.strategy.columns(version) if output.kind == "table" else None
        return await serve_watch(request, store, ri.namespace, version, opts, output, columns,
                                 self._clock, self._watch)

    # --- writes --------------------------------------------------------------------------

    def _write_options(self, request: web.Request, *, default_manager: bool = True
                       ) -> WriteOptions:
        """Write options from the query, and who is writing. A write that names no field
        manager is recorded under its User-Agent's (``default_manager``), as Kubernetes does
        for everything but applies."""
        query = request.query
        dry = query.getall("dryRun", []) if isinstance(query, MultiMapping) else (
            [query["dryRun"]] if "dryRun" in query else [])
        for value in dry:
            if value != "All":
                raise errors.BadRequest(f"Invalid dry run value: {value!r}, supported "
                                        "values are: \"All\"")
        manager = query.get("fieldManager", "")
        if not manager and default_manager:
            manager = manager_from_user_agent(request.headers.get("User-Agent"))
        if len(manager) > 128:
            raise errors.invalid("PatchOptions", "meta.k8s.io", "", [fields.too_long(
                "fieldManager", 128)])
        validation = query.get("fieldValidation", "Warn") or "Warn"
        if validation not in ("Strict", "Warn", "Ignore"):
            raise errors.BadRequest(
                f"fieldValidation: Unsupported value: {validation!r}: supported values: "
                '"Ignore", "Strict", "Warn"')
        return WriteOptions(dry_run=bool(dry), field_manager=manager,
                            field_validation=validation,
                            force=responses.parse_bool(query, "force"),
                            user=request.get(security.USER), sink=_sink(request))

    async def _body(self, request: web.Request, served: Served) -> Any:
        """The decoded body of a create or update: its Content-Type checked first (415), then
        read in full (413 beyond the limit), then decoded (400)."""
        content_type = negotiation.body_content_type(
            request.headers.get("Content-Type"),
            negotiation.CUSTOM_BODY_TYPES if served.custom else negotiation.BODY_TYPES)
        raw = await limits.read_body(request, self._limits)
        return _audited(request, await self._bodies.decode(raw, content_type))

    async def _virtual_read(self, request: web.Request, virtual: actions.VirtualResource,
                            read: actions.Reader, ri: RequestInfo) -> web.StreamResponse:
        info = virtual.info
        if ri.subresource or (ri.namespace is not None and not info.namespaced):
            raise self._no_route(ri)
        if ri.name and info.namespaced and ri.namespace is None:
            raise self._no_route(ri)
        query = request.query
        if not ri.name and responses.parse_bool(query, "watch"):
            raise errors.MethodNotAllowed(
                "the server does not allow this method on the requested resource")
        result = await read(actions.ReadRequest(
            namespace=ri.namespace, name=ri.name,
            label_selector=query.get("labelSelector", ""),
            field_selector=query.get("fieldSelector", ""),
            user=request.get(security.USER) or security.INSECURE_USER))
        return responses.json_response(result)

    async def _virtual_create(self, request: web.Request, virtual: actions.VirtualResource,
                              ri: RequestInfo) -> web.StreamResponse:
        info = virtual.info
        create = virtual.create
        if request.method != "POST" or ri.name or ri.subresource or create is None:
            raise errors.MethodNotAllowed(
                "the server does not allow this method on the requested resource")
        if info.namespaced != (ri.namespace is not None):
            raise self._no_route(ri)
        content_type = negotiation.body_content_type(request.headers.get("Content-Type"),
                                                     negotiation.BODY_TYPES)
        body = await self._bodies.decode(await limits.read_body(request, self._limits),
                                         content_type)
        return await self._act(request, create, ri, _ready(body))

    async def _act(self, request: web.Request, action: actions.Action, ri: RequestInfo,
                   body: Awaitable[Any]) -> web.StreamResponse:
        """Answer a request with ``action`` (201 Created, as Kubernetes answers them)."""
        opts = self._write_options(request, default_manager=False)
        decoded = _audited(request, await body)
        result = await action(actions.ActionRequest(
            namespace=ri.namespace, name=ri.name, body=decoded,
            user=request.get(security.USER) or security.INSECURE_USER, dry_run=opts.dry_run))
        return responses.json_response(result, status=201)

    def _created(self, result_obj: Obj, created: bool, warnings: list[str],
                 status_when_created: int = 201) -> web.Response:
        return responses.json_response(result_obj, status=status_when_created if created
                                        else 200, warnings=warnings)

    async def _create(self, request: web.Request, served: Served, version: VersionInfo,
                      ri: RequestInfo) -> web.StreamResponse:
        if ri.subresource:
            raise errors.MethodNotAllowed(
                "the server does not allow this method on the requested resource")
        if served.custom and self._catalog.crd_terminating(served.info.group,
                                                           served.info.resource):
            raise errors.MethodNotAllowed(
                "create not allowed while custom resource definition is terminating",
                details={"group": served.info.group, "kind": served.info.resource})
        opts = self._write_options(request)
        body = await self._body(request, served)
        result = await served.store.create(ri.namespace, body, version.name, opts)
        return self._created(result.object, True, _with_admission(result.warnings, opts))

    async def _update(self, request: web.Request, served: Served, version: VersionInfo,
                      ri: RequestInfo) -> web.StreamResponse:
        opts = self._write_options(request)
        body = await self._body(request, served)
        store = served.store
        if ri.subresource == "scale":
            scale = await store.update_scale(ri.namespace, ri.name, version.name, opts,
                                             lambda _current: _require_object(body))
            return responses.json_response(scale)
        result = await store.update(ri.namespace, ri.name, body, version.name, opts,
                                    subresource=ri.subresource)
        return self._created(result.object, result.created,
                             _with_admission(result.warnings, opts))

    async def _patch(self, request: web.Request, served: Served, version: VersionInfo,
                     ri: RequestInfo) -> web.StreamResponse:
        content_type = negotiation.content_type_of(request.headers.get("Content-Type"))
        opts = self._write_options(request, default_manager=content_type != PATCH_APPLY)
        store = served.store
        store.check_patch_type(content_type, opts)  # before the body is read
        body = _audited(request, await self._bodies.decode(
            await limits.read_body(request, self._limits), content_type))
        if ri.subresource == "scale":
            scale = await store.patch_scale(ri.namespace, ri.name, content_type, body,
                                            version.name, opts)
            return responses.json_response(scale)
        result = await store.patch(ri.namespace, ri.name, content_type, body, version.name,
                                   opts, subresource=ri.subresource)
        return self._created(result.object, result.created,
                             _with_admission(result.warnings, opts))

    async def _delete(self, request: web.Request, served: Served, version: VersionInfo,
                      ri: RequestInfo) -> web.StreamResponse:
        opts = await self._delete_options(request)
        body, _finished = await served.store.delete(ri.namespace, ri.name, version.name, opts)
        return responses.json_response(body, warnings=_with_admission([], opts))

    async def _delete_options(self, request: web.Request) -> DeleteOptions:
        query = request.query
        body: Obj = {}
        if request.body_exists:
            raw = await limits.read_body(request, self._limits)
            if raw.strip():
                # as kube-apiserver: an empty body needs no Content-Type, any other is checked
                decoded = await self._bodies.decode(raw, negotiation.body_content_type(
                    request.headers.get("Content-Type")))
                if not isinstance(decoded, dict):
                    raise errors.BadRequest("DeleteOptions must be a JSON object")
                problem = gotypes.decode_error(decoded, self._delete_options_type)
                if problem is not None:
                    raise errors.BadRequest(problem)
                body = decoded
        policy = body.get("propagationPolicy") or query.get("propagationPolicy")
        if policy is not None and policy not in ("Orphan", "Background", "Foreground"):
            raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [fields.not_supported(
                "propagationPolicy", policy, ("Background", "Foreground", "Orphan"))])
        orphan = body.get("orphanDependents")
        if orphan is None and "orphanDependents" in query:
            orphan = responses.parse_bool(query, "orphanDependents")
        if orphan is not None and policy is not None:
            raise errors.invalid("DeleteOptions", "meta.k8s.io", "", [fields.invalid(
                "propagationPolicy", policy,
                "orphanDependents and deletionPropagation cannot be both set")])
        dry = body.get("dryRun") or query.getall("dryRun", [])
        for value in dry if isinstance(dry, list) else [dry]:
            if value != "All":
                raise errors.BadRequest(f"Invalid dry run value: {value!r}")
        preconditions = body.get("preconditions") or {}
        grace = body.get("gracePeriodSeconds")
        if grace is None:
            grace = responses.parse_int(query, "gracePeriodSeconds")
        return DeleteOptions(
            dry_run=bool(dry), propagation_policy=policy,
            orphan_dependents=orphan if isinstance(orphan, bool) else None,
            grace_period_seconds=grace if isinstance(grace, int) else None,
            precondition_uid=preconditions.get("uid"),
            precondition_resource_version=preconditions.get("resourceVersion"),
            user=request.get(security.USER), sink=_sink(request))

    async def _delete_collection(self, request: web.Request, served: Served,
                                 version: VersionInfo, ri: RequestInfo) -> web.StreamResponse:
        list_opts = self._list_options(request.query, served.store, version)
        opts = await self._delete_options(request)
        page = await served.store.delete_collection(ri.namespace, version.name, list_opts,
                                                    opts)
        body = {"apiVersion": served.info.api_version(version.name),
                "kind": served.info.list_kind,
                "metadata": {"resourceVersion": str(page.resource_version)},
                "items": page.items}
        return responses.json_response(body)


def _sink(request: web.Request) -> AdmissionSink:
    """Where admission of ``request`` reports: its audit annotations go straight into the
    request's audit record (if any), as Kubernetes' ``AddAnnotation`` does."""
    record = request.get(security.AUDIT)
    return AdmissionSink(annotations=record.annotations) if record is not None \
        else AdmissionSink()


def _with_admission(warnings: list[str], opts: WriteOptions | DeleteOptions) -> list[str]:
    """The warnings of a write, followed by those its admission gave."""
    if opts.sink is None or not opts.sink.warnings:
        return warnings
    return [*warnings, *opts.sink.warnings]


def _audited(request: web.Request, body: Any) -> Any:
    """``body``, recorded as the request object of the request's audit event (if any)."""
    record = request.get(security.AUDIT)
    if record is not None:
        record.set_request_object(body)
    return body


async def _ready(value: Any) -> Any:
    return value


def subresources(info: ResourceInfo, version: VersionInfo) -> frozenset[str]:
    """The subresources a resource serves in a version."""
    allowed = {"status"} if version.status else set()
    if version.scale is not None:
        allowed.add("scale")
    allowed.update(sub.name for sub in info.extra_subresources)
    return frozenset(allowed)


def _require_object(body: Any) -> Obj:
    if not isinstance(body, dict):
        raise errors.BadRequest("the body must be an object")
    return body
