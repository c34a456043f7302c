"""Errors of the CEL engine.

::

    CELError
    ├── CELCompileError        a rule that does not parse or type-check (CRD-time)
    ├── EvalError              a rule that fails while evaluating (object-time)
    │   └── NoSuchOverload     no function accepts these argument types
    └── CostLimitExceeded      the per-call cost limit was reached; evaluation stopped

``CostLimitExceeded`` is deliberately not an ``EvalError``: CEL's logical operators absorb
errors (``error || true`` is ``true``), but running out of cost ends the evaluation.

An :class:`EvalError`'s text is what cel-go prints for the same failure (``no such key: x``,
``division by zero``, ``integer overflow`` ...), because Kubernetes copies it into the
``Invalid`` cause it returns.
"""

from __future__ import annotations


class CELError(Exception):
    """Any failure of the CEL engine."""


class CELCompileError(CELError):
    """A rule that cannot be compiled. ``detail`` reads as cel-go's issues do::

        ERROR: <input>:1:6: undeclared reference to 'foo' (in container '')
         | self.foo + bar
         | .....^
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class EvalError(CELError):
    """A runtime error; ``str(e)`` is the message Kubernetes shows."""


class NoSuchOverload(EvalError):
    """cel-go's runtime text is exactly ``no such overload``; Kubernetes matches on it."""

    def __init__(self) -> None:
        super().__init__("no such overload")


class CostLimitExceeded(CELError):
    def __init__(self) -> None:
        super().__init__("operation cancelled: actual cost limit exceeded")
