"""Bounded decoding of JSON and YAML bodies into JSON values, and the nesting-depth limit.

Request bodies come from anyone. :func:`decode_json` and :func:`decode_yaml` turn any bytes
into either a JSON value or a :class:`DecodeError` whose message names the limit that was hit —
never another exception, and never work out of proportion to the input. Invariants of a
returned value:

* it is JSON-shaped: ``dict`` with ``str`` keys, ``list``, ``str``, ``int``, ``float``, ``bool``,
  ``None``, every node its own object (YAML aliases are expanded into copies, so mutating one
  place never changes another), and ``orjson`` can encode it;
* it is nested at most :attr:`DecodeLimits.max_depth` containers deep (the top-level object
  counts one; scalars do not count);
* every ``int`` fits in int64 and every ``float`` is finite. An integer beyond int64 becomes a
  float, as Kubernetes' decoder does (``sigs.k8s.io/json`` falls back to float64); a number
  beyond float64's range is refused;
* strings are valid Unicode (no lone surrogates).

YAML alias expansion is refused by go-yaml's rule (what Kubernetes' ``sigs.k8s.io/yaml``
decodes with): once more than 100 nodes came from aliases and more than 1,000 were decoded,
the share decoded through aliases may not exceed 99 % up to 400,000 decoded nodes, falling
linearly to 10 % at 4,000,000 — ``document contains excessive aliasing``. Whatever a body
holds, decoding then does at most about 400,000 node copies beyond the nodes it spells out.

YAML is read as Kubernetes reads it in practice: JSON first (a JSON body sent as YAML decodes
as JSON), then YAML 1.1 through PyYAML's resolver (``yes``/``on`` are booleans, ``0x1f`` an
integer), merge keys (``<<``) honoured with explicit keys winning. Timestamps keep their text,
as go-yaml keeps it when decoding into an untyped value. A stream with several documents is
refused unless exactly one of them is non-empty.

Non-guarantees: the number of nodes is bounded only by the body's size (the caller bounds the
size); only the core YAML tags are understood (others are refused).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from setpoint.apimachinery import fields

__all__ = [
    "MAX_DEPTH",
    "DEFAULT_LIMITS",
    "DecodeError",
    "DecodeLimits",
    "decode_json",
    "decode_yaml",
    "depth",
    "too_deep",
]

#: How deep an object may nest. orjson encodes at most 254 levels; the deepest response
#: wraps an object 4 levels down (a watch event of a Table row) and its managedFields are
#: 5 levels deeper than the object itself, which leaves more than 100 levels of headroom; the
#: recursive schema, patch and field-management code stays far from Python's recursion limit.
MAX_DEPTH = 128

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# go-yaml's alias rule (decode.go, allowedAliasRatio)
_ALIAS_MIN_ALIASED = 100
_ALIAS_MIN_DECODED = 1000
_ALIAS_RANGE_LOW = 400_000
_ALIAS_RANGE_HIGH = 4_000_000

# A number literal longer than this is beyond int64 and is read as a float at once, so int()
# never sees thousands of digits.
_MAX_INT_LITERAL = 64

_TAG = "tag:yaml.org,2002:"
_MAPPING_TAGS = frozenset({_TAG + "map", _TAG + "set", _TAG + "omap", _TAG + "pairs"})
_SEQUENCE_TAGS = frozenset({_TAG + "seq", _TAG + "omap", _TAG + "pairs"})
_TIMESTAMP = yaml.constructor.SafeConstructor.timestamp_regexp
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}


class DecodeError(ValueError):
    """A body that is not valid in its format, or exceeds a decoding limit (in the message)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeLimits:
    """Structural limits of decoding; the defaults are what the server uses.

    ``max_depth`` is capped at 512 so the recursive YAML builder stays clear of Python's
    recursion limit.
    """

    max_depth: int = MAX_DEPTH

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= 512:
            raise ValueError("max_depth must be between 1 and 512")


DEFAULT_LIMITS = DecodeLimits()


def _depth_error(limit: int) -> DecodeError:
    return DecodeError(f"the object is nested deeper than the limit of {limit} levels")


# --- JSON ----------------------------------------------------------------------------------------


