"""Where writes meet ValidatingAdmissionPolicies: the admission hook every store runs.

For each write (CREATE, UPDATE, DELETE; never of the admission configuration itself), in
policy-name order: every policy whose ``matchConstraints`` match, each of its bindings whose
``matchResources`` match, each param the binding's ``paramRef`` selects (one evaluation with
``params: null`` when the policy has no ``paramKind`` or the binding no ``paramRef``), is
evaluated (:func:`setpoint.admission.policy.evaluate`). Failures are acted on by the
binding's ``validationActions``:

* ``Deny`` — the write fails with the first failure, in Kubernetes' form
  (``configmaps "x" is forbidden: ValidatingAdmissionPolicy 'p' with binding 'b' denied
  request: failed expression: ...``), its ``reason`` and the code of that reason (422 for
  Invalid, 403 Forbidden, 401 Unauthorized, 413 RequestEntityTooLarge);
* ``Warn`` — a ``Warning`` header (``Validation failed for ValidatingAdmissionPolicy 'p' with
  binding 'b': ...``);
* ``Audit`` — the audit annotation ``validation.policy.admission.k8s.io/validation_failure``.

Configuration errors (params not found with ``parameterNotFoundAction: Deny``, a namespaced
param kind for a cluster-scoped request, an unknown param kind) fail the write unless the
policy's ``failurePolicy`` is ``Ignore``.

Freshness: once this server has seen a policy or binding (or started writing one), every
write first waits until the watch cache holds every write acknowledged before it, so a policy
applies to the very next request (``kubectl apply -f policy.yaml && kubectl create ...``).
Without policies a write pays nothing. With several API servers a policy written through
another one applies once this server's cache has it, as Kubernetes' informers do.

Compiled policies are kept per stored object (cache objects are replaced on every write, so
identity is the version); nothing here writes to storage.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from setpoint.admission import matching
from setpoint.admission import policy as pol
from setpoint.admission.authz import Authorize, Authorizer
from setpoint.apimachinery import errors
from setpoint.auth.user import UserInfo
from setpoint.registry import watchcache as wc
from setpoint.registry.admissionregistration import BINDINGS, GROUP, POLICIES
from setpoint.registry.admissionswitch import AdmissionSwitch
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.resources import ResourceInfo

log = logging.getLogger(__name__)

Obj = dict[str, Any]

POLICY_PREFIX: Final = f"/registry/{GROUP}/{POLICIES}/"
BINDING_PREFIX: Final = f"/registry/{GROUP}/{BINDINGS}/"
NAMESPACE_PREFIX: Final = "/registry/core/namespaces/"
VALIDATION_FAILURE: Final = "validation.policy.admission.k8s.io/validation_failure"

_CODES: Final = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413,
                 "Invalid": 422}

#: the params of a kind: ``(api version, kind)`` -> (resource, convert to that version)
ParamSource = Callable[[str, str], "tuple[ResourceInfo, Callable[[Obj], Awaitable[Obj]]] | None"]


def _allow_all(attrs: Any) -> tuple[bool, str]:
    return True, ""


@dataclass(slots=True)
class _Denial:
    policy: str
    binding: str | None
    message: str
    reason: str = "Invalid"


class ConfigError(Exception):
    """A binding that cannot be evaluated (its params), in Kubernetes' words."""


