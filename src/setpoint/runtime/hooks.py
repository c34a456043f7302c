"""An operator's admission and conversion hooks as plain Python functions.

:class:`Hooks` collects an operator's **validate**, **mutate** and **convert** functions,
serves them on one HTTPS server (:class:`~setpoint.runtime.hookserver.HookServer`: a
certificate the cluster issues through a CertificateSigningRequest,
:mod:`setpoint.runtime.hookcerts`, or else of a CA of its own; paths ``/validate/<hook>``,
``/mutate/<hook>`` and ``/convert/<crd>``) and registers
them itself: a ValidatingWebhookConfiguration and a MutatingWebhookConfiguration named after
the hooks, and ``spec.conversion`` of each CRD with a convert function. No certificates or
tunnels for the operator's author to make::

    hooks = Hooks("books")

    @hooks.validate(("example.com/v1", "Book"))
    def validate(req: AdmissionRequest) -> Verdict | None:
        if not req.object["spec"].get("title"):
            return Verdict.deny("a book needs a title")
        return None                                   # allowed

    @hooks.mutate(("example.com/v1", "Book"))
    def mutate(req: AdmissionRequest) -> Obj:
        book = req.object                             # a copy: change it and return it
        book["metadata"].setdefault("labels", {})["shelf"] = "new"
        return book

    @hooks.convert("books.example.com")
    def convert(obj: Obj, desired: str) -> Obj: ...

    async with hooks.serving(client):                 # or: setpoint run, which finds it
        ...

**Functions.** A validate or mutate function gets an :class:`AdmissionRequest` (operation,
object, oldObject, userInfo, ... of the AdmissionReview; its objects are copies). A validate
function returns ``None`` (allowed) or a :class:`Verdict`; a mutate function returns the
object as it wants it (the answer is the JSONPatch from what it was sent,
:func:`~setpoint.runtime.jsondiff.json_diff`), ``None`` (unchanged) or a :class:`Verdict`
(``Verdict.allow(obj, warnings=...)`` or a denial). Raising :class:`Denied` denies too.
``async def`` functions run in the event loop; plain ``def`` ones in a worker thread (as
reconcile functions do), so a slow check does not stall the server. A hook sees its objects
in the version it was declared for: when the API server sends another version of a kind
whose convert function these hooks hold, the function converts it first (and a mutated
object back), so a hook never has to know both shapes.

**Failures.** A function that raises anything else, or returns something else, is a failed
call: the hook answers HTTP 500 with the exception's ``<Type>: <text>``, and the API server
applies the webhook's ``failurePolicy`` (``Fail``: the request is refused with that message;
``Ignore``: it goes through). So does a call that takes longer than ``timeoutSeconds``:
the API server gives up on it.

**Lifecycle.** :meth:`Hooks.run` (a :class:`~setpoint.runtime.runnable.Runnable`: ``setpoint
run`` runs every ``Hooks`` among an operator module's globals) and :meth:`Hooks.serving`
start the server, register, and on stop **remove the two webhook configurations** (a
configuration left behind with ``failurePolicy: Fail`` would refuse every write of the kinds
while the operator is down; with ``Ignore`` every write would wait for a dead URL) but
**leave each CRD's conversion** pointing at the stopped server: reverting it to ``None``
would serve stored objects under another version's name unconverted, which is silently
wrong, while a dead webhook fails reads of the other versions loudly, and the next start
points it at the new server.

**Against a real cluster** the same functions run as ordinary webhooks: the API server must
reach the hook server, so give :class:`HookConfig` a ``url`` (the HTTPS URL the API server
calls, e.g. that of a Service in front of the operator's pod) and ``hosts`` (the names that
URL uses, for the certificate), or serve behind your own TLS and register the configurations
from :meth:`Hooks.validating_configuration` yourself with your CA bundle. Nothing here
tunnels.

Invariants: a review is answered for the request's ``uid``; a body that is not an
AdmissionReview ``v1`` request is refused with 400, one larger than the configured bound with
413; a denial without a code is 400 (as Kubernetes makes it); names of hooks are unique.

Bounds: an ``async def`` hook still running a second after its ``timeoutSeconds`` is
cancelled (the API server has given up on it by then).

Non-guarantees: a function in a thread that outlives its timeout runs on (a thread cannot be
cancelled); registration replaces the configurations' whole ``webhooks`` lists (the
configurations are the operator's own); the key and certificate are new at every start (a
new CertificateSigningRequest each time).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import dataclasses
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

import orjson
from aiohttp import web

from setpoint import client as sp_client
from setpoint.apimachinery import errors
from setpoint.runtime import conversion as rtconversion
from setpoint.runtime import hookcerts, hookserver, jsondiff
from setpoint.runtime import runnable as rtrunnable

log = logging.getLogger(__name__)

Obj = dict[str, Any]
FailurePolicy = Literal["Fail", "Ignore"]
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT", "*"]
Resource = tuple[str, str]

VALIDATING: Final = ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
MUTATING: Final = ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration")
REVIEW_VERSION: Final = "admission.k8s.io/v1"


class Denied(Exception):
    """Raised by a validate or mutate function: the request is denied with this message."""

    def __init__(self, message: str, *, code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a hook answers: allowed or denied (with a message and an HTTP code), warnings,
    and for a mutate hook the object as it should be (None: unchanged)."""

    allowed: bool = True
    message: str = ""
    code: int = 400
    warnings: tuple[str, ...] = ()
    object: Obj | None = None

    @classmethod
    def allow(cls, obj: Obj | None = None, *, warnings: Sequence[str] = ()) -> Verdict:
        return cls(True, warnings=tuple(warnings), object=obj)

    @classmethod
    def deny(cls, message: str, *, code: int = 400, warnings: Sequence[str] = ()) -> Verdict:
        if not 400 <= code <= 599:
            raise ValueError("a denial's code is an HTTP error code (400-599)")
        return cls(False, message, code, tuple(warnings))