def decode_json(raw: bytes | str, limits: DecodeLimits = DEFAULT_LIMITS) -> Any:
    """``raw`` as JSON, within ``limits``; :class:`DecodeError` otherwise."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if "depth limit" in str(e) or "recursion" in str(e).lower():
            raise _depth_error(limits.max_depth) from e
        raise DecodeError(str(e)) from e
    if type(raw) is bytes and _surely_within(raw, limits.max_depth):
        return value
    return _bound_json(value, limits.max_depth)


# every digit to "0", every other byte to " ": a long number is then a run of "0"s
_DIGITS_ONLY = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 19


def _surely_within(raw: bytes, max_depth: int) -> bool:
    """Whether the JSON text ``raw`` surely decodes to a value that :func:`_bound_json` would
    leave as it is, read from the bytes alone: no more than ``max_depth`` opening brackets in
    all (so no deeper nesting), and no run of 19 digits (an integer beyond int64 has at
    least 19). Brackets and digits inside strings count too, so a ``False`` only means the
    walk must decide."""
    return raw.count(b"{") + raw.count(b"[") <= max_depth and \
        _LONG_NUMBER not in raw.translate(_DIGITS_ONLY)


def _bound_json(value: Any, max_depth: int) -> Any:
    """Check the depth of an orjson result and turn integers beyond int64 into floats."""
    if type(value) is int:
        return _fit_int(value)
    if type(value) is not dict and type(value) is not list:
        return value
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise _depth_error(max_depth)
        if type(node) is dict:
            for key, child in node.items():
                kind = type(child)
                if kind is dict or kind is list:
                    stack.append((child, depth + 1))
                elif kind is int and not INT64_MIN <= child <= INT64_MAX:
                    node[key] = float(child)  # same key: the dict does not change size
        else:
            for i, child in enumerate(node):
                kind = type(child)
                if kind is dict or kind is list:
                    stack.append((child, depth + 1))
                elif kind is int and not INT64_MIN <= child <= INT64_MAX:
                    node[i] = float(child)
    return value


def _fit_int(value: int) -> int | float:
    if INT64_MIN <= value <= INT64_MAX:
        return value
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if math.isinf(result):
        raise DecodeError("a number is out of the range of a 64-bit float")
    return result


# --- YAML ----------------------------------------------------------------------------------------


def decode_yaml(raw: bytes | str, limits: DecodeLimits = DEFAULT_LIMITS) -> Any:
    """``raw`` as YAML (JSON first), within ``limits``; :class:`DecodeError` otherwise.

    A stream of several documents must hold exactly one non-empty document.
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    else:
        return _bound_json(value, limits.max_depth)
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"yaml: invalid UTF-8: {e.reason} at byte {e.start}") from e
    else:
        text = raw
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise DecodeError(f"yaml: the text is not valid Unicode: {e.reason}") from e
    builder = _Builder(limits.max_depth)
    documents: list[Any] = []
    try:
        for node in yaml.compose_all(text, Loader=_Loader):
            value = builder.build(node, 1)
            if value is not None:
                documents.append(value)
    except yaml.YAMLError as e:
        if "maximum nesting depth" in str(e):
            raise _depth_error(limits.max_depth) from e
        raise DecodeError(f"yaml: {_one_line(e)}") from e
    except RecursionError as e:  # only the pure-Python composer recurses
        raise _depth_error(limits.max_depth) from e
    if len(documents) != 1:
        raise DecodeError("the body must contain exactly one YAML document")
    return documents[0]


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _one_line(error: yaml.YAMLError) -> str:
    return " ".join(str(error).split())


def _allowed_alias_ratio(decoded: int) -> float:
    if decoded <= _ALIAS_RANGE_LOW:
        return 0.99
    if decoded >= _ALIAS_RANGE_HIGH:
        return 0.10
    span = _ALIAS_RANGE_HIGH - _ALIAS_RANGE_LOW
    return 0.99 - 0.89 * (decoded - _ALIAS_RANGE_LOW) / span


