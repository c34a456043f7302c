"""Cost limits, so that no rule (and no object) can stall the server.

Kubernetes bounds CEL at run time in two ways, and so does setpoint:

* **per call**: one evaluation of one rule (or one ``messageExpression``) may cost at most
  :data:`PER_CALL_LIMIT` units; past it the evaluation is stopped at once
  (:class:`~setpoint.cel.errors.CostLimitExceeded`);
* **per object**: all rules evaluated while validating one object share a :class:`Budget` of
  :data:`RUNTIME_BUDGET` units; when it runs out, the rule being evaluated fails with
  ``validation failed due to running out of cost budget, no further validation rules will be
  run`` and no further rule runs for that object.

Units are cel-go's (see :mod:`setpoint.cel.interpreter`): about one per variable, field
or function call, a tenth per string character for string functions, ten per list literal.
Evaluation is stopped by the cost counter, not by a clock, so results do not depend on load.

Not covered: the CRD-time *estimated* cost (Kubernetes rejects a rule whose worst case over
the schema's ``maxItems``/``maxLength`` exceeds 10,000,000 units); here such a rule is
accepted and bounded at run time by the limits above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

PER_CALL_LIMIT: Final = 1_000_000
RUNTIME_BUDGET: Final = 10_000_000
MAX_MESSAGE_EXPRESSION_BYTES: Final = 5 * 1024

OUT_OF_BUDGET: Final = ("validation failed due to running out of cost budget, "
                        "no further validation rules will be run")
MESSAGE_OUT_OF_BUDGET: Final = ("messageExpression evaluation failed due to running out of cost "
                                "budget, no further validation rules will be run")


@dataclass(slots=True)
class Budget:
    """The cost left for one object's validation. Create one per object; not thread-safe.

    ``remaining`` goes negative once exhausted; a walker should stop calling
    :func:`~setpoint.cel.validate.validate_rules` when :attr:`exhausted` is true.
    """

    remaining: int = RUNTIME_BUDGET
    per_call_limit: int = PER_CALL_LIMIT

    def __post_init__(self) -> None:
        if self.per_call_limit <= 0:
            raise ValueError("per_call_limit must be positive")

    @property
    def exhausted(self) -> bool:
        return self.remaining < 0

    def call_limit(self) -> int:
        """The most one evaluation may cost now: the per-call limit, or what is left."""
        return max(0, min(self.per_call_limit, self.remaining))

    def spend(self, cost: int) -> None:
        self.remaining -= cost

    def exhaust(self) -> None:
        self.remaining = -1