@dataclass(frozen=True, slots=True)
class AdmissionRequest:
    """The parts of an AdmissionReview request a hook decides on (objects are copies)."""

    uid: str
    operation: str
    name: str
    namespace: str
    #: the request's ``kind`` and ``resource`` ({group, version, kind|resource})
    kind: dict[str, str]
    resource: dict[str, str]
    #: the object being written (None for DELETE), and the one it replaces (UPDATE, DELETE)
    object: Obj | None
    old_object: Obj | None
    #: who asks: {username, uid, groups, extra}
    user_info: dict[str, Any]
    dry_run: bool
    sub_resource: str = ""
    #: the whole request as sent
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_review(cls, request: dict[str, Any]) -> AdmissionRequest:
        def obj(key: str) -> Obj | None:
            value = request.get(key)
            return copy.deepcopy(value) if isinstance(value, dict) else None
        def mapping(key: str) -> dict[str, Any]:
            value = request.get(key)
            return dict(value) if isinstance(value, dict) else {}
        return cls(uid=str(request.get("uid", "")), operation=str(request.get("operation", "")),
                   name=str(request.get("name") or ""),
                   namespace=str(request.get("namespace") or ""),
                   kind=mapping("kind"), resource=mapping("resource"),
                   object=obj("object"), old_object=obj("oldObject"),
                   user_info=mapping("userInfo"),
                   dry_run=bool(request.get("dryRun")),
                   sub_resource=str(request.get("subResource") or ""), raw=request)


HookResult = Verdict | Obj | None
HookFunc = Callable[[AdmissionRequest], HookResult | Awaitable[HookResult]]
F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=rtconversion.Convert)


@dataclass(frozen=True, slots=True, kw_only=True)
class HookConfig:
    """How the hook server listens and how the API server reaches it."""

    host: str = "127.0.0.1"
    #: 0: any free port
    port: int = 0
    #: further names for the certificate (a Service's DNS name, behind one)
    hosts: tuple[str, ...] = ()
    #: the base URL the API server calls (None: ``https://<host>:<port>``)
    url: str | None = None
    #: the largest review accepted
    max_body_bytes: int = hookserver.DEFAULT_MAX_BODY_BYTES
    #: where the serving certificate comes from: ``cluster`` asks the cluster for one (a
    #: CertificateSigningRequest, :mod:`setpoint.runtime.hookcerts`) and falls back to an own
    #: CA when it cannot issue one; ``own`` makes an own CA straight away
    certificate_source: Literal["cluster", "own"] = "cluster"
    #: bounds of asking the cluster
    certificate: hookcerts.CertificateConfig = field(
        default_factory=hookcerts.CertificateConfig)

    def __post_init__(self) -> None:
        if self.certificate_source not in ("cluster", "own"):
            raise ValueError("certificate_source is 'cluster' or 'own'")
        if not 0 <= self.port <= 65535:
            raise ValueError("port must be 0..65535")
        if self.url is not None and not self.url.startswith("https://"):
            raise ValueError("the hooks' url must be https://")
        if self.max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")


@dataclass(frozen=True, slots=True)
class _Admission:
    name: str
    func: HookFunc
    resource: Resource
    operations: tuple[str, ...]
    failure_policy: FailurePolicy
    timeout_seconds: int
    mutating: bool

    @property
    def path(self) -> str:
        return f"/{'mutate' if self.mutating else 'validate'}/{self.name}"


