"""The security filters of every request: authentication, audit, impersonation, authorization.

In kube-apiserver's order: the request's credentials name a user (401 when they are refused
or missing, see :mod:`setpoint.auth.authenticator`); an audit record is opened for it; an
``Impersonate-*`` request is checked (the requester needs ``impersonate`` on each thing it
asks to be) and then runs as the impersonated user; finally the request's attributes (verb,
resource, namespace, name, or path) are authorized (403 with Kubernetes' message otherwise).

What the handler sees: ``request[USER]`` (a :class:`~setpoint.auth.user.UserInfo`, the
impersonated one when impersonating), ``request[REQUESTER]`` (who authenticated),
``request[ATTRIBUTES]`` and ``request[AUDIT]`` (the audit record, or None).

Invariants: no handler runs for a request that was not both authenticated and authorized; a
401 says only ``Unauthorized`` (why a credential was refused is logged at debug level, never
told to the client); every request that reaches authentication is audited when a policy asks
for it, denied ones included: a 401 as kube-apiserver records one (no user, a
``ResponseStarted`` event whose status says which kinds of credentials were tried, never
their text).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.audit.events import AuditRecord
from setpoint.audit.log import AuditLog
from setpoint.audit.policy import Policy
from setpoint.auth import impersonation
from setpoint.auth import user as users
from setpoint.auth.attributes import Attributes, name_of_selection, resource_verb
from setpoint.auth.authenticator import Authenticator, Credentials, Unauthenticated
from setpoint.auth.rbac.authorizer import Authorizer
from setpoint.auth.user import UserInfo
from setpoint.server import request_info, responses

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Now = Callable[[], str]

#: who a request runs as when the server serves plain HTTP without authentication
#: (``--insecure-plain-http``): an administrator, as the old insecure port was
INSECURE_USER = UserInfo("system:admin", groups=(users.SYSTEM_MASTERS,
                                                 users.ALL_AUTHENTICATED))

USER = web.RequestKey("user", UserInfo)
REQUESTER = web.RequestKey("requester", UserInfo)
ATTRIBUTES = web.RequestKey("attributes", Attributes)
#: the audit record of the request; absent when the policy records nothing
AUDIT = web.RequestKey("audit", AuditRecord)


@dataclass(slots=True)
class Security:
    authenticator: Authenticator
    authorizer: Authorizer
    audit_policy: Policy | None = None
    audit_log: AuditLog | None = None


def attributes_of(request: web.Request, ri: request_info.RequestInfo | None,
                  user: UserInfo) -> Attributes:
    """What ``request`` (whose path parsed as ``ri``) asks to do, in authorization's terms."""
    if ri is None:
        return Attributes(user=user, verb=request.method.lower(), resource_request=False,
                          path=request.path)
    watch = request.query.get("watch", "").lower() not in ("", "false", "0")
    verb = resource_verb(request.method, has_name=bool(ri.name), watch=watch)
    namespace = ri.namespace or ""
    if ri.resource == "namespaces" and ri.name and ri.namespace is None:
        namespace = ri.name  # a namespace is in itself, as Kubernetes' RequestInfo says
    name = ri.name
    if not name and verb in ("list", "watch") and "fieldSelector" in request.query:
        name = name_of_selection(request.query["fieldSelector"])
    return Attributes(user=user, verb=verb, resource_request=True, namespace=namespace,
                      api_group=ri.group, api_version=ri.version, resource=ri.resource,
                      subresource=ri.subresource, name=name, path=request.path)


def peer_certificate(request: web.Request) -> bytes | None:
    transport = request.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return bytes(der) if der else None


def forbidden(attrs: Attributes, reason: str = "") -> errors.Forbidden:
    details: dict[str, Any] = {}
    if attrs.resource_request:
        details = {"name": attrs.name, "kind": attrs.resource}
        if attrs.api_group:
            details["group"] = attrs.api_group
    return errors.Forbidden(attrs.forbidden_message(reason), details=details)


def _source_ip(request: web.Request) -> list[str]:
    return [request.remote] if request.remote else []


