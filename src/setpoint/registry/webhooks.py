"""Where writes meet admission webhooks: two hooks every store runs, one before and one after
the ValidatingAdmissionPolicies.

:meth:`WebhookAdmission.mutate` calls the MutatingWebhookConfigurations' webhooks one after
the other (configurations by name, webhooks in their order), applies each JSONPatch answer
to the object (in the version the webhook's rule matched, converted back; what names the
object and what the server owns in its metadata is kept as it was), calls those with
``reinvocationPolicy: IfNeeded`` once more when a later webhook changed the object, and then
has the store prune, default and validate the object again (``attrs.revalidate``), so a
patch cannot store what the schema refuses. :meth:`WebhookAdmission.validate` calls the
ValidatingWebhookConfigurations' webhooks concurrently (at most :data:`MAX_PARALLEL_CALLS` at
once, the others waiting for a slot); the first denial (in configuration order) fails the
write. All the calls of one request end within :attr:`WebhookAdmission.request_timeout`
(60 s) of its first, waiting for a slot included: a later call gets what is left of it
when that is less than its ``timeoutSeconds``, or fails as a timeout without being made,
so however many webhooks match, none holds a write longer.

A webhook is called when its ``rules`` match (``matchPolicy``, ``scope``), its
``namespaceSelector`` and ``objectSelector`` select the request, and every
``matchConditions`` expression is true. A dry-run request skips nothing: every webhook has
``sideEffects`` None or NoneOnDryRun (validation refuses others), and ``dryRun: true`` is in
the AdmissionReview.

Outcomes, with Kubernetes' messages and codes:

* a denial: ``admission webhook "x" denied the request: <message>`` with the webhook's code
  (400 when it gives none below 400) and reason;
* a call that fails (connection, TLS, timeout, a non-2xx answer, an answer that is not a
  valid AdmissionReview) under ``failurePolicy: Fail``: 500 ``Internal error occurred:
  failed calling webhook "x": failed to call webhook: Post "https://...?timeout=10s":
  context deadline exceeded``; under ``Ignore`` the request goes on and the audit
  annotation ``failed-open.(validating|mutation).webhook.admission.k8s.io/round_R_index_I``
  names the webhook;
* a patch that does not apply (its copies adding more than ``patch.MAX_COPY_BYTES``, or
  nesting the object too deep to walk included): 500 ``Internal error occurred: ...``
  whatever the policy; a patched object deeper than ``decoding.MAX_DEPTH`` is refused by
  ``attrs.revalidate`` (422) before anything else walks it;
* warnings become ``Warning`` headers; ``auditAnnotations`` become ``<webhook>/<key>``; each
  mutating call is recorded as ``mutation.webhook.admission.k8s.io/round_R_index_I``.

A ``service`` target is reached at the first ready address and port of the Service's
Endpoints (the port named as the Service port the configuration gives), with the
certificate checked for ``<name>.<namespace>.svc``: there is no cluster IP routing, so a
Service without endpoints cannot be called (``no endpoints available for service "x"``).

Freshness is the policies': once a configuration has been seen, every write first waits
until the watch cache holds every acknowledged write. Without configurations a write pays
one lookup. The HTTP calls go through an injected :class:`Transport` (the server's is
:mod:`setpoint.server.webhookclient`); without one every call fails as unreachable.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import orjson

from setpoint.admission import expressions as ex
from setpoint.admission import matching, webhookconfig
from setpoint.admission import review as rv
from setpoint.admission.authz import Authorize, Authorizer
from setpoint.apimachinery import decoding, errors, patch
from setpoint.auth.user import UserInfo
from setpoint.cel.errors import EvalError
from setpoint.registry import watchcache as wc
from setpoint.registry.admissionregistration import GROUP, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS
from setpoint.registry.admissionswitch import AdmissionSwitch
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.policies import namespace_object, request_object

log = logging.getLogger(__name__)

Obj = dict[str, Any]

MUTATING_PREFIX: Final = f"/registry/{GROUP}/{MUTATING_WEBHOOKS}/"
VALIDATING_PREFIX: Final = f"/registry/{GROUP}/{VALIDATING_WEBHOOKS}/"
NAMESPACE_PREFIX: Final = "/registry/core/namespaces/"
SERVICE_PREFIX: Final = "/registry/core/services/"
ENDPOINTS_PREFIX: Final = "/registry/core/endpoints/"
#: metadata a patch cannot change (ignored when it does)
IDENTITY: Final = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp",
                   "generation", "deletionTimestamp", "managedFields")
#: webhooks called at once for one request (validating webhooks run concurrently)
MAX_PARALLEL_CALLS: Final = 16
#: seconds all of one request's webhook calls may take together, from its first
#: (kube-apiserver's --request-timeout, the deadline of the context every call is made in):
#: a call is given what is left of it when less than its timeoutSeconds, none after it
REQUEST_TIMEOUT: Final = 60.0
#: where a request's deadline is kept in ``AdmissionAttributes.state``
_DEADLINE: Final = "webhooks.deadline"


@dataclass(frozen=True, slots=True)
class Target:
    """Where one webhook call goes.

    ``url`` is what the call is reported as (``https://name.ns.svc:443/path?timeout=10s``
    for a service); ``address`` is where it connects (``host:port``), ``server_name`` the
    name the certificate must carry; ``pool`` names the configuration whose connections it
    shares."""

    url: str
    address: str
    server_name: str
    ca_bundle: bytes | None
    pool: str


class CallFailed(Exception):
    """A call that did not give an answer: the text after ``failed to call webhook: ``."""


class Transport(Protocol):
    async def post(self, target: Target, body: bytes, timeout: float) -> bytes:
        """POST ``body``; the response body, or :class:`CallFailed`."""


class _Unreachable:
    async def post(self, target: Target, body: bytes, timeout: float) -> bytes:
        raise CallFailed(f'Post "{target.url}": no webhook transport configured')


class _Failed(Exception):
    """``failed calling webhook "x": <reason>`` (Kubernetes' ``ErrCallingWebhook``)."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook}": {reason}')


