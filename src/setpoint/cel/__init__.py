"""CEL for CRD validation rules (``x-kubernetes-validations``), as Kubernetes evaluates them.

A pure-Python CEL implementation (parser, gradual type checker, closure interpreter with
cel-go's cost accounting) and Kubernetes' CEL environment: the standard definitions,
optionals, the string, list and set extensions, two-variable comprehensions, and the
Kubernetes libraries (lists, regex, URLs, quantities, IPs and CIDRs, formats, semver).
Nothing here does I/O or keeps global mutable state; see ``docs/cel.md`` for the design, the
engine comparison and what is not covered.

:mod:`setpoint.schema.celrules` is the walker that :class:`~setpoint.schema.CompiledSchema`
uses; this is how it calls the engine (one :class:`RuleCache` per CRD version, one
:class:`Budget` per validated object)::

    cache = cel.RuleCache()                     # when the CRD version's schema is compiled
    errors += cel.rule_errors(node, path, cache=cache)          # CRD-time, per node with rules

    budget = cel.Budget()                       # per create/update of one object
    def visit(node, value, old, has_old, path, resource_root=False):
        if node.validations and not budget.exhausted:
            errors.extend(cel.validate_rules(
                cel.rules_of(node), value, old, path=path, has_old=has_old,
                budget=budget, node=node, cache=cache, resource_root=resource_root,
                ratchet=warnings, unchanged=...))  # on update: is this node unchanged?
        ...  # recurse into properties / additionalProperties / items as Kubernetes does,
             # passing the correlated old child (map keys; map-list keys)

Rules inside an ``allOf`` branch apply to the structural node that carries the ``allOf``:
pass the branch's rules with that node (``validate_rules(cel.rules_of(branch), value, ...,
node=node)``, ``rule_errors(node, path, cache=cache, rules=cel.rules_of(branch))``), as
Kubernetes types them with the node's schema.

The engine imports nothing from :mod:`setpoint.schema`: a schema node is anything that
satisfies :class:`~setpoint.cel.schemas.Schema` (a structural ``Node`` does, as it is), a rule
entry anything that satisfies :class:`~setpoint.cel.schemas.RuleEntry`.

Invariants: rules are compiled once per (rule, node) and evaluated any number of times;
evaluation never mutates the object; every evaluation is bounded by the per-call cost limit
and every object by its budget, so no rule can stall the server.
"""

from setpoint.cel.compile import (
    CompiledRule,
    Rule,
    RuleCache,
    compile_rule,
    normalize_field_path,
    rule_errors,
    rules_of,
)
from setpoint.cel.cost import PER_CALL_LIMIT, RUNTIME_BUDGET, Budget
from setpoint.cel.errors import CELCompileError, CELError, CostLimitExceeded, EvalError
from setpoint.cel.validate import validate_rules

__all__ = [
    "PER_CALL_LIMIT",
    "RUNTIME_BUDGET",
    "Budget",
    "CELCompileError",
    "CELError",
    "CompiledRule",
    "CostLimitExceeded",
    "EvalError",
    "Rule",
    "RuleCache",
    "compile_rule",
    "normalize_field_path",
    "rule_errors",
    "rules_of",
    "validate_rules",
]