class PolicyAdmission:
    """ValidatingAdmissionPolicy enforcement over one watch cache (see the module doc)."""

    def __init__(self, cache: wc.WatchCache, params: ParamSource) -> None:
        self._cache = cache
        self._params = params
        #: how ``authorizer`` checks are answered (the server's RBAC; everything is allowed
        #: until the server sets it, as for servers without authorization)
        self.authorize: Authorize = _allow_all
        self._compiled: dict[str, tuple[Obj, pol.CompiledPolicy]] = {}
        self._switch = AdmissionSwitch(cache, GROUP, (POLICIES, BINDINGS), (POLICY_PREFIX,))

    # --- the policies -----------------------------------------------------------------------

    def _policy(self, name: str, obj: Obj) -> pol.CompiledPolicy:
        hit = self._compiled.get(name)
        if hit is not None and hit[0] is obj:
            return hit[1]
        compiled = pol.compile_policy(obj)
        self._compiled[name] = (obj, compiled)
        return compiled

    def _policies(self) -> list[pol.CompiledPolicy]:
        found = [self._policy(key[len(POLICY_PREFIX):], obj)
                 for key, obj in self._cache.items(POLICY_PREFIX)]
        if len(self._compiled) > len(found):  # forget deleted policies
            names = {p.name for p in found}
            for name in [n for n in self._compiled if n not in names]:
                del self._compiled[name]
        return found

    def _bindings(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for _, obj in self._cache.items(BINDING_PREFIX):
            spec = obj.get("spec") or {}
            out.setdefault(str(spec.get("policyName") or ""), []).append(obj)
        return out

    # --- the hook ---------------------------------------------------------------------------

    def quiet(self, group: str, resource: str) -> bool:
        """Nothing to see on a write of ``group``/``resource`` now (see
        :class:`~setpoint.registry.admissionswitch.AdmissionSwitch`)."""
        return self._switch.quiet(group, resource)

    async def admit(self, new: Obj | None, old: Obj | None, attrs: AdmissionAttributes) -> None:
        if self._switch.exempt(attrs.group, attrs.resource) or not self._switch.on():
            return
        await self._cache.wait_fresh()
        policies = self._policies()
        if not policies:
            return
        bindings = self._bindings()
        if not bindings:
            return
        await self._dispatch(policies, bindings, new, old, attrs)

    async def _dispatch(self, policies: Iterable[pol.CompiledPolicy],
                        bindings: dict[str, list[Obj]], new: Obj | None, old: Obj | None,
                        attrs: AdmissionAttributes) -> None:
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        namespace = attrs.name if is_namespace else attrs.namespace
        request = matching.Request(
            operation=attrs.operation, group=attrs.group, version=attrs.version,
            resource=attrs.resource, subresource=attrs.subresource, namespace=namespace,
            name=attrs.name, versions=attrs.versions,
            object_labels=matching.labels_of(new), old_object_labels=matching.labels_of(old))
        ns_obj = None
        if namespace and not is_namespace:
            ns_obj = self._cache.get(NAMESPACE_PREFIX + namespace)
        ns_labels = matching.labels_of(ns_obj) if ns_obj is not None else None
        denials: list[_Denial] = []
        for policy in sorted(policies, key=lambda p: p.name):
            mine = bindings.get(policy.name)
            if not mine:
                continue
            match = matching.matches(policy.match_constraints, request, ns_labels)
            if match is None:
                continue
            collected: dict[str, list[str]] = {}
            for binding in sorted(mine, key=_name):
                spec = binding.get("spec") or {}
                if matching.matches(spec.get("matchResources"), request, ns_labels,
                                    binding=True) is None:
                    continue
                try:
                    params = await self.collect_params(policy.param_kind, spec,
                                                       attrs.namespace)
                except ConfigError as e:
                    if policy.fails_closed:
                        denials.append(_Denial(policy.name, _name(binding),
                                               f"failed to configure binding: {e}"))
                    continue
                objects = await attrs.in_version(new, old, match.version)
                for param in params:
                    inputs = self.inputs(objects, attrs, match.version,
                                         policy.param_kind is not None, param,
                                         None if is_namespace else ns_obj)
                    result = pol.evaluate(policy, inputs)
                    if result is not None:
                        self._act(policy, binding, result, attrs, denials, collected)
            for key, values in collected.items():
                attrs.annotate(f"{policy.name}/{key}", ", ".join(values))
        if denials:
            raise _denied(denials[0], attrs)

    def _act(self, policy: pol.CompiledPolicy, binding: Obj, result: pol.Result,
             attrs: AdmissionAttributes, denials: list[_Denial],
             collected: dict[str, list[str]]) -> None:
        name = _name(binding)
        actions = [a for a in (binding.get("spec") or {}).get("validationActions") or []
                   if isinstance(a, str)]
        for decision in result.decisions:
            for action in actions:
                if action == "Deny":
                    denials.append(_Denial(policy.name, name, decision.message,
                                           decision.reason))
                elif action == "Warn":
                    attrs.warn(f"Validation failed for ValidatingAdmissionPolicy "
                               f"'{policy.name}' with binding '{name}': {decision.message}")
                elif action == "Audit":
                    attrs.annotate(VALIDATION_FAILURE, orjson.dumps([{
                        "message": decision.message, "policy": policy.name, "binding": name,
                        "expressionIndex": max(decision.index, 0),
                        "validationActions": actions}]).decode())
        for message in result.errors:
            denials.append(_Denial(policy.name, name, message))
        for key, value in result.annotations:
            values = collected.setdefault(key, [])
            if value not in values:
                values.append(value)

    # --- inputs -----------------------------------------------------------------------------

    async def collect_params(self, param_kind: tuple[str, str] | None, spec: Obj,
                             namespace: str) -> list[Obj | None]:
        """The params a binding's ``paramRef`` selects for a policy of ``param_kind`` (one
        ``None`` without either); raises :class:`ConfigError`."""
        ref = spec.get("paramRef")
        if param_kind is None or not isinstance(ref, dict):
            return [None]
        api_version, kind = param_kind
        source = self._params(api_version, kind)
        if source is None:
            raise ConfigError(f"paramKind kind `{api_version}, Kind={kind}` not known")
        info, convert = source
        ref_namespace = str(ref.get("namespace") or "")
        if info.namespaced:
            where = ref_namespace or namespace
            if not where:
                raise ConfigError("cannot use namespaced paramRef in policy binding that "
                                   "matches cluster-scoped resources")
        else:
            if ref_namespace:
                raise ConfigError("paramRef.namespace must not be provided for a "
                                   "cluster-scoped `paramKind`")
            where = None
        name = ref.get("name")
        params: list[Obj | None]
        if isinstance(name, str) and name:
            found = self._cache.get(info.key(where, name))
            params = [await convert(found)] if found is not None else []
        else:
            try:
                selector = matching.selector(ref.get("selector") or {})
            except ValueError as e:
                raise ConfigError(str(e)) from None
            params = []
            for _, obj in self._cache.items(info.namespace_prefix(where)):
                if selector is None or selector.empty or selector.matches(
                        matching.labels_of(obj) or {}):
                    params.append(await convert(obj))
        if not params and ref.get("parameterNotFoundAction") == "Deny":
            raise ConfigError("no params found for policy binding with `Deny` "
                               "parameterNotFoundAction")
        return params

    def inputs(self, objects: tuple[Obj | None, Obj | None], attrs: AdmissionAttributes,
               version: str, has_params: bool, param: Obj | None,
               ns_obj: Obj | None) -> dict[str, Any]:
        """The CEL variables of one evaluation."""
        user = attrs.user or UserInfo("system:apiserver", groups=("system:masters",))
        inputs: dict[str, Any] = {
            "object": objects[0], "oldObject": objects[1],
            "request": request_object(attrs, version, user),
            "namespaceObject": namespace_object(ns_obj),
            "authorizer": Authorizer(self.authorize, user),
        }
        if has_params:
            inputs["params"] = param
        return inputs


def request_object(attrs: AdmissionAttributes, version: str, user: UserInfo) -> Obj:
    """The ``request`` variable: the AdmissionRequest of the write, seen in ``version``."""
    namespace = attrs.name if attrs.group == "" and attrs.resource == "namespaces" \
        else attrs.namespace
    user_info: Obj = {"username": user.name, "uid": user.uid, "groups": list(user.groups),
                      "extra": {k: list(v) for k, v in user.extra.items()}}
    return {
        "kind": {"group": attrs.group, "version": version, "kind": attrs.kind},
        "resource": {"group": attrs.group, "version": version, "resource": attrs.resource},
        "subResource": attrs.subresource,
        "requestKind": {"group": attrs.group, "version": attrs.version, "kind": attrs.kind},
        "requestResource": {"group": attrs.group, "version": attrs.version,
                            "resource": attrs.resource},
        "requestSubResource": attrs.subresource, "name": attrs.name, "namespace": namespace,
        "operation": attrs.operation, "userInfo": user_info, "dryRun": attrs.dry_run,
        "options": attrs.options,
    }


def namespace_object(ns: Obj | None) -> Obj | None:
    """The ``namespaceObject`` variable: the Namespace without its managed fields."""
    if ns is None:
        return None
    meta = {k: v for k, v in (ns.get("metadata") or {}).items()
            if k not in ("managedFields", "resourceVersion")}
    return {"metadata": meta, "spec": ns.get("spec") or {}, "status": ns.get("status") or {}}


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _denied(denial: _Denial, attrs: AdmissionAttributes) -> errors.ApiError:
    if denial.binding is not None:
        message = (f"ValidatingAdmissionPolicy '{denial.policy}' with binding "
                   f"'{denial.binding}' denied request: {denial.message}")
    else:
        message = f"ValidatingAdmissionPolicy '{denial.policy}' denied request: " \
                  f"{denial.message}"
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    text = f'{qualified} "{attrs.name}" is forbidden: {message}' if attrs.name \
        else f"{qualified} is forbidden: {message}"
    details: Obj = {"name": attrs.name, "kind": attrs.resource,
                    "causes": [{"message": message}]}
    if attrs.group:
        details["group"] = attrs.group
    reason = denial.reason or "Invalid"
    return errors.ApiError(text, details=details, code=_CODES.get(reason, 422), reason=reason)