def _allow_all(attrs: Any) -> tuple[bool, str]:
    return True, ""


@dataclass(frozen=True, slots=True)
class _Hook:
    """One webhook of one configuration, compiled."""

    configuration: str
    spec: Obj
    conditions: tuple[tuple[str, ex.Expression | None, str], ...]

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or "")

    @property
    def fails_open(self) -> bool:
        return self.spec.get("failurePolicy") == "Ignore"


def _compile_hooks(name: str, obj: Obj) -> list[_Hook]:
    hooks: list[_Hook] = []
    for spec in obj.get("webhooks") or []:
        if not isinstance(spec, dict):
            continue
        conditions: list[tuple[str, ex.Expression | None, str]] = []
        for cond in spec.get("matchConditions") or []:
            if not isinstance(cond, dict):
                continue
            source = str(cond.get("expression") or "")
            try:
                conditions.append((str(cond.get("name") or ""), ex.compile_expression(
                    source, webhookconfig.CONDITIONS, ex.BOOL_RESULT), ""))
            except ex.CompileError as e:
                conditions.append((str(cond.get("name") or ""), None,
                                   f"compilation error: {e.detail}"))
        hooks.append(_Hook(name, spec, tuple(conditions)))
    return hooks


def internal_error(text: str) -> errors.ApiError:
    """Kubernetes' ``NewInternalError``: 500 ``Internal error occurred: <text>``."""
    return errors.ApiError(f"Internal error occurred: {text}",
                           details={"causes": [{"message": text}]}, code=500,
                           reason="InternalError")


def denied(webhook: str, response: rv.Response) -> errors.ApiError:
    """Kubernetes' ``ToStatusErr``: a webhook's refusal as the client sees it."""
    prefix = f'admission webhook "{webhook}" denied the request'
    if response.message:
        message = f"{prefix}: {response.message}"
    elif response.reason:
        message = f"{prefix}: {response.reason}"
    else:
        message = f"{prefix} without explanation"
    code = response.code if response.code >= 400 else 400
    return errors.ApiError(message, code=code, reason=response.reason)


