"""Kubernetes' semver library: ``semver(s[, normalize])``, ``isSemver(s[, normalize])``,
``major()``, ``minor()``, ``patch()``, ``isGreaterThan``, ``isLessThan``, ``compareTo``.

Versions are Semantic Versioning 2.0.0 strings (``1.2.3-rc.1+build.5``); numeric parts and
numeric pre-release identifiers may not have leading zeros; ordering follows the spec's
precedence rules (build metadata is ignored). ``normalize`` drops a leading ``v``, strips
leading zeros and fills a missing minor or patch with ``0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from setpoint.apimachinery import regexp
from setpoint.cel import types as t
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.functions import (
    Function,
    actual_size,
    library,
    member,
    overload,
    string_cost,
)
from setpoint.cel.objects import Opaque

_IDENT: Final = regexp.Regexp(r"[0-9A-Za-z-]+")
_NUMBER: Final = regexp.Regexp(r"0|[1-9][0-9]*")


class SemverError(ValueError):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class Semver(Opaque):
    type_name: ClassVar[str] = "kubernetes.Semver"
    major: int
    minor: int
    patch: int
    pre: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    def equals(self, other: Any) -> bool:
        return isinstance(other, Semver) and compare(self, other) == 0


def _number(text: str, what: str) -> int:
    if not text or not text.isascii() or not text.isdigit():
        raise SemverError(f"Invalid character(s) found in {what} number {text!r}")
    if len(text) > 1 and text[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {text!r}")
    return int(text)


def parse(text: str) -> Semver:
    if not text:
        raise SemverError("Version string empty")
    core, _, build_text = text.partition("+")
    core, dash, pre_text = core.partition("-")
    parts = core.split(".")
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch = _number(parts[2], "patch")
    pre: tuple[str, ...] = ()
    if dash:
        pre = tuple(pre_text.split("."))
        for p in pre:
            if not p:
                raise SemverError("Prerelease is empty")
            if not _IDENT.fullmatch(p):
                raise SemverError(f"Invalid character(s) found in prerelease {p!r}")
            if p.isdigit() and len(p) > 1 and p[0] == "0":
                raise SemverError(f"Numeric PreRelease version must not contain leading "
                                  f"zeroes {p!r}")
    build: tuple[str, ...] = ()
    if "+" in text:
        build = tuple(build_text.split("."))
        for b in build:
            if not b or not _IDENT.fullmatch(b):
                raise SemverError(f"Invalid character(s) found in build meta data {b!r}")
    return Semver(major, minor, patch, pre, build)


def normalize_and_parse(text: str) -> Semver:
    s = text.removeprefix("v")
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _pre_key(ident: str) -> tuple[int, int, str]:
    return (0, int(ident), "") if ident.isdigit() else (1, 0, ident)


def compare(a: Semver, b: Semver) -> int:
    ka, kb = (a.major, a.minor, a.patch), (b.major, b.minor, b.patch)
    if ka != kb:
        return (ka > kb) - (ka < kb)
    if not a.pre or not b.pre:
        return (not a.pre) - (not b.pre)
    pa = [_pre_key(p) for p in a.pre]
    pb = [_pre_key(p) for p in b.pre]
    return (pa > pb) - (pa < pb)


def to_semver(s: Any, normalize: Any = False) -> Semver:
    if type(s) is not str or type(normalize) is not bool:
        raise NoSuchOverload()
    try:
        return normalize_and_parse(s) if normalize else parse(s)
    except SemverError as e:
        raise EvalError(str(e)) from None


def is_semver(s: Any, normalize: Any = False) -> bool:
    try:
        to_semver(s, normalize)
    except EvalError:
        return False
    return True


def _v(x: Any) -> Semver:
    if not isinstance(x, Semver):
        raise NoSuchOverload()
    return x


_V, _S, _B = t.SEMVER, t.STRING, t.BOOL

SEMVERS = library(
    Function("semver", (overload("string_to_semver", (_S,), _V),
                        overload("string_bool_to_semver", (_S, _B), _V)), to_semver,
             lambda args, result: string_cost(actual_size(args[0]))),
    Function("isSemver", (overload("is_semver_string", (_S,), _B),
                          overload("is_semver_string_bool", (_S, _B), _B)), is_semver,
             lambda args, result: string_cost(actual_size(args[0]))),
    Function("major", (member("semver_major", (_V,), t.INT),), lambda x: _v(x).major),
    Function("minor", (member("semver_minor", (_V,), t.INT),), lambda x: _v(x).minor),
    Function("patch", (member("semver_patch", (_V,), t.INT),), lambda x: _v(x).patch),
    Function("isGreaterThan", (member("semver_is_greater_than", (_V, _V), _B),),
             lambda a, b: compare(_v(a), _v(b)) > 0),
    Function("isLessThan", (member("semver_is_less_than", (_V, _V), _B),),
             lambda a, b: compare(_v(a), _v(b)) < 0),
    Function("compareTo", (member("semver_compare_to", (_V, _V), t.INT),),
             lambda a, b: compare(_v(a), _v(b))),
)
