"""Field paths and field errors, as Kubernetes' ``k8s.io/apimachinery/pkg/util/validation/field``.

A :class:`FieldError` names one problem at one path of an object. Lists of them become the
``details.causes`` of an ``Invalid`` (422) Status. Invariants:

* a path renders exactly as Kubernetes renders it: ``spec.items[2].name``, ``metadata.labels[app]``;
* :func:`sort_errors` gives a deterministic order (by path, then type, then detail), because
  schemas are dicts and iteration order must never decide what a client sees.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class FieldPath:
    """An immutable path into an object; ``FieldPath.root("spec").child("a").index(1)``."""

    parts: tuple[str, ...] = ()

    @classmethod
    def root(cls, *names: str) -> FieldPath:
        path = cls()
        for name in names:
            path = path.child(name)
        return path

    def child(self, name: str) -> FieldPath:
        if not self.parts:
            return FieldPath((name,))
        return FieldPath((*self.parts, "." + name))

    def index(self, i: int) -> FieldPath:
        return FieldPath((*self.parts, f"[{i}]"))

    def key(self, key: str) -> FieldPath:
        return FieldPath((*self.parts, f"[{key}]"))

    def __str__(self) -> str:
        return "".join(self.parts)

    def __bool__(self) -> bool:
        return bool(self.parts)


class ErrorType(enum.Enum):
    """The ``reason`` of a cause, and the words Kubernetes prints for it."""

    NOT_FOUND = ("FieldValueNotFound", "Not found")
    REQUIRED = ("FieldValueRequired", "Required value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    TOO_MANY = ("FieldValueTooMany", "Too many")
    INTERNAL = ("InternalError", "Internal error")
    TYPE_INVALID = ("FieldValueTypeInvalid", "Invalid value")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def words(self) -> str:
        return self.value[1]


_OMIT = object()


def go_float(value: float) -> str:
    """A float as Go's ``%v`` prints it: the shortest digits that round-trip, in exponent
    form when the decimal exponent is below -4 or at least 6 (``2.5e+08``, ``1e-05``),
    and without a trailing ``.0`` otherwise (``100``, ``0.5``)."""
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    _, digit_tuple, exp = Decimal(repr(abs(value))).normalize().as_tuple()
    assert isinstance(exp, int)
    digits = "".join(str(d) for d in digit_tuple)
    exponent = len(digits) - 1 + exp  # the decimal exponent of the first digit
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'+' if exponent >= 0 else '-'}{abs(exponent):02d}"
    if exponent >= 0:
        whole = digits[: exponent + 1].ljust(exponent + 1, "0")
        frac = digits[exponent + 1:]
    else:
        whole, frac = "0", "0" * (-exponent - 1) + digits
    return sign + whole + ("." + frac if frac else "")


def _render_value(value: Any) -> str:
    """Render a bad value the way Go's ``%#v`` of JSON-decoded data reads to users."""
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '"null"'  # Go substitutes the string "null" for a nil value, then quotes it
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return orjson.dumps(value, default=str).decode()


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem at one field. ``value`` is omitted from the message when not given."""

    type: ErrorType
    field: str
    detail: str = ""
    value: Any = _OMIT
    supported: tuple[str, ...] = ()

    @property
    def has_value(self) -> bool:
        return self.value is not _OMIT

    def message(self) -> str:
        """The text Kubernetes prints after ``field: ``, e.g. ``Required value``."""
        words = self.type.words
        if self.type is ErrorType.NOT_SUPPORTED:
            text = words
            if self.has_value:
                text += f": {_render_value(self.value)}"
            if self.supported:
                text += ": supported values: " + ", ".join(
                    orjson.dumps(s).decode() for s in self.supported)
            return text
        if self.type is ErrorType.TOO_MANY and self.has_value:
            return f"{words}: {_render_value(self.value)}: {self.detail}"
        if self.type in (ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG,
                         ErrorType.TOO_MANY, ErrorType.INTERNAL):
            return f"{words}: {self.detail}" if self.detail else words
        text = words
        if self.has_value:
            text += f": {_render_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def error(self) -> str:
        """``field: message``, as in the Status message."""
        return f"{self.field}: {self.message()}" if self.field else self.message()


def required(path: FieldPath | str, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, str(path), detail)


def invalid(path: FieldPath | str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, str(path), detail, value)


def forbidden(path: FieldPath | str, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, str(path), detail)


def not_supported(path: FieldPath | str, value: Any, supported: Iterable[str]) -> FieldError:
    return FieldError(ErrorType.NOT_SUPPORTED, str(path), "", value, tuple(supported))


def duplicate(path: FieldPath | str, value: Any) -> FieldError:
    return FieldError(ErrorType.DUPLICATE, str(path), "", value)


def too_long(path: FieldPath | str, max_length: int) -> FieldError:
    return FieldError(ErrorType.TOO_LONG, str(path),
                      f"may not be more than {max_length} bytes")


def too_many(path: FieldPath | str, actual: int, max_items: int) -> FieldError:
    return FieldError(ErrorType.TOO_MANY, str(path),
                      f"must have at most {max_items} items", actual)


def type_invalid(path: FieldPath | str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.TYPE_INVALID, str(path), detail, value)


def sort_errors(errors: Iterable[FieldError]) -> list[FieldError]:
    """A deterministic order: by field, then reason, then detail."""
    return sorted(errors, key=lambda e: (e.field, e.type.reason, e.detail, e.message()))