class WebhookAdmission:
    """Admission webhook enforcement over one watch cache (see the module doc)."""

    def __init__(self, cache: wc.WatchCache) -> None:
        self._cache = cache
        self.transport: Transport = _Unreachable()
        #: seconds all of one request's webhook calls may take together
        self.request_timeout: float = REQUEST_TIMEOUT
        #: how the ``authorizer`` of match conditions is answered (the server's RBAC)
        self.authorize: Authorize = _allow_all
        self._compiled: dict[str, tuple[Obj, list[_Hook]]] = {}
        self._switch = AdmissionSwitch(cache, GROUP, (MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS),
                                       (MUTATING_PREFIX, VALIDATING_PREFIX))

    # --- configurations ---------------------------------------------------------------------

    def _hooks(self, prefix: str) -> list[_Hook]:
        out: list[_Hook] = []
        seen: set[str] = set()
        for key, obj in sorted(self._cache.items(prefix), key=lambda kv: kv[0]):
            seen.add(key)
            hit = self._compiled.get(key)
            if hit is None or hit[0] is not obj:
                hit = self._compiled[key] = (obj, _compile_hooks(key[len(prefix):], obj))
            out.extend(hit[1])
        for key in [k for k in self._compiled if k.startswith(prefix) and k not in seen]:
            del self._compiled[key]
        return out

    def quiet(self, group: str, resource: str) -> bool:
        """Nothing to see on a write of ``group``/``resource`` now (see
        :class:`~setpoint.registry.admissionswitch.AdmissionSwitch`)."""
        return self._switch.quiet(group, resource)

    async def _ready(self, attrs: AdmissionAttributes) -> bool:
        if self._switch.exempt(attrs.group, attrs.resource):
            return False
        if not self._switch.on():
            return False
        await self._cache.wait_fresh()
        return True

    # --- the hooks --------------------------------------------------------------------------

    async def mutate(self, new: Obj | None, old: Obj | None,
                     attrs: AdmissionAttributes) -> None:
        if not await self._ready(attrs):
            return
        hooks = self._hooks(MUTATING_PREFIX)
        if not hooks:
            return
        ns_obj = self._namespace(attrs)
        called: dict[int, int] = {}  # hook index -> the step it last ran at
        last_change = -1
        step = 0
        for round_ in (0, 1):
            for i, hook in enumerate(hooks):
                if round_ == 1 and not (
                        hook.spec.get("reinvocationPolicy") == "IfNeeded"
                        and i in called and last_change > called[i]):
                    continue
                step += 1
                changed = await self._mutate_one(hook, round_, i, new, old, attrs, ns_obj)
                if changed is None:
                    continue
                called[i] = step
                if changed:
                    last_change = step
            if last_change < 0:
                break
        if last_change >= 0 and new is not None and attrs.revalidate is not None:
            attrs.revalidate(new)

    async def validate(self, new: Obj | None, old: Obj | None,
                       attrs: AdmissionAttributes) -> None:
        if not await self._ready(attrs):
            return
        hooks = self._hooks(VALIDATING_PREFIX)
        if not hooks:
            return
        ns_obj = self._namespace(attrs)
        prepared_calls: list[tuple[int, _Hook, tuple[str, Obj] | _Failed]] = []
        for i, hook in enumerate(hooks):
            prepared = await self._prepare(hook, new, old, attrs, ns_obj, keep=True)
            if prepared is None:
                continue
            prepared_calls.append((i, hook, prepared))
        if not prepared_calls:
            return
        # at most MAX_PARALLEL_CALLS at once: a call waits for a slot within the request's
        # deadline, then has its own timeoutSeconds (what is left of the deadline at most)
        slots = asyncio.Semaphore(MAX_PARALLEL_CALLS)
        calls: list[Awaitable[errors.ApiError | None]] = [
            self._validate_one(hook, i, prepared, attrs, slots)
            for i, hook, prepared in prepared_calls]
        results = await asyncio.gather(*calls)
        for result in results:
            if result is not None:
                raise result

    # --- one webhook --------------------------------------------------------------------------

    def _namespace(self, attrs: AdmissionAttributes) -> Obj | None:
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        if attrs.namespace and not is_namespace:
            return self._cache.get(NAMESPACE_PREFIX + attrs.namespace)
        return None

    async def _prepare(self, hook: _Hook, new: Obj | None, old: Obj | None,
                       attrs: AdmissionAttributes, ns_obj: Obj | None,
                       *, keep: bool) -> tuple[str, Obj] | _Failed | None:
        """Whether ``hook`` applies: ``(version, AdmissionRequest)``, a failure of its match
        conditions, or None. The objects are converted to the version the hook's rule
        matched (:meth:`AdmissionAttributes.in_version`; ``keep`` for the validating hooks,
        which change nothing); a conversion webhook's failure is raised as the request's
        error."""
        spec = hook.spec
        rules = spec.get("rules")
        if not rules:
            return None
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        request = matching.Request(
            operation=attrs.operation, group=attrs.group, version=attrs.version,
            resource=attrs.resource, subresource=attrs.subresource,
            namespace=attrs.name if is_namespace else attrs.namespace, name=attrs.name,
            versions=attrs.versions, object_labels=matching.labels_of(new),
            old_object_labels=matching.labels_of(old))
        resources = {"namespaceSelector": spec.get("namespaceSelector"),
                     "objectSelector": spec.get("objectSelector"), "resourceRules": rules,
                     "matchPolicy": spec.get("matchPolicy") or "Equivalent"}
        match = matching.matches(resources, request,
                                 matching.labels_of(ns_obj) if ns_obj is not None else None)
        if match is None:
            return None
        version = match.version
        obj, old_obj = await attrs.in_version(new, old, version, keep=keep)
        user = attrs.user or UserInfo("system:apiserver", groups=("system:masters",))
        req = request_object(attrs, version, user)
        if hook.conditions:
            evaluation = ex.Evaluation({
                "object": obj, "oldObject": old_obj, "request": req,
                "namespaceObject": namespace_object(ns_obj),
                "authorizer": Authorizer(self.authorize, user)}, {})
            problems: list[str] = []
            for _name, expression, error in hook.conditions:
                try:
                    if expression is None:
                        raise EvalError(error)
                    if evaluation.run(expression) is False:
                        return None
                except (EvalError, ex.OutOfBudget) as e:
                    problems.append(str(e))
            if problems:
                return _Failed(hook.name, "failed to evaluate match condition: "
                               + "; ".join(problems))
        req["uid"] = str(uuid.uuid4())
        req["object"] = obj
        req["oldObject"] = old_obj
        return version, req

    def _request_deadline(self, attrs: AdmissionAttributes) -> float:
        """When the calls of the request ``attrs`` is about must all be over (the loop's
        clock): :attr:`request_timeout` after its first call."""
        deadline = attrs.state.get(_DEADLINE)
        if not isinstance(deadline, float):
            deadline = attrs.state[_DEADLINE] = \
                asyncio.get_running_loop().time() + self.request_timeout
        return deadline

    async def _call(self, hook: _Hook, req: Obj, attrs: AdmissionAttributes, *,
                    mutating: bool, slots: asyncio.Semaphore | None = None) -> rv.Response:
        """One AdmissionReview exchange (once one of the ``slots`` is free, when given),
        within ``timeoutSeconds`` and within the request's deadline; raises
        :class:`_Failed`."""
        try:
            target = self._target(hook)
        except CallFailed as e:
            raise _Failed(hook.name, f"failed to call webhook: {e}") from None
        timeout = hook.spec.get("timeoutSeconds")
        seconds = timeout if isinstance(timeout, int) and 0 < timeout <= 30 else 10
        loop = asyncio.get_running_loop()
        request_deadline = self._request_deadline(attrs)
        expired = f'Post "{target.url}": context deadline exceeded'
        try:
            if slots is not None:
                try:
                    async with asyncio.timeout_at(request_deadline):
                        await slots.acquire()
                except TimeoutError:
                    raise CallFailed(expired) from None
            try:
                left = min(float(seconds), request_deadline - loop.time())
                if left <= 0:
                    raise CallFailed(expired)
                body = await self.transport.post(target, rv.review(req), left)
            finally:
                if slots is not None:
                    slots.release()
        except CallFailed as e:
            raise _Failed(hook.name, f"failed to call webhook: {e}") from None
        try:
            return rv.parse_response(body, str(req["uid"]), mutating=mutating)
        except rv.InvalidResponse as e:
            raise _Failed(hook.name, f"received invalid webhook response: {e}") from None

    def _target(self, hook: _Hook) -> Target:
        return self.target(hook.spec.get("clientConfig") or {},
                           hook.spec.get("timeoutSeconds") or 10, hook.configuration)

    def target(self, config: Obj, timeout: Any, pool: str) -> Target:
        """Where a webhook with ``clientConfig`` ``config`` is called (a URL, or a Service
        through its Endpoints; :class:`CallFailed` when it cannot be); the connections of
        calls with the same ``pool`` are shared. CRD conversion webhooks use it too."""
        if not isinstance(config, dict):
            config = {}
        bundle = config.get("caBundle")
        ca = _decode_bundle(bundle)
        url = config.get("url")
        if isinstance(url, str) and url:
            parts = urlsplit(url)
            host = parts.hostname or ""
            try:
                port = parts.port or 443
            except ValueError:
                raise CallFailed(f'parse "{url}": invalid port') from None
            shown = f"{url}?timeout={timeout}s"
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            return Target(shown, address, host, ca, pool)
        service = config.get("service") or {}
        namespace = str(service.get("namespace") or "")
        name = str(service.get("name") or "")
        port = service.get("port") or 443
        path = str(service.get("path") or "/")
        host = f"{name}.{namespace}.svc"
        shown = f"https://{host}:{port}{path}?timeout={timeout}s"
        return Target(shown, self._service_address(namespace, name, port), host, ca, pool)

    def _service_address(self, namespace: str, name: str, port: Any) -> str:
        svc = self._cache.get(f"{SERVICE_PREFIX}{namespace}/{name}")
        if svc is None:
            raise CallFailed(f'service "{name}" not found')
        ports = [p for p in (svc.get("spec") or {}).get("ports") or [] if isinstance(p, dict)]
        chosen = next((p for p in ports if p.get("port") == port), None)
        if chosen is None:
            raise CallFailed(f"no service port {port} found for service \"{name}\"")
        endpoints = self._cache.get(f"{ENDPOINTS_PREFIX}{namespace}/{name}")
        for subset in (endpoints or {}).get("subsets") or []:
            if not isinstance(subset, dict):
                continue
            addresses = [str(a["ip"]) for a in subset.get("addresses") or []
                         if isinstance(a, dict) and isinstance(a.get("ip"), str)]
            eports = [p for p in subset.get("ports") or [] if isinstance(p, dict)]
            eport = next((p for p in eports if p.get("name", "") == chosen.get("name", "")),
                         eports[0] if len(eports) == 1 else None)
            if addresses and eport is not None and isinstance(eport.get("port"), int):
                ip = addresses[0]
                return f"[{ip}]:{eport['port']}" if ":" in ip else f"{ip}:{eport['port']}"
        raise CallFailed(f'no endpoints available for service "{name}"')

    async def _validate_one(self, hook: _Hook, index: int, prepared: tuple[str, Obj] | _Failed,
                            attrs: AdmissionAttributes, slots: asyncio.Semaphore
                            ) -> errors.ApiError | None:
        try:
            if isinstance(prepared, _Failed):
                raise prepared
            response = await self._call(hook, prepared[1], attrs, mutating=False,
                                         slots=slots)
        except _Failed as e:
            return self._failure(hook, e, f"failed-open.validating.webhook.admission.k8s.io/"
                                          f"round_0_index_{index}", attrs)
        self._report(hook, response, attrs)
        return None if response.allowed else denied(hook.name, response)

    async def _mutate_one(self, hook: _Hook, round_: int, index: int, new: Obj | None,
                          old: Obj | None, attrs: AdmissionAttributes,
                          ns_obj: Obj | None) -> bool | None:
        """Call one mutating webhook; whether it changed the object (None: not called)."""
        prepared = await self._prepare(hook, new, old, attrs, ns_obj, keep=False)
        if prepared is None:
            return None
        try:
            if isinstance(prepared, _Failed):
                raise prepared
            version, req = prepared
            response = await self._call(hook, req, attrs, mutating=True)
        except _Failed as e:
            failure = self._failure(hook, e, f"failed-open.mutation.webhook.admission.k8s.io/"
                                             f"round_{round_}_index_{index}", attrs)
            if failure is not None:
                raise failure from None
            return None
        self._report(hook, response, attrs)
        if not response.allowed:
            raise denied(hook.name, response)
        changed = False
        if response.patch and new is not None:
            target = req["object"]
            patched = apply_patch(target, response.patch)
            if decoding.too_deep(patched, decoding.MAX_DEPTH) is not None:
                # refused as any object that deep is (422), before anything walks it
                if attrs.revalidate is not None:
                    keep_identity(patched, new)
                    attrs.revalidate(patched)
                raise internal_error(f"the patched object nests deeper than "
                                     f"{decoding.MAX_DEPTH} levels")
            patched["apiVersion"] = target.get("apiVersion")
            patched["kind"] = target.get("kind")
            if version != attrs.version and attrs.convert is not None:
                patched = await attrs.convert(patched, attrs.version)
            keep_identity(patched, new)
            if patched != new:
                changed = True
                new.clear()
                new.update(patched)
        attrs.annotate(f"mutation.webhook.admission.k8s.io/round_{round_}_index_{index}",
                       orjson.dumps({"configuration": hook.configuration,
                                     "webhook": hook.name, "mutated": changed}).decode())
        return changed

    @staticmethod
    def _failure(hook: _Hook, error: _Failed, annotation: str,
                 attrs: AdmissionAttributes) -> errors.ApiError | None:
        if hook.fails_open:
            log.warning("failed calling webhook, failing open %s: %s", hook.name, error)
            attrs.annotate(annotation, hook.name)
            return None
        return internal_error(str(error))

    @staticmethod
    def _report(hook: _Hook, response: rv.Response, attrs: AdmissionAttributes) -> None:
        for warning in response.warnings:
            attrs.warn(warning)
        for key, value in response.annotations.items():
            attrs.annotate(f"{hook.name}/{key}", value)