class Gate:
    """Applies :class:`Security` to one request before its handler runs (see module doc)."""

    def __init__(self, security: Security, now: Now) -> None:
        self._security = security
        self._now = now

    async def serve(self, request: web.Request, ri: request_info.RequestInfo | None,
                    handler: Callable[[], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        security = self._security
        now = self._now
        credentials = Credentials(peer_certificate(request),
                                  request.headers.get("Authorization"))
        try:
            user = security.authenticator.authenticate(credentials, request.path)
        except Unauthenticated as e:
            log.debug("unauthenticated %s %s: %s", request.method, request.path, e)
            self._audit_failed_authentication(request, ri, credentials)
            return responses.error_response(errors.Unauthorized("Unauthorized"))
        attrs = attributes_of(request, ri, user)
        record = self._audit_record(request, attrs)
        if record is not None and security.audit_log is not None \
                and record.wants("RequestReceived"):
            security.audit_log.write(record.event("RequestReceived", now()))
        requester = user
        try:
            try:
                wanted = impersonation.parse(request.headers.items())
            except impersonation.ImpersonationError as e:
                raise errors.BadRequest(str(e)) from e
            if wanted is not None:
                for check in impersonation.requests(user, wanted):
                    verdict = security.authorizer.authorize(check)
                    if not verdict.allowed:
                        raise forbidden(check, verdict.reason)
                user = impersonation.impersonated(wanted)
                attrs = attributes_of(request, ri, user)
                if record is not None:
                    record.attrs = attrs
                    record.authenticated_user = requester
            verdict = security.authorizer.authorize(attrs)
            if record is not None:
                record.annotations["authorization.k8s.io/decision"] = \
                    "allow" if verdict.allowed else "forbid"
                record.annotations["authorization.k8s.io/reason"] = verdict.reason
            if not verdict.allowed:
                raise forbidden(attrs, verdict.reason)
            request[USER] = user
            request[REQUESTER] = requester
            request[ATTRIBUTES] = attrs
            if record is not None:
                request[AUDIT] = record
            response = await handler()
        except errors.ApiError as e:
            response = responses.error_response(e)
        if record is not None and security.audit_log is not None:
            _finish(record, response, security.audit_log, now)
        return response

    def _audit_record(self, request: web.Request, attrs: Attributes) -> AuditRecord | None:
        """The audit record of a request as ``attrs`` describe it, when the server audits
        and its policy records such a request at some level; None otherwise."""
        security = self._security
        policy = security.audit_policy
        if policy is None or security.audit_log is None:
            return None
        decision = policy.decide(attrs)
        if not decision.level.value:
            return None
        return AuditRecord(attrs, decision, request.path_qs, _source_ip(request),
                           request.headers.get("User-Agent", ""), self._now(),
                           omit_managed_fields=policy.omit_managed_fields)

    def _audit_failed_authentication(self, request: web.Request,
                                     ri: request_info.RequestInfo | None,
                                     credentials: Credentials) -> None:
        """Kubernetes' record of a 401: no user, and which credentials were tried (never
        their text), at the ResponseStarted stage."""
        record = self._audit_record(request, attributes_of(request, ri, UserInfo("")))
        log = self._security.audit_log
        if record is None or log is None:
            return
        record.set_response(401, {"message": failed_authentication_message(credentials)})
        if record.wants("ResponseStarted"):
            log.write(record.event("ResponseStarted", record.received))


def failed_authentication_message(credentials: Credentials) -> str:
    """What kube-apiserver's audit event of a 401 says: the kinds of credentials that were
    presented, never what they were."""
    methods: list[str] = []
    scheme, _, rest = (credentials.authorization or "").strip().partition(" ")
    if scheme.lower() == "basic":
        methods.append("basic")
    elif scheme.lower() == "bearer" and rest:
        methods.append("bearer")
    if credentials.peer_certificate is not None:
        methods.append("x509")
    if methods:
        return "Authentication failed, attempted: " + ", ".join(methods)
    return "Authentication failed, no credentials provided"


def _finish(record: AuditRecord, response: web.StreamResponse, sink: AuditLog,
            now: Now) -> None:
    status: dict[str, Any] | None = None
    obj: Any = None
    body = getattr(response, "body", None)
    if isinstance(body, bytes | bytearray) and response.content_type == "application/json" \
            and (response.status >= 400 or record.level.value >= 3):
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("kind") == "Status":
            status = parsed
        else:
            obj = parsed
    record.set_response(response.status, status, obj)
    if record.wants("ResponseComplete"):
        sink.write(record.event("ResponseComplete", now()))