def _slug(text: str) -> str:
    cleaned = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    while "--" in cleaned:
        cleaned = cleaned.replace("--", "-")
    return cleaned[:50].rstrip("-") or "hook"


async def _call(func: Callable[..., Any], *args: Any) -> Any:
    if inspect.iscoroutinefunction(func):
        return await func(*args)
    value = await asyncio.to_thread(func, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


class Hooks:
    """An operator's validate, mutate and convert functions (see the module doc).

    ``name`` names the webhook configurations (and the webhooks: ``<func>.<name>.hooks.setpoint``)
    and the runnable; ``failure_policy`` and ``timeout_seconds`` are the defaults of every
    admission hook (each may choose its own).
    """

    def __init__(self, name: str, *, config: HookConfig | None = None,
                 failure_policy: FailurePolicy = "Fail", timeout_seconds: int = 10) -> None:
        if _slug(name) != name:
            raise ValueError(f"hooks name {name!r} must be lowercase letters, digits and '-'")
        _check_policy(failure_policy, timeout_seconds)
        self._name = name
        self.config = config or HookConfig()
        self._failure_policy: FailurePolicy = failure_policy
        self._timeout = timeout_seconds
        self._admission: list[_Admission] = []
        self._conversions: dict[str, rtconversion.Convert] = {}
        self._server: hookserver.HookServer | None = None
        #: the CRD of each hooked resource, learnt when the configurations are made
        self._crd_of: dict[Resource, str] = {}
        #: set while the hooks are registered (between :meth:`register` and
        #: :meth:`unregister`): what a caller waits for before it writes
        self.registered = asyncio.Event()

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return (f"Hooks({self._name!r}: {len(self._admission)} admission, "
                f"{len(self._conversions)} conversion)")

    # --- declaring -------------------------------------------------------------------

    def validate(self, resource: Resource, *, operations: Sequence[Operation] = (
                     "CREATE", "UPDATE"), failure_policy: FailurePolicy | None = None,
                 timeout_seconds: int | None = None, name: str | None = None
                 ) -> Callable[[F], F]:
        """Register the decorated function as a validating hook for ``resource``
        (``(apiVersion, kind)``); the function is returned unchanged."""
        return self._add(resource, operations, failure_policy, timeout_seconds, name, False)

    def mutate(self, resource: Resource, *, operations: Sequence[Operation] = (
                   "CREATE", "UPDATE"), failure_policy: FailurePolicy | None = None,
               timeout_seconds: int | None = None, name: str | None = None
               ) -> Callable[[F], F]:
        """Register the decorated function as a mutating hook for ``resource``."""
        return self._add(resource, operations, failure_policy, timeout_seconds, name, True)

    def convert(self, crd_name: str) -> Callable[[C], C]:
        """Register the decorated ``convert(obj, desired_api_version) -> obj`` as the
        conversion of the CRD ``crd_name`` (see :mod:`setpoint.runtime.conversion`)."""
        def register(func: C) -> C:
            if crd_name in self._conversions:
                raise ValueError(f"{crd_name} already has a convert function")
            self._conversions[crd_name] = func
            return func
        return register

    def _add(self, resource: Resource, operations: Sequence[str],
             failure_policy: FailurePolicy | None, timeout_seconds: int | None,
             name: str | None, mutating: bool) -> Callable[[F], F]:
        policy = self._failure_policy if failure_policy is None else failure_policy
        timeout = self._timeout if timeout_seconds is None else timeout_seconds
        _check_policy(policy, timeout)
        if not operations or not set(operations) <= {"CREATE", "UPDATE", "DELETE",
                                                      "CONNECT", "*"}:
            raise ValueError(f"operations {list(operations)!r}: CREATE, UPDATE, DELETE, "
                             "CONNECT or *")

        def register(func: F) -> F:
            hook = _Admission(_slug(name or func.__name__), func, resource, tuple(operations),
                              policy, timeout, mutating)
            if any(h.path == hook.path for h in self._admission):
                raise ValueError(f"a hook named {hook.name!r} is already registered")
            self._admission.append(hook)
            return func
        return register

    # --- what the API server is told -------------------------------------------------

    def url(self, path: str) -> str:
        """The URL the API server calls for ``path`` (``/validate/<hook>``, ...)."""
        if self.config.url is not None:
            return self.config.url.rstrip("/") + path
        if self._server is None:
            raise RuntimeError("the hooks are not served")
        return self._server.url(path)

    @property
    def ca_bundle(self) -> str:
        if self._server is None:
            raise RuntimeError("the hooks are not served")
        return self._server.ca_bundle

    def _webhook(self, hook: _Admission, ref: sp_client.ResourceRef,
                 ca_bundle: str) -> Obj:
        webhook: Obj = {
            "name": f"{hook.name}.{self._name}.hooks.setpoint",
            "clientConfig": {"url": self.url(hook.path), "caBundle": ca_bundle},
            "rules": [{"apiGroups": [ref.group], "apiVersions": [ref.version],
                       "operations": list(hook.operations), "resources": [ref.resource],
                       "scope": "Namespaced" if ref.namespaced else "Cluster"}],
            "failurePolicy": hook.failure_policy, "timeoutSeconds": hook.timeout_seconds,
            "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "matchPolicy": "Equivalent"}
        if hook.mutating:
            webhook["reinvocationPolicy"] = "Never"
        return webhook

    async def configurations(self, client: sp_client.Client, *,
                             ca_bundle: str | None = None) -> list[Obj]:
        """The webhook configurations that name these hooks (none for a kind without
        hooks); ``ca_bundle`` defaults to the running server's CA."""
        bundle = self.ca_bundle if ca_bundle is None else ca_bundle
        out: list[Obj] = []
        for kind, mutating in ((VALIDATING, False), (MUTATING, True)):
            hooks = [h for h in self._admission if h.mutating == mutating]
            if not hooks:
                continue
            webhooks = []
            for h in hooks:
                ref = await client.resolve(h.resource)
                self._crd_of[h.resource] = f"{ref.resource}.{ref.group}"
                webhooks.append(self._webhook(h, ref, bundle))
            out.append({"apiVersion": kind[0], "kind": kind[1],
                        "metadata": {"name": f"{self._name}-hooks",
                                     "labels": {"app.kubernetes.io/managed-by": "setpoint"}},
                        "webhooks": webhooks})
        return out

    async def register(self, client: sp_client.Client) -> None:
        """Create or replace the webhook configurations, and point each CRD with a convert
        function at this server."""
        for crd_name in self._conversions:
            await client.patch(rtconversion.CRD, crd_name, {"spec": {
                "conversion": rtconversion.conversion(self.url(f"/convert/{crd_name}"),
                                                      self.ca_bundle)}})
        for configuration in await self.configurations(client):
            try:
                await client.create(configuration)
            except errors.AlreadyExists:
                await client.patch((configuration["apiVersion"], configuration["kind"]),
                                   configuration["metadata"]["name"],
                                   {"webhooks": configuration["webhooks"]})
        self.registered.set()

    async def unregister(self, client: sp_client.Client) -> None:
        """Delete the webhook configurations (the CRDs' conversions are left: see the
        module doc)."""
        self.registered.clear()
        for kind, mutating in ((VALIDATING, False), (MUTATING, True)):
            if any(h.mutating == mutating for h in self._admission):
                with contextlib.suppress(errors.NotFound):
                    await client.delete(kind, f"{self._name}-hooks")

    # --- serving ---------------------------------------------------------------------

    async def start(self, client: sp_client.Client | None = None) -> None:
        """Start serving; with ``client`` (and ``certificate_source="cluster"``) on a
        certificate the cluster issues, else (or when it cannot) of an own CA."""
        routes: dict[str, hookserver.Handler] = {}
        for hook in self._admission:
            routes[hook.path] = self._admission_handler(hook)
        for crd_name, func in self._conversions.items():
            routes[f"/convert/{crd_name}"] = _conversion_handler(func)
        server = hookserver.HookServer(
            routes, host=self.config.host, port=self.config.port, hosts=self.config.hosts,
            max_body_bytes=self.config.max_body_bytes, common_name=f"{self._name}-hooks")
        if client is not None and self.config.certificate_source == "cluster":
            issued = await hookcerts.cluster_certificate(
                client, name=f"{self._name}-hooks", hosts=server.names,
                config=self.config.certificate, log=log)
            if issued is not None:
                server.use_certificate(issued.cert_pem, issued.key_pem, issued.ca_pem)
        await server.start()
        self._server = server
        if server.own_ca:
            log.info("%r serves a certificate of its own CA", self)

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop()

    async def __aenter__(self) -> Hooks:
        """Serve (without registering) for the block."""
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @contextlib.asynccontextmanager
    async def serving(self, client: sp_client.Client) -> AsyncIterator[Hooks]:
        """Serve and register the hooks for the block; unregister and stop after it."""
        await self.start(client)
        try:
            await self.register(client)
            try:
                yield self
            finally:
                with contextlib.suppress(errors.ApiError, OSError):
                    await self.unregister(client)
        finally:
            await self.stop()

    async def run(self, ctx: rtrunnable.RunnableContext) -> None:
        """As a manager's runnable: serve and register until the manager stops."""
        async with self.serving(ctx.client):
            ctx.logger.info("serving %r at %s", self, self.url("/"))
            await ctx.stopping.wait()

    def _admission_handler(self, hook: _Admission) -> hookserver.Handler:
        async def handle(request: web.Request) -> web.Response:
            convert = self._conversions.get(self._crd_of.get(hook.resource, ""))
            return await _admit(hook, await request.read(), convert)
        return handle


def _check_policy(policy: str, timeout: int) -> None:
    if policy not in ("Fail", "Ignore"):
        raise ValueError(f"failurePolicy {policy!r}: Fail or Ignore")
    if not 1 <= timeout <= 30:
        raise ValueError("timeoutSeconds must be between 1 and 30 (as Kubernetes requires)")


def _conversion_handler(func: rtconversion.Convert) -> hookserver.Handler:
    async def handle(request: web.Request) -> web.Response:
        return rtconversion.answer(func, await request.read())
    return handle


def _in_version(convert: rtconversion.Convert | None, obj: Obj | None,
                api_version: str) -> Obj | None:
    """``obj`` in ``api_version``, through the operator's own convert function when it is
    in another version (and there is one)."""
    if convert is None or obj is None or obj.get("apiVersion") in (None, api_version):
        return obj
    out = convert(copy.deepcopy(obj), api_version)
    if not isinstance(out, dict):
        raise TypeError(f"the conversion returned {type(out).__name__}, not an object")
    out["apiVersion"] = api_version
    return out


async def _admit(hook: _Admission, body: bytes,
                 convert: rtconversion.Convert | None = None) -> web.Response:
    try:
        review = hookserver.decode_review(body)
    except hookserver.BadReview as e:
        return web.Response(status=400, text=str(e))
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(review, dict) or review.get("apiVersion") != REVIEW_VERSION or \
            not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        return web.Response(status=400, text="not an AdmissionReview v1 request")
    req = AdmissionRequest.from_review(request)
    original = request.get("object")
    try:
        if convert is not None:
            # the hook sees the version it was declared for, even if an API server sent
            # another one (a safeguard: API servers send the version the rule matched)
            req = dataclasses.replace(
                req, object=_in_version(convert, req.object, hook.resource[0]),
                old_object=_in_version(convert, req.old_object, hook.resource[0]))
        # nobody waits for an answer after timeoutSeconds: an async hook is not left running
        async with asyncio.timeout(hook.timeout_seconds + 1):
            value = await _call(hook.func, req)
        verdict = _verdict(value, hook)
        if verdict.object is not None and isinstance(original, dict):
            back = _in_version(convert, verdict.object, str(original.get("apiVersion")))
            verdict = dataclasses.replace(verdict, object=back)
    except Denied as e:
        verdict = Verdict.deny(e.message, code=e.code)
    except Exception as e:  # a failed call: the webhook's failurePolicy decides
        log.warning("hook %s failed", hook.path, exc_info=True)
        return web.Response(status=500, text=f"{type(e).__name__}: {e}")
    response: Obj = {"uid": req.uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {"status": "Failure", "message": verdict.message,
                              "code": verdict.code}
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    if verdict.allowed and hook.mutating and verdict.object is not None and \
            isinstance(original, dict):
        patch = jsondiff.json_diff(original, verdict.object)
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    return web.Response(body=orjson.dumps({"apiVersion": REVIEW_VERSION,
                                           "kind": "AdmissionReview",
                                           "response": response}),
                        content_type="application/json")


def _verdict(value: Any, hook: _Admission) -> Verdict:
    if value is None or value is True:
        return Verdict.allow()
    if isinstance(value, Verdict):
        if value.object is not None and not hook.mutating:
            raise TypeError("a validate hook returned an object to write: use mutate")
        return value
    if hook.mutating and isinstance(value, dict):
        return Verdict.allow(value)
    expected = "an object, a Verdict or None" if hook.mutating else "a Verdict or None"
    raise TypeError(f"the hook returned {type(value).__name__}, not {expected}")


def hooks_in(namespace: dict[str, object]) -> list[Hooks]:
    """Every :class:`Hooks` among a module's globals (pass ``vars(module)``), in order."""
    found: list[Hooks] = []
    for value in namespace.values():
        if isinstance(value, Hooks) and not any(value is h for h in found):
            found.append(value)
    return found
