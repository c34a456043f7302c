"""Kubernetes' format library: named string validations usable from rules and messages.

``format.dns1123Label()`` (and ``dns1123Subdomain``, ``dns1035Label``, ``qualifiedName``,
``dns1123LabelPrefix``, ``dns1123SubdomainPrefix``, ``dns1035LabelPrefix``, ``labelValue``,
``uri``, ``uuid``, ``byte``, ``date``, ``datetime``), ``format.named(name)`` (an optional),
and ``<format>.validate(s)``, which is ``optional.none()`` for a valid string and otherwise
an optional list of the messages Kubernetes' validators return::

    !format.dns1123Label().validate(self.name).hasValue()
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from setpoint.apimachinery import regexp
from setpoint.apimachinery import validation as v
from setpoint.cel import types as t
from setpoint.cel.errors import NoSuchOverload
from setpoint.cel.functions import (
    REGEX_LENGTH_FACTOR,
    Function,
    actual_size,
    library,
    member,
    overload,
)
from setpoint.cel.library.urls import URLError, parse_request_uri
from setpoint.cel.objects import NONE, Opaque, Optional
from setpoint.cel.timevals import parse_timestamp

_DNS1035_FMT: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_RE: Final = regexp.Regexp(_DNS1035_FMT)
_DNS1035_MSG: Final = ("a DNS-1035 label must consist of lower case alphanumeric characters or "
                       "'-', start with an alphabetic character, and end with an alphanumeric "
                       "character")
_UUID_RE: Final = regexp.Regexp(
    r"(?i)(^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$)|(^[0-9a-f]{32}$)")
_DATE_RE: Final = regexp.Regexp(r"\d{4}-\d{2}-\d{2}")


def _mask_trailing_dash(name: str) -> str:
    """A prefix such as ``my-name-`` is validated as if its dash were a letter."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def _dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value.encode()) > 63:
        errs.append(v.max_len_error(63))
    if not _DNS1035_RE.fullmatch(value):
        errs.append(v.regex_error(_DNS1035_MSG, _DNS1035_FMT, "my-name", "abc-123"))
    return errs


def _uri(value: str) -> list[str]:
    try:
        parse_request_uri(value)
    except URLError as e:
        return [str(e)]
    return []


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    if not _DATE_RE.fullmatch(value):
        return ["invalid date"]
    try:
        parse_timestamp(value + "T00:00:00Z")
    except Exception:
        return ["invalid date"]
    return []


def _datetime(value: str) -> list[str]:
    try:
        parse_timestamp(value)
    except Exception:
        return ["invalid datetime"]
    return []


@dataclass(frozen=True, slots=True, eq=False)
class Format(Opaque):
    type_name: ClassVar[str] = "kubernetes.NamedFormat"
    name: str
    check: Callable[[str], list[str]]
    max_regex_size: int

    def equals(self, other: Any) -> bool:
        return isinstance(other, Format) and self.name == other.name


FORMATS: Final = {
    "dns1123Label": Format("DNS1123Label", v.is_dns1123_label, 30),
    "dns1123Subdomain": Format("DNS1123Subdomain", v.is_dns1123_subdomain, 60),
    "dns1035Label": Format("DNS1035Label", _dns1035_label, 30),
    "qualifiedName": Format("QualifiedName", v.is_qualified_name, 60),
    "dns1123LabelPrefix": Format(
        "DNS1123LabelPrefix", lambda s: v.is_dns1123_label(_mask_trailing_dash(s)), 30),
    "dns1123SubdomainPrefix": Format(
        "DNS1123SubdomainPrefix", lambda s: v.is_dns1123_subdomain(_mask_trailing_dash(s)), 60),
    "dns1035LabelPrefix": Format(
        "DNS1035LabelPrefix", lambda s: _dns1035_label(_mask_trailing_dash(s)), 30),
    "labelValue": Format("LabelValue", v.is_valid_label_value, 40),
    "uri": Format("URI", _uri, 1103),
    "uuid": Format("uuid", lambda s: [] if _UUID_RE.search(s) else
                   ["does not match the UUID format"], 86),
    "byte": Format("byte", _byte, 84),
    "date": Format("date", _date, 55),
    "datetime": Format("datetime", _datetime, 55),
}


def validate(fmt: Any, s: Any) -> Optional:
    if not isinstance(fmt, Format) or type(s) is not str:
        raise NoSuchOverload()
    errors = fmt.check(s)
    return Optional.of(list(errors)) if errors else NONE


def named(name: Any) -> Optional:
    if type(name) is not str:
        raise NoSuchOverload()
    f = FORMATS.get(name)
    return Optional.of(f) if f is not None else NONE


def _validate_cost(args: Sequence[Any], result: Any) -> int:
    fmt, s = args
    if not isinstance(fmt, Format):
        return 1
    return math.ceil((1 + actual_size(s)) * 0.1) * math.ceil(
        fmt.max_regex_size * REGEX_LENGTH_FACTOR)


def _constant(f: Format) -> Callable[[], Format]:
    return lambda: f


FORMAT_LIBRARY = library(
    Function("validate", (member("format-validate", (t.FORMAT, t.STRING),
                                 t.optional_of(t.list_of(t.STRING))),), validate, _validate_cost),
    Function("format.named", (overload("format-named", (t.STRING,), t.optional_of(t.FORMAT)),),
             named),
    *(Function(f"format.{name}", (overload(f"format.{name}", (), t.FORMAT),), _constant(f))
      for name, f in FORMATS.items()),
)
