"""Where writes meet MutatingAdmissionPolicies: the first mutating hook every store runs,
before the mutating webhooks (Kubernetes orders its MutatingAdmissionPolicy plugin before
MutatingAdmissionWebhook).

For each CREATE or UPDATE (never of the admission configuration itself), in policy-name
order: every policy whose ``matchConstraints`` match, each of its bindings (by name) whose
``matchResources`` match, each param the binding's ``paramRef`` selects (one invocation with
``params: null`` without a ``paramKind`` or ``paramRef``) is invoked: its ``matchConditions``
are evaluated and its mutations applied in order (:mod:`setpoint.admission.mutation`), on the
object in the version the policy matched (converted back afterwards). What names the object
and what the server owns in its metadata cannot be changed. The variables are the validating
policies' (``object``, ``oldObject``, ``request``, ``params``, ``namespaceObject``,
``authorizer``, ``variables``).

Reinvocation: an invocation of a policy with ``reinvocationPolicy: IfNeeded`` runs once more
when the object changed after it ran: once at the end of the policies' pass when a later
policy changed it, and once more after the mutating webhooks (:meth:`reinvoke`) when they
changed it. Never more than twice in all.

Errors (a match condition, an expression, a patch that does not apply, params not found
under ``parameterNotFoundAction: Deny``) are ignored under ``failurePolicy: Ignore``; under
``Fail`` the write is refused with Kubernetes' status: 403, reason ``Invalid`` (``Forbidden``
for a binding's params), message ``policy 'p' with binding 'b' denied request: <error>``, one
cause per error.

Each invocation is recorded as the audit annotation
``mutation.policy.admission.k8s.io/round_R_index_I`` (``{"policy", "binding", "mutated"}``).
When anything changed, the store prunes, defaults and validates the object again
(``attrs.revalidate``), so a policy cannot store what the schema refuses. Freshness is the
validating policies': once a policy has been seen, every write first waits until the watch
cache holds every acknowledged write.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import orjson

from setpoint.admission import matching
from setpoint.admission import mutation as mut
from setpoint.apimachinery import errors, typed
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import watchcache as wc
from setpoint.registry.admissionregistration import GROUP, MUTATING_BINDINGS, MUTATING_POLICIES
from setpoint.registry.admissionswitch import AdmissionSwitch
from setpoint.registry.options import AdmissionAttributes
from setpoint.registry.policies import NAMESPACE_PREFIX, ConfigError, PolicyAdmission
from setpoint.registry.webhooks import keep_identity

log = logging.getLogger(__name__)

Obj = dict[str, Any]

POLICY_PREFIX: Final = f"/registry/{GROUP}/{MUTATING_POLICIES}/"
BINDING_PREFIX: Final = f"/registry/{GROUP}/{MUTATING_BINDINGS}/"
ANNOTATION: Final = "mutation.policy.admission.k8s.io"
#: where the object as the policies last left it is kept between the two hooks
_STATE: Final = "mutatingpolicies"


@dataclass(slots=True)
class _Failure:
    policy: mut.CompiledPolicy
    binding: str
    message: str
    reason: str = "Invalid"


@dataclass(slots=True)
class _Invocation:
    """One (policy, binding, param) the pass may run."""

    policy: mut.CompiledPolicy
    binding: Obj
    version: str
    param: Obj | None

    @property
    def key(self) -> tuple[str, str, str, str]:
        meta = (self.param or {}).get("metadata") or {}
        return (self.policy.name, _name(self.binding), str(meta.get("namespace") or ""),
                str(meta.get("name") or ""))


class MutatingPolicyAdmission:
    """MutatingAdmissionPolicy enforcement over one watch cache (see the module doc)."""

    def __init__(self, cache: wc.WatchCache, validating: PolicyAdmission) -> None:
        self._cache = cache
        #: params, inputs and the authorizer are the validating policies'
        self._validating = validating
        self._compiled: dict[str, tuple[Obj, mut.CompiledPolicy]] = {}
        self._switch = AdmissionSwitch(cache, GROUP, (MUTATING_POLICIES, MUTATING_BINDINGS),
                                       (POLICY_PREFIX,))

    # --- the policies -----------------------------------------------------------------------

    def _policies(self) -> list[mut.CompiledPolicy]:
        found: list[mut.CompiledPolicy] = []
        for key, obj in self._cache.items(POLICY_PREFIX):
            name = key[len(POLICY_PREFIX):]
            hit = self._compiled.get(name)
            if hit is None or hit[0] is not obj:
                hit = self._compiled[name] = (obj, mut.compile_policy(obj))
            found.append(hit[1])
        if len(self._compiled) > len(found):
            names = {p.name for p in found}
            for name in [n for n in self._compiled if n not in names]:
                del self._compiled[name]
        return sorted(found, key=lambda p: p.name)

    def _bindings(self) -> dict[str, list[Obj]]:
        out: dict[str, list[Obj]] = {}
        for _, obj in self._cache.items(BINDING_PREFIX):
            spec = obj.get("spec") or {}
            out.setdefault(str(spec.get("policyName") or ""), []).append(obj)
        for found in out.values():
            found.sort(key=_name)
        return out

    def quiet(self, group: str, resource: str) -> bool:
        """Nothing to see on a write of ``group``/``resource`` now (see
        :class:`~setpoint.registry.admissionswitch.AdmissionSwitch`)."""
        return self._switch.quiet(group, resource)

    async def _ready(self, new: Obj | None, attrs: AdmissionAttributes) -> bool:
        if self._switch.exempt(attrs.group, attrs.resource):
            return False
        if new is None or attrs.operation not in ("CREATE", "UPDATE", "CONNECT"):
            return False
        if not self._switch.on():
            return False
        await self._cache.wait_fresh()
        return True

    # --- the hooks --------------------------------------------------------------------------

    async def admit(self, new: Obj | None, old: Obj | None, attrs: AdmissionAttributes) -> None:
        """The policies' pass (and its reinvocation round)."""
        if not await self._ready(new, attrs) or new is None:
            return
        policies = self._policies()
        bindings = self._bindings() if policies else {}
        if not bindings:
            return
        failures: list[_Failure] = []
        invocations = await self._invocations(policies, bindings, new, old, attrs, failures)
        if not invocations and not failures:
            return
        ran: dict[tuple[str, str, str, str], int] = {}
        step = 0
        last_change = -1
        for i, invocation in enumerate(invocations):
            step += 1
            if await self._invoke(invocation, 0, i, new, old, attrs, failures):
                last_change = step
            ran[invocation.key] = step
        changed = last_change >= 0
        reinvoked = False
        if changed:
            for i, invocation in enumerate(invocations):
                if invocation.policy.reinvocation_policy == "IfNeeded" and \
                        ran.get(invocation.key, step) < last_change:
                    reinvoked = True
                    await self._invoke(invocation, 1, i, new, old, attrs, failures)
        self._finish(failures, attrs)
        if not reinvoked and any(i.policy.reinvocation_policy == "IfNeeded"
                                 for i in invocations):
            attrs.state[_STATE] = (deep_copy(new), invocations)
        if changed and attrs.revalidate is not None:
            attrs.revalidate(new)

    async def reinvoke(self, new: Obj | None, old: Obj | None,
                       attrs: AdmissionAttributes) -> None:
        """After the mutating webhooks: the ``IfNeeded`` invocations once more when the
        webhooks changed the object (unless the policies' own pass already reinvoked)."""
        state = attrs.state.pop(_STATE, None)
        if state is None or new is None:
            return
        before, invocations = state
        if before == new:
            return
        failures: list[_Failure] = []
        changed = False
        for i, invocation in enumerate(invocations):
            if invocation.policy.reinvocation_policy == "IfNeeded":
                changed |= await self._invoke(invocation, 1, i, new, old, attrs, failures)
        self._finish(failures, attrs)
        if changed and attrs.revalidate is not None:
            attrs.revalidate(new)

    # --- one pass -----------------------------------------------------------------------------

    async def _invocations(self, policies: Iterable[mut.CompiledPolicy],
                           bindings: dict[str, list[Obj]], new: Obj, old: Obj | None,
                           attrs: AdmissionAttributes, failures: list[_Failure]
                           ) -> list[_Invocation]:
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        request = matching.Request(
            operation=attrs.operation, group=attrs.group, version=attrs.version,
            resource=attrs.resource, subresource=attrs.subresource,
            namespace=attrs.name if is_namespace else attrs.namespace, name=attrs.name,
            versions=attrs.versions, object_labels=matching.labels_of(new),
            old_object_labels=matching.labels_of(old))
        ns_obj = self._namespace(attrs)
        ns_labels = matching.labels_of(ns_obj) if ns_obj is not None else None
        out: list[_Invocation] = []
        for policy in policies:
            mine = bindings.get(policy.name)
            if not mine:
                continue
            match = matching.matches(policy.match_constraints, request, ns_labels)
            if match is None:
                continue
            for binding in mine:
                spec = binding.get("spec") or {}
                if matching.matches(spec.get("matchResources"), request, ns_labels,
                                    binding=True) is None:
                    continue
                try:
                    params = await self._validating.collect_params(
                        policy.param_kind, spec, attrs.namespace)
                except ConfigError as e:
                    failures.append(_Failure(policy, _name(binding), str(e), "Forbidden"))
                    continue
                out.extend(_Invocation(policy, binding, match.version, p) for p in params)
        return out

    def _namespace(self, attrs: AdmissionAttributes) -> Obj | None:
        is_namespace = attrs.group == "" and attrs.resource == "namespaces"
        if attrs.namespace and not is_namespace:
            return self._cache.get(NAMESPACE_PREFIX + attrs.namespace)
        return None

    async def _invoke(self, invocation: _Invocation, round_: int, index: int, new: Obj,
                      old: Obj | None, attrs: AdmissionAttributes,
                      failures: list[_Failure]) -> bool:
        """Run one invocation on ``new`` (changed in place); whether it changed it."""
        policy = invocation.policy
        version = invocation.version
        obj, old_obj = await attrs.in_version(new, old, version, keep=False)
        if obj is None:
            return False
        inputs = self._validating.inputs((obj, old_obj), attrs, version,
                                         policy.param_kind is not None, invocation.param,
                                         self._namespace(attrs))
        binding = _name(invocation.binding)
        matched = mut.matches(policy, inputs)
        if matched is False:
            return False
        if isinstance(matched, str):
            failures.append(_Failure(policy, binding, matched))
            return False
        del inputs["object"]
        merge_type = attrs.field_type(version) if attrs.field_type is not None \
            else typed.object_type()
        outcome = mut.mutate(policy, inputs, obj, merge_type)
        failures.extend(_Failure(policy, binding, e) for e in outcome.errors)
        patched = outcome.object
        changed = False
        if patched is not obj and patched != obj:
            patched["apiVersion"] = obj.get("apiVersion")
            patched["kind"] = obj.get("kind")
            if version != attrs.version and attrs.convert is not None:
                patched = await attrs.convert(patched, attrs.version)
            keep_identity(patched, new)
            if patched != new:
                changed = True
                new.clear()
                new.update(patched)
        attrs.annotate(f"{ANNOTATION}/round_{round_}_index_{index}", orjson.dumps({
            "policy": policy.name, "binding": binding, "mutated": changed}).decode())
        return changed

    @staticmethod
    def _finish(failures: list[_Failure], attrs: AdmissionAttributes) -> None:
        refused = [f for f in failures if f.policy.fails_closed]
        for f in failures:
            if not f.policy.fails_closed:
                log.info("MutatingAdmissionPolicy %s with binding %s failed open: %s",
                         f.policy.name, f.binding, f.message)
        if refused:
            raise denied(refused, attrs)


def denied(failures: list[_Failure], attrs: AdmissionAttributes) -> errors.ApiError:
    """Kubernetes' refusal for policy errors under ``failurePolicy: Fail``."""
    messages = [f"policy '{f.policy.name}' with binding '{f.binding}' denied request: "
                f"{f.message}" for f in failures]
    details: Obj = {"name": attrs.name, "kind": attrs.resource,
                    "causes": [{"message": m} for m in messages]}
    if attrs.group:
        details["group"] = attrs.group
    return errors.ApiError(messages[0], details=details, code=403, reason=failures[0].reason)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