class _Builder:
    """JSON values from composed YAML nodes, counting nodes as go-yaml counts decodes.

    The composer hands an alias back as the very node object its anchor named, so a node met
    a second time (in document order, anchors come first) is an alias expansion.
    """

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.decoded = 0
        self.aliased = 0
        self.alias_depth = 0
        self.seen: set[int] = set()
        self.open: set[int] = set()  # nodes being built: met again means a self-containing anchor

    def build(self, node: yaml.Node, depth: int) -> Any:
        ident = id(node)
        via_alias = ident in self.seen
        if via_alias:
            if ident in self.open:
                raise DecodeError("yaml: anchor value contains itself")
            self.alias_depth += 1
        else:
            self.seen.add(ident)
        try:
            self._count()
            if isinstance(node, yaml.ScalarNode):
                return self._scalar(node)
            if depth > self.max_depth:
                raise _depth_error(self.max_depth)
            self.open.add(ident)
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._mapping(node, depth)
                assert isinstance(node, yaml.SequenceNode)
                return self._sequence(node, depth)
            finally:
                self.open.discard(ident)
        finally:
            if via_alias:
                self.alias_depth -= 1

    def _count(self) -> None:
        self.decoded += 1
        if self.alias_depth:
            self.aliased += 1
            if (self.aliased > _ALIAS_MIN_ALIASED and self.decoded > _ALIAS_MIN_DECODED
                    and self.aliased / self.decoded > _allowed_alias_ratio(self.decoded)):
                share = _allowed_alias_ratio(self.decoded)
                raise DecodeError(
                    f"yaml: document contains excessive aliasing: {self.aliased} of "
                    f"{self.decoded} decoded nodes came from aliases, more than the "
                    f"{share:.0%} allowed for a document of this size")

    def _sequence(self, node: yaml.SequenceNode, depth: int) -> list[Any]:
        if node.tag not in _SEQUENCE_TAGS and node.tag != "!":
            raise DecodeError(f"yaml: cannot decode a sequence tagged {node.tag}")
        return [self.build(item, depth + 1) for item in node.value]

    def _mapping(self, node: yaml.MappingNode, depth: int) -> dict[str, Any]:
        if node.tag not in _MAPPING_TAGS and node.tag != "!":
            raise DecodeError(f"yaml: cannot decode a mapping tagged {node.tag}")
        out: dict[str, Any] = {}
        merged: list[dict[str, Any]] = []
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == _TAG + "merge":
                merged.extend(self._merge(value_node, depth))
                continue
            key = self._key(key_node)
            out[key] = self.build(value_node, depth + 1)
        if merged:
            # explicit keys win; among merged mappings the first one listed wins
            base: dict[str, Any] = {}
            for source in reversed(merged):
                base.update(source)
            base.update(out)
            out = base
        return out

    def _merge(self, node: yaml.Node, depth: int) -> list[dict[str, Any]]:
        value = self.build(node, depth)
        if isinstance(value, dict):
            return [value]
        if isinstance(node, yaml.SequenceNode) and all(isinstance(v, dict) for v in value):
            return list(value)
        raise DecodeError("yaml: map merge requires map or sequence of maps as the value")

    def _key(self, node: yaml.Node) -> str:
        if not isinstance(node, yaml.ScalarNode):
            raise DecodeError("yaml: invalid map key: a mapping key must be a scalar")
        value = self.build(node, 1)
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if value is None:
            return "null"
        if isinstance(value, float):
            return fields.go_float(value)
        return str(value)

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        text: str = node.value
        if tag == _TAG + "timestamp" and not _TIMESTAMP.match(text):
            raise DecodeError(f"yaml: cannot decode {text[:64]!r} as a timestamp")
        if tag in (_TAG + "str", _TAG + "value", _TAG + "timestamp", "!"):
            # only an escape (in double quotes) can spell a lone surrogate: the input is UTF-8
            return _checked_text(text) if node.style == '"' else text
        if tag == _TAG + "null":
            return None
        if tag == _TAG + "bool":
            found = _BOOLS.get(text.lower())
            if found is None:
                raise DecodeError(f"yaml: cannot decode {text!r} as a bool")
            return found
        if tag == _TAG + "int":
            return _yaml_int(text)
        if tag == _TAG + "float":
            return _yaml_float(text)
        if tag == _TAG + "binary":
            try:
                data = base64.b64decode("".join(text.split()), validate=True)
            except (binascii.Error, ValueError) as e:
                raise DecodeError("yaml: !!binary value contains invalid base64 data") from e
            return data.decode("utf-8", errors="replace")
        raise DecodeError(f"yaml: cannot decode a scalar tagged {tag}")


def _checked_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DecodeError("yaml: a string holds a lone surrogate, which is not Unicode") from e
    return text