def apply_patch(obj: Obj, operations: list[Any]) -> Obj:
    """``obj`` (left as it is) patched by a webhook's JSON patch; a patch that does not apply
    is a 500 ``Internal error occurred: ...``. The patch's bounds are ``patch.json_patch``'s
    (copies add at most ``MAX_COPY_BYTES``, operations shift at most
    ``MAX_SHIFTED_ELEMENTS`` array elements); the answer's size bounds the rest."""
    try:
        patched = patch.json_patch(obj, operations)
    except patch.PatchError as e:
        # a result too deep to walk included: one Kubernetes cannot decode either
        raise internal_error(str(e)) from None
    if not isinstance(patched, dict):
        raise internal_error("the patched object is not a JSON object")
    return patched


def keep_identity(patched: Obj, original: Obj) -> None:
    """What names the object and what the server owns stays as it was before the patch
    (the store has already chosen the object's key)."""
    before = original.get("metadata") or {}
    meta = patched.get("metadata")
    if not isinstance(meta, dict):
        meta = patched["metadata"] = {}
    for key in IDENTITY:
        if key in before:
            meta[key] = before[key]
        else:
            meta.pop(key, None)


def _decode_bundle(bundle: Any) -> bytes | None:
    if not isinstance(bundle, str) or not bundle:
        return None
    try:
        return base64.b64decode(bundle, validate=True)
    except (ValueError, binascii.Error):
        return None
