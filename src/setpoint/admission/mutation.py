"""A MutatingAdmissionPolicy compiled, and applied to one object for one binding and param.

:func:`compile_policy` compiles every expression of a stored policy once, in the mutation
environment (:mod:`setpoint.admission.mutationtypes`); an expression that does not compile
becomes an error of that expression when it runs. :func:`mutate` runs, in Kubernetes' order:

1. ``matchConditions``: any ``false`` skips the policy; errors (with none false) are one
   error of the invocation, nothing is mutated;
2. each mutation in order, on the object as the previous ones left it, with its own
   evaluation (variables are evaluated again, on that object) and its own cost budget:

   * ``JSONPatch``: the list of ``JSONPatch`` values is applied as RFC 6902 operations; a
     failed ``test`` leaves the object as it was (no error);
   * ``ApplyConfiguration``: the ``Object{...}`` value (nested types named by their field
     paths) is merged into the object as server-side apply merges, over the resource's merge
     type: maps merge, associative lists merge by key, other lists are replaced; a
     configuration that sets an atomic map or struct is refused (``may not mutate atomic
     arrays, maps or structs``), as an apply configuration cannot say what to keep in it.

   An error of one mutation is recorded and the next mutation runs (Kubernetes' dispatcher
   does the same; the failure policy then decides).

Bounds: an expression's result may hold at most :data:`MAX_RESULT_BYTES` of JSON, and the
values one JSON patch adds at most as much: no expression can build an object that outgrows
the request it mutates by more than that.

Invariant: inputs are never mutated; the object returned is a new one (or the same object
when nothing changed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from setpoint.admission import expressions as ex
from setpoint.admission import mutationtypes as mt
from setpoint.admission.policy import Compiled, param_kind
from setpoint.apimachinery import patch, typed
from setpoint.apimachinery.jsonshape import as_dict, objects_in
from setpoint.cel import types as t
from setpoint.cel.errors import EvalError
from setpoint.cel.objects import StructValue, type_of
from setpoint.cel.structs import to_json

Obj = dict[str, Any]

PATCH_TYPES: Final = ("ApplyConfiguration", "JSONPatch")
REINVOCATION_POLICIES: Final = ("Never", "IfNeeded")
#: the most JSON one mutation's result (or the values its JSON patch adds) may hold
MAX_RESULT_BYTES: Final = 3 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Mutation:
    patch_type: str
    expression: Compiled


@dataclass(frozen=True, slots=True)
class CompiledPolicy:
    name: str
    generation: int
    failure_policy: str
    reinvocation_policy: str
    param_kind: tuple[str, str] | None
    match_constraints: Mapping[str, Any] | None
    match_conditions: tuple[tuple[str, Compiled], ...]
    variables: tuple[tuple[str, Compiled], ...]
    mutations: tuple[Mutation, ...]

    @property
    def fails_closed(self) -> bool:
        return self.failure_policy != "Ignore"


@dataclass(slots=True)
class Outcome:
    """What one invocation did: the object after it, and the errors it met."""

    object: Obj
    errors: list[str] = field(default_factory=list)


def declarations(spec: Mapping[str, Any]) -> tuple[
        ex.Declarations, list[tuple[str, str, ex.Declarations]]]:
    """The declarations of a policy's expressions after its variables, and each variable's
    ``(name, source, declarations)`` in order (variables are typed in the mutation
    environment, so a variable may build an ``Object``)."""
    has_params = param_kind(spec) is not None
    types: dict[str, t.Type] = {}
    steps: list[tuple[str, str, ex.Declarations]] = []
    for var in objects_in(spec.get("variables")):
        name = str(var.get("name") or "")
        source = str(var.get("expression") or "")
        decl = ex.Declarations(has_params=has_params, variables=dict(types))
        steps.append((name, source, decl))
        try:
            types[name] = ex.compile_expression(source, decl, ex.ANY_RESULT,
                                                mt.MUTATION_LIBRARY).type
        except ex.CompileError:
            types[name] = t.DYN
    final = ex.Declarations(has_params=has_params, variables=dict(types) if steps else None)
    return final, steps


def compile_mutation(source: str, patch_type: str, decl: ex.Declarations) -> ex.Expression:
    """A mutation's expression; :class:`~setpoint.admission.expressions.CompileError` when it
    does not compile or does not evaluate to what its patch type needs."""
    expression = ex.compile_expression(source, decl, ex.ANY_RESULT, mt.MUTATION_LIBRARY)
    ty = expression.type
    if patch_type == "ApplyConfiguration":
        if not mt.is_object(ty):
            raise ex.CompileError("must evaluate to Object")
    elif not (ty.kind == "list" and ty.params[0].kind == "object"
              and ty.params[0].name == "JSONPatch"):
        raise ex.CompileError(f"must evaluate to {mt.JSON_PATCH_LIST}")
    return expression


def _compile(source: Any, decl: ex.Declarations, results: tuple[t.Type, ...]) -> Compiled:
    text = source if isinstance(source, str) else ""
    try:
        return Compiled(text, ex.compile_expression(text, decl, results, mt.MUTATION_LIBRARY))
    except ex.CompileError as e:
        return Compiled(text, None, f"compilation error: {e.detail}")


def _expression_of(mutation: Mapping[str, Any]) -> str:
    patch_type = mutation.get("patchType")
    holder = as_dict(mutation.get("applyConfiguration" if patch_type == "ApplyConfiguration"
                                else "jsonPatch"))
    source = holder.get("expression")
    return source if isinstance(source, str) else ""


def compile_policy(obj: Mapping[str, Any]) -> CompiledPolicy:
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    decl, steps = declarations(spec)
    variables = tuple((name, _compile(source, d, ex.ANY_RESULT)) for name, source, d in steps)
    conditions = tuple(
        (str(c.get("name") or ""), _compile(c.get("expression"), decl, ex.BOOL_RESULT))
        for c in objects_in(spec.get("matchConditions")))
    mutations: list[Mutation] = []
    for m in objects_in(spec.get("mutations")):
        patch_type = str(m.get("patchType") or "")
        source = _expression_of(m)
        try:
            compiled = Compiled(source, compile_mutation(source, patch_type, decl))
        except ex.CompileError as e:
            compiled = Compiled(source, None, f"compilation error: {e.detail}")
        mutations.append(Mutation(patch_type, compiled))
    failure = spec.get("failurePolicy")
    reinvocation = spec.get("reinvocationPolicy")
    generation = meta.get("generation")
    return CompiledPolicy(
        name=str(meta.get("name") or ""),
        generation=generation if isinstance(generation, int) else 0,
        failure_policy=failure if failure in ("Fail", "Ignore") else "Fail",
        reinvocation_policy=reinvocation if reinvocation in REINVOCATION_POLICIES else "Never",
        param_kind=param_kind(spec),
        match_constraints=spec.get("matchConstraints")
        if isinstance(spec.get("matchConstraints"), Mapping) else None,
        match_conditions=conditions, variables=variables, mutations=tuple(mutations))


# --- evaluation ------------------------------------------------------------------------------


def _evaluation(policy: CompiledPolicy, inputs: Mapping[str, Any]) -> ex.Evaluation:
    variables = {name: c.expression for name, c in policy.variables
                 if c.expression is not None}
    broken = {name: c.error for name, c in policy.variables if c.expression is None}
    return ex.Evaluation(dict(inputs), variables, broken=broken)


def _run(evaluation: ex.Evaluation, compiled: Compiled) -> Any:
    if compiled.expression is None:
        raise EvalError(compiled.error)
    return evaluation.run(compiled.expression)


def matches(policy: CompiledPolicy, inputs: Mapping[str, Any]) -> bool | str:
    """The policy's ``matchConditions`` on ``inputs``: whether they all hold, or the error
    (several joined) when none is false and some failed."""
    evaluation = _evaluation(policy, inputs)
    errors: list[str] = []
    for _name, condition in policy.match_conditions:
        try:
            if _run(evaluation, condition) is False:
                return False
        except (EvalError, ex.OutOfBudget) as e:
            errors.append(str(e))
    return "; ".join(errors) if errors else True


def mutate(policy: CompiledPolicy, inputs: Mapping[str, Any], obj: Obj,
           merge_type: typed.TypeSpec) -> Outcome:
    """Apply the policy's mutations in order to ``obj`` (``inputs`` are the other variables:
    ``oldObject``, ``request``, ``params``, ``namespaceObject``, ``authorizer``)."""
    outcome = Outcome(obj)
    for mutation in policy.mutations:
        evaluation = _evaluation(policy, {**inputs, "object": outcome.object})
        try:
            value = _run(evaluation, mutation.expression)
            if mutation.patch_type == "ApplyConfiguration":
                patched = apply_configuration(outcome.object, value, merge_type)
            else:
                patched = apply_json_patch(outcome.object, value)
        except (EvalError, ex.OutOfBudget, MutationError) as e:
            outcome.errors.append(str(e))
            continue
        outcome.object = patched
    return outcome


class MutationError(Exception):
    """A mutation's result that cannot be applied (Kubernetes' text)."""


def _bounded_json(value: Any) -> Any:
    out = to_json(value)
    if len(orjson.dumps(out)) > MAX_RESULT_BYTES:
        raise MutationError(f"the result is larger than {MAX_RESULT_BYTES} bytes")
    return out


def apply_json_patch(obj: Obj, value: Any) -> Obj:
    """``value`` (a list of ``JSONPatch``) applied to ``obj``: a new object, or ``obj`` when a
    ``test`` failed."""
    if type(value) is not list and not isinstance(value, list):
        raise MutationError("type mismatch: JSONPatchType.expression should evaluate to array")
    operations: list[Obj] = []
    for item in value:
        if type(item) is not StructValue or item.type_name != "JSONPatch":
            raise MutationError(f"type mismatch: JSONPatchType.expression should evaluate to "
                                f"array of JSONPatch, found {type_of(item).name}")
        operation: Obj = {}
        for key in ("op", "path", "from"):
            if key in item.fields:
                operation[key] = to_json(item.fields[key])
        if "value" in item.fields:
            operation["value"] = _bounded_json(item.fields["value"])
        operations.append(operation)
    try:
        patched = patch.json_patch(obj, operations, max_added_bytes=MAX_RESULT_BYTES)
    except patch.PatchTestFailed:
        return obj
    except patch.PatchError as e:
        raise MutationError(f"JSON Patch: {e}") from None
    if not isinstance(patched, dict):
        raise MutationError("JSON Patch: the patched object is not a JSON object")
    return patched


def check_type_names(value: StructValue, name: str = mt.OBJECT) -> None:
    """Kubernetes' ``CheckTypeNamesMatchFieldPathNames``: every nested ``Object.…`` value is
    named by the path of the field that holds it."""
    if value.type_name != name:
        raise MutationError(f"type mismatch: expected type name {name!r} but got "
                            f"{value.type_name!r}")
    for key, child in value.fields.items():
        _check_child(child, f"{name}.{key}")


def _check_child(child: Any, name: str) -> None:
    if type(child) is StructValue:
        check_type_names(child, name)
    elif type(child) is list:
        for item in child:
            _check_child(item, name)


def apply_configuration(obj: Obj, value: Any, merge_type: typed.TypeSpec) -> Obj:
    """``value`` (an ``Object{...}``) merged into ``obj`` over ``merge_type``."""
    if type(value) is not StructValue:
        raise MutationError(f"unsupported return type from ApplyConfiguration expression: "
                            f"{type_of(value).name}")
    check_type_names(value)
    config = _bounded_json(value)
    if not isinstance(config, dict):
        raise MutationError(f"invalid return type: {type(config).__name__}")
    try:
        typed.validate(merge_type, config)
    except ValueError as e:
        raise MutationError(f"error applying patch: failed to create typed patch object: "
                            f"{e}") from None
    atomics = atomic_paths(merge_type, config)
    if atomics:
        raise MutationError("error applying patch: invalid ApplyConfiguration: may not "
                            "mutate atomic arrays, maps or structs: " + ", ".join(atomics))
    try:
        merged = typed.merge(merge_type, obj, config)
    except ValueError as e:
        raise MutationError(f"error applying patch: failed to merge patch: {e}") from None
    return merged if isinstance(merged, dict) else obj


def atomic_paths(spec: typed.TypeSpec, value: Any, path: str = "") -> list[str]:
    """The paths in ``value`` that set an atomic map or struct of ``spec`` (lists that are
    atomic are replaced whole, as newer Kubernetes versions allow)."""
    found: list[str] = []
    if isinstance(value, dict) and spec.kind == "map":
        if spec.atomic:
            return [path or "."]
        for key, child in value.items():
            found.extend(atomic_paths(spec.field_type(key), child, f"{path}.{key}"))
    elif isinstance(value, list) and spec.kind == "list" and spec.relationship == "map":
        element = spec.element or typed.DEDUCED
        for i, item in enumerate(value):
            found.extend(atomic_paths(element, item, f"{path}[{i}]"))
    return found