def _yaml_int(text: str) -> int | float:
    """A YAML 1.1 integer (``-0x1F``, ``0b101``, ``017``, ``1_000``, ``1:30``), as PyYAML reads it.

    Literals longer than :data:`_MAX_INT_LITERAL` are beyond int64 whatever they spell, so the
    decimal and base-60 forms are computed as floats at once (``int()`` of thousands of decimal
    digits is slow, and refused by Python); power-of-two bases parse in linear time.
    """
    digits = text.replace("_", "")
    sign = 1
    if digits[:1] in ("-", "+"):
        sign = -1 if digits[0] == "-" else 1
        digits = digits[1:]
    long = len(digits) > _MAX_INT_LITERAL
    value: int | float
    try:
        if digits[:2] in ("0b", "0x", "0o"):
            value = int(digits[2:], {"0b": 2, "0x": 16, "0o": 8}[digits[:2]])
        elif ":" in digits:
            value = 0.0 if long else 0
            for part in digits.split(":"):
                value = value * 60 + (float(part) if long else int(part))
        elif len(digits) > 1 and digits[0] == "0":
            value = int(digits, 8)
        else:
            value = float(digits) if long else int(digits)
    except (ValueError, OverflowError) as e:
        raise DecodeError(f"yaml: cannot decode {text[:64]!r} as an integer") from e
    if isinstance(value, float):
        return _fit_float(sign * value)
    return _fit_int(sign * value)


def _yaml_float(text: str) -> float:
    """A YAML 1.1 float (``1.5``, ``-1_000.5e+3``, ``1:30.5``), as PyYAML reads it; infinity
    and NaN have no JSON form and are refused."""
    digits = text.replace("_", "").lower()
    sign = 1.0
    if digits[:1] in ("-", "+"):
        sign = -1.0 if digits[0] == "-" else 1.0
        digits = digits[1:]
    if digits in (".inf", ".nan"):
        raise DecodeError(
            f"yaml: {text!r} has no JSON form (infinity and NaN are not numbers in JSON)")
    try:
        if ":" in digits:
            number = 0.0
            for part in digits.split(":"):
                number = number * 60 + float(part)
        else:
            number = float(digits)
    except ValueError as e:
        raise DecodeError(f"yaml: cannot decode {text[:64]!r} as a float") from e
    if not digits or math.isnan(number):  # float() reads "nan" and "inf" too
        raise DecodeError(f"yaml: cannot decode {text[:64]!r} as a float")
    return _fit_float(sign * number)


def _fit_float(number: float) -> float:
    if not math.isfinite(number):
        raise DecodeError("a number is out of the range of a 64-bit float")
    return number


# --- depth of stored objects ---------------------------------------------------------------------


def too_deep(value: Any, max_depth: int = MAX_DEPTH) -> fields.FieldPath | None:
    """The path of the first container nested deeper than ``max_depth``, or ``None``.

    The top-level object is at depth 1, so ``{"spec": {}}`` is 2 deep. The walk is iterative
    and visits each container once.
    """
    if not _deeper_than(value, max_depth):
        return None
    path: list[str | int] = []  # keys leading to the container whose children stack[-1] yields
    stack: list[Iterator[tuple[str | int, Any]]] = [_children(value)]
    while stack:
        for key, child in stack[-1]:
            if isinstance(child, dict | list):
                path.append(key)
                if len(stack) + 1 > max_depth:
                    return _field_path(path)
                stack.append(_children(child))
                break
        else:
            stack.pop()
            if path:
                path.pop()
    return None


def _deeper_than(value: Any, max_depth: int) -> bool:
    """Whether some container in ``value`` is nested deeper than ``max_depth``: the quick
    answer :func:`too_deep` gives first (almost every object is within the limit), without
    the path."""
    return depth(value, stop_above=max_depth) > max_depth


_CONTAINERS = (dict, list)


def depth(value: Any, *, stop_above: int | None = None) -> int:
    """How many containers deep ``value`` nests (a scalar is 0, ``{}`` is 1); iterative.

    With ``stop_above``, the walk ends at the first container deeper than it, and that
    container's level is returned (enough to tell that ``value`` is deeper)."""
    if not isinstance(value, _CONTAINERS):
        return 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, level = pop()
        if level > deepest:
            deepest = level
            if stop_above is not None and level > stop_above:
                return level
        for child in (node.values() if isinstance(node, dict) else node):
            if isinstance(child, _CONTAINERS):
                push((child, level + 1))
    return deepest


def _children(value: dict[str, Any] | list[Any]) -> Iterator[tuple[str | int, Any]]:
    if isinstance(value, dict):
        return iter(value.items())
    return enumerate(value)


def _field_path(parts: list[str | int]) -> fields.FieldPath:
    path = fields.FieldPath()
    for part in parts:
        path = path.index(part) if isinstance(part, int) else path.child(part)
    return path
