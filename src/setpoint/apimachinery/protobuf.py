"""Decoding the protobuf bodies kubectl and client-go send for built-in kinds.

kubectl's generators (``create namespace|configmap|secret|serviceaccount|role|deployment|...``,
``run``, ``expose``, ``auth can-i``, ``create token``) and client-go's typed clients POST and
PUT built-in kinds with ``Content-Type: application/vnd.kubernetes.protobuf``, and do not
retry as JSON after a 415, so the server must read them. A body is:

* the magic ``k8s\\x00``, then a ``runtime.Unknown`` message
  ``{1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}``;
* ``raw`` is the object's own message, found by ``(apiVersion, kind)`` in the tables of
  :mod:`~setpoint.apimachinery.prototables` (Kubernetes' own ``.proto`` definitions: every kind
  of the group versions they list, and the option kinds such as ``DeleteOptions`` in each).

:func:`decode` returns the object in its JSON shape, as Go's JSON encoding of the same typed
object would read, members in the Go struct's order:

* a field absent from the wire is absent; a present zero scalar is left out when its Go field
  is ``omitempty`` and not a pointer (a pointer that is set is shown, even when zero); empty
  lists and maps are left out; a present message is shown (``omitempty`` never drops a struct).
  client-go writes every non-pointer field, so for its bodies this is Go's JSON (a nil pointer
  or the zero time, null there, is left out here); a non-pointer field another encoder leaves
  out is left out rather than shown as its zero value;
* ``Time``/``MicroTime`` become RFC 3339 strings (the zero time, null, is left out),
  ``Duration`` Go's duration text (``1h2m3.5s``), ``IntOrString`` an int or a string,
  ``Quantity`` its string, ``bytes`` base64, ``RawExtension``/``FieldsV1``/``JSON`` the JSON
  value they hold, named slices (``ExtraValue``) lists, inline members (``Probe``'s handler)
  the parent's, and the ``JSONSchemaPropsOr...`` unions a schema, a list or a boolean.

Invariants: decoding is total over bytes — any input either decodes or raises
:class:`ProtobufError` (never another exception, RecursionError included); unknown fields are
skipped, as protobuf requires; repeated occurrences of a message field merge, of a scalar the
last wins. Decoding is bounded by :class:`ProtobufLimits`: the body's size, the JSON nesting
depth of the result (the same limit as JSON bodies, JSON embedded in the body included), and
the number of fields read; work is linear in the body (a message field sent several times is
copied once per level of nesting to merge it). Errors name the field by its JSON path and quote
at most 64 characters of the body. The tables are loaded once, on first use.

Non-guarantees: only the kinds in the tables decode (anything else is an error); values are not
validated beyond their wire format (the server validates the object as it validates JSON;
quantities keep their text); strings must be UTF-8 and floats finite (Go would substitute
U+FFFD, and cannot write NaN as JSON either); a content encoding is refused.

>>> body = bytes.fromhex(  # kubectl create configmap x --from-literal=a=b
...     "6b3873000a0f0a0276311209436f6e6669674d6170121b0a110a017812001a0022002a003200"
...     "3800420012060a01611201621a002200")
>>> decode(body)
{'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'x'}, 'data': {'a': 'b'}}
"""

from __future__ import annotations

import base64
import functools
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from setpoint.apimachinery import decoding, timeutil
from setpoint.apimachinery.prototables import (
    BOOL,
    BYTES,
    DOUBLE,
    FLOAT,
    INT32,
    INT64,
    LEN,
    MAP,
    MESSAGE,
    RAW,
    STRING,
    UINT32,
    Field,
    Message,
    Tables,
)

__all__ = ["DEFAULT_LIMITS", "MAGIC", "ProtobufError", "ProtobufLimits", "decode",
           "go_duration", "tables"]

MAGIC = b"k8s\x00"

#: the request body limit of the server (and of kube-apiserver)
MAX_SIZE = 3 * 1024 * 1024
#: as many values as the smallest JSON values (``0,``) a body of MAX_SIZE can hold
MAX_FIELDS = 1_500_000


class ProtobufError(ValueError):
    """A body that is not a well-formed protobuf envelope of a known kind."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtobufLimits:
    """Bounds of one decode; the defaults are what the server uses.

    ``max_depth`` is capped at 150: the decoder recurses up to five calls per level, and
    stays clear of Python's recursion limit that way (a decode that reaches it anyway is a
    :class:`ProtobufError` too).
    """

    max_size: int = MAX_SIZE
    max_depth: int = decoding.MAX_DEPTH
    max_fields: int = MAX_FIELDS

    def __post_init__(self) -> None:
        if not 1 <= self.max_depth <= 150:
            raise ValueError("max_depth must be between 1 and 150")
        if self.max_size < 0 or self.max_fields < 0:
            raise ValueError("limits are not negative")


DEFAULT_LIMITS = ProtobufLimits()


@functools.cache
def tables() -> Tables:
    """The tables shipped in the package, loaded on first use."""
    return Tables.load()


def decode(body: bytes, *, limits: ProtobufLimits = DEFAULT_LIMITS,
           table: Tables | None = None) -> dict[str, Any]:
    """Decode a Kubernetes protobuf request body into the JSON-shaped object it carries.

    The result has ``apiVersion`` and ``kind`` from the envelope first, then the object's
    fields. Raises :class:`ProtobufError` for a missing magic prefix, malformed or truncated
    data, a content encoding, a kind the tables do not know, or a limit exceeded.
    """
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ProtobufError("a protobuf body must be bytes")
    data = bytes(body)
    if len(data) > limits.max_size:
        raise ProtobufError(f"the body is larger than the limit of {limits.max_size} bytes")
    if not data.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf prefix (k8s\\x00)")
    try:
        return _Decoder(table or tables(), limits).envelope(data)
    except RecursionError:  # only when called with little stack left
        raise ProtobufError("the object is nested too deeply to decode") from None


# --- the wire format -----------------------------------------------------------------------------

_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_ZERO_TIME = -62135596800  # 0001-01-01T00:00:00Z, Go's zero time, in Unix seconds
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A base-128 varint at ``pos``, which must end before ``end``: (value, position after)."""
    value = shift = 0
    for i in range(10):
        if pos + i >= end:
            raise ProtobufError("truncated varint")
        byte = data[pos + i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if value >= 1 << 64:
                raise ProtobufError("varint overflows 64 bits")
            return value, pos + i + 1
        shift += 7
    raise ProtobufError("varint longer than 10 bytes")


def _signed(value: int, bits: int) -> int:
    """A varint as a two's-complement ``int64``/``int32`` (negatives are sign-extended)."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _scalar(kind: int, value: int) -> Any:
    """A varint or fixed-width value as the JSON value of a scalar kind."""
    if kind == INT64:
        return _signed(value, 64)
    if kind == INT32:
        return _signed(value, 32)
    if kind == BOOL:
        return value != 0
    if kind in (DOUBLE, FLOAT):
        number = (_DOUBLE.unpack(value.to_bytes(8, "little"))[0] if kind == DOUBLE
                  else _FLOAT.unpack(value.to_bytes(4, "little"))[0])
        if not math.isfinite(number):
            raise ProtobufError(f"{number} is not a JSON number")
        # Go writes integral floats below 1e21 without a fraction; JSON reads them as integers
        return int(number) if number.is_integer() and abs(number) < 1e21 else number
    if kind == UINT32:
        return value & 0xFFFFFFFF
    return value  # UINT64


def go_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String``: ``0s``, ``1.5µs``, ``2ms``, ``1h2m3.5s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    u = abs(nanoseconds)
    if u < 1_000_000_000:
        unit, scale = (("ns", 1) if u < 1_000 else ("µs", 1_000) if u < 1_000_000
                       else ("ms", 1_000_000))
        return sign + _fraction(u, scale) + unit
    seconds = u // 1_000_000_000
    text = _fraction(u % 60_000_000_000, 1_000_000_000) + "s"
    if seconds >= 60:
        text = f"{seconds // 60 % 60}m" + text
    if seconds >= 3600:
        text = f"{seconds // 3600}h" + text
    return sign + text


def _fraction(value: int, scale: int) -> str:
    whole, rest = divmod(value, scale)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


# --- decoding ------------------------------------------------------------------------------------


class _Located(ProtobufError):
    """An error inside the object: ``template`` says ``{path}`` where the path goes, and
    each level the error passes through on its way out adds its segment."""

    def __init__(self, template: str, segment: str) -> None:
        super().__init__(template)
        self.template = template
        self.segments = [segment]

    def located(self) -> ProtobufError:
        path = "".join(reversed(self.segments)).lstrip(".")
        if len(path) > 200:  # a path 128 levels deep: its ends say where
            path = f"{path[:100]}...{path[-100:]}"
        return ProtobufError(self.template.replace("{path}", path))


def _clip(text: str, limit: int = 64) -> str:
    """Text from the body, shortened for an error message (which the client gets back)."""
    return text if len(text) <= limit else text[:limit] + "..."


def _too_deep(limit: int) -> _Located:
    return _Located(f"{{path}}: the object is nested deeper than the limit of {limit} levels",
                    "")


class _Decoder:
    """One decode: the tables, the limits and the fields left in the budget."""

    __slots__ = ("budget", "limits", "tables")

    def __init__(self, table: Tables, limits: ProtobufLimits) -> None:
        self.tables = table
        self.limits = limits
        self.budget = limits.max_fields

    def envelope(self, data: bytes) -> dict[str, Any]:
        envelope = self._plain(data, len(MAGIC), len(data), "envelope", merged=1)
        meta = envelope.get(1, b"")
        encoding = self._text(envelope.get(3, b""), "contentEncoding")
        type_meta = self._plain(meta, 0, len(meta), "typeMeta")
        api_version = self._text(type_meta.get(1, b""), "typeMeta.apiVersion")
        kind = self._text(type_meta.get(2, b""), "typeMeta.kind")
        if encoding:
            raise ProtobufError(f"content encoding {_clip(encoding)!r} is not supported")
        message = self.tables.kinds.get((api_version, kind))
        if message is None:
            raise ProtobufError(f"no protobuf decoding for kind {_clip(kind)!r} in version "
                                f"{_clip(api_version)!r}")
        raw = envelope.get(2, b"")
        obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind}
        try:
            obj.update(self._object(message, raw, 0, len(raw), 1))
        except _Located as e:
            raise e.located() from None
        return obj

    def _plain(self, data: bytes, pos: int, end: int, what: str,
               merged: int = 0) -> dict[int, bytes]:
        """Fields 1-4 of the envelope or of its typeMeta, all length-delimited: their bytes,
        the last occurrence's, or all of them joined for the message field ``merged`` (as
        protobuf merges a message sent more than once)."""
        found: dict[int, bytes] = {}
        parts: list[bytes] = []
        while pos < end:
            number, wire, start, pos = self._tag(data, pos, end)
            if number > 4:
                continue
            if wire != LEN:
                raise ProtobufError(f"{what} field {number}: unexpected wire type {wire}")
            if number == merged:
                parts.append(data[start:pos])
            else:
                found[number] = data[start:pos]
        if parts:
            found[merged] = b"".join(parts)
        return found

    def _tag(self, data: bytes, pos: int, end: int) -> tuple[int, int, int, int]:
        """Any field at ``pos``: (number, wire type, start of its value, position after)."""
        self.budget -= 1
        if self.budget < 0:
            raise ProtobufError(f"the body has more than {self.limits.max_fields} fields")
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(data, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtobufError("field number 0 is invalid")
        start = pos
        if wire == LEN:
            if pos < end and data[pos] < 0x80:
                length, start = data[pos], pos + 1
            else:
                length, start = _varint(data, pos, end)
            if length > end - start:
                raise ProtobufError(f"truncated message: field {number} needs {length} bytes, "
                                    f"{end - start} left")
            return number, wire, start, start + length
        if wire == 0:
            return number, wire, start, _varint(data, pos, end)[1]
        if wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if size > end - pos:
                raise ProtobufError(f"truncated message: field {number} needs {size} bytes")
            return number, wire, start, pos + size
        raise ProtobufError(f"unsupported wire type {wire} for field {number}")

    @staticmethod
    def _text(raw: bytes, path: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtobufError(f"{path} is not valid UTF-8") from None

    def _fields(self, message: Message, data: bytes, pos: int, end: int,
                depth: int) -> tuple[dict[int, Any], bool]:
        """The known fields of one message by number, nested messages decoded, and whether
        they came in ascending order. The hot loop: one pass, the common cases inline."""
        if depth > self.limits.max_depth:
            raise _too_deep(self.limits.max_depth)
        fields = message.fields
        found: dict[int, Any] = {}
        merged: dict[int, list[tuple[int, int]]] | None = None
        budget = self.budget
        last, ascending = 0, True
        value: Any = 0
        start = 0
        while pos < end:
            budget -= 1
            if budget < 0:
                raise ProtobufError(f"the body has more than {self.limits.max_fields} fields")
            tag = data[pos]
            if tag < 0x80:
                pos += 1
            elif pos + 1 < end and data[pos + 1] < 0x80:  # fields 16 to 2047
                tag = (tag & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                tag, pos = _varint(data, pos, end)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise ProtobufError("field number 0 is invalid")
            if wire == 2:
                length = data[pos] if pos < end else 0x80
                if length < 0x80:
                    pos += 1
                elif pos + 1 < end and data[pos + 1] < 0x80:  # 128 to 16383 bytes
                    length = (length & 0x7F) | data[pos + 1] << 7
                    pos += 2
                else:
                    length, pos = _varint(data, pos, end)
                if length > end - pos:
                    raise ProtobufError(f"truncated message: field {number} needs {length} "
                                        f"bytes, {end - pos} left")
                start = pos
                pos += length
            elif wire == 0:
                if pos < end and data[pos] < 0x80:
                    value = data[pos]
                    pos += 1
                else:
                    value, pos = _varint(data, pos, end)
            elif wire == 1 or wire == 5:
                size = 8 if wire == 1 else 4
                if size > end - pos:
                    raise ProtobufError(f"truncated message: field {number} needs {size} bytes")
                value = int.from_bytes(data[pos:pos + size], "little")
                pos += size
            else:
                raise ProtobufError(f"unsupported wire type {wire} for field {number}")
            f = fields.get(number)
            if f is None:
                continue  # unknown fields are skipped
            if number < last:
                ascending = False
            last = number
            if wire != f.wire:
                if wire == 2 and f.repeated and f.kind != MESSAGE:
                    self.budget = budget
                    found.setdefault(number, []).extend(self._packed(f, data, start, pos))
                    budget = self.budget
                    continue
                raise _Located(f"{{path}}: unexpected wire type {wire}", "." + f.json)
            kind = f.kind
            if kind == STRING:
                if start == pos:
                    value = ""
                else:
                    try:
                        value = data[start:pos].decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Located("{path} is not valid UTF-8", "." + f.json) from None
            elif kind == MESSAGE:
                if not f.repeated:  # decoded below: a message sent more than once is merged
                    if merged is None:
                        merged = {}
                    spans = merged.get(number)
                    if spans is None:
                        merged[number] = [(start, pos)]
                        found[number] = None  # keeps its place among the fields
                    else:
                        spans.append((start, pos))
                    continue
                items = found.get(number)
                if items is None:
                    items = found[number] = []
                self.budget = budget
                try:
                    items.append(self._value(f, data, start, pos, depth + 2))
                except _Located as e:
                    e.segments += (f"[{len(items)}]", "." + f.json)
                    raise
                budget = self.budget
                continue
            elif kind == MAP:
                entries = found.get(number)
                if entries is None:
                    entries = found[number] = {}
                self.budget = budget
                try:
                    name, entry = self._entry(f, data, start, pos, depth + 2)
                except _Located as e:
                    e.segments.append("." + f.json)
                    raise
                budget = self.budget
                entries[name] = entry
                continue
            elif kind == INT64:
                if value >> 63:
                    value -= 1 << 64
            elif kind == INT32:
                if value >> 31:
                    value = _signed(value, 32)
            elif kind == BOOL:
                value = value != 0
            elif kind == BYTES:
                value = base64.b64encode(data[start:pos]).decode("ascii")
            elif kind == RAW:
                value = data[start:pos]
            else:
                try:
                    value = _scalar(kind, value)
                except ProtobufError as e:
                    raise _Located(f"{{path}}: {e}", "." + f.json) from None
            if f.repeated:
                found.setdefault(number, []).append(value)
            else:
                found[number] = value
        self.budget = budget
        if merged:
            for number, spans in merged.items():
                f = fields[number]
                if len(spans) == 1:
                    buf, (lo, hi) = data, spans[0]
                else:
                    buf = b"".join(data[lo:hi] for lo, hi in spans)
                    lo, hi = 0, len(buf)
                try:
                    found[number] = self._value(f, buf, lo, hi,
                                                depth if f.inline else depth + 1)
                except _Located as err:
                    if not f.inline:
                        err.segments.append("." + f.json)
                    raise
        return found, ascending

    def _packed(self, f: Field, data: bytes, pos: int, end: int) -> list[Any]:
        """The elements of a packed repeated scalar field."""
        values = []
        while pos < end:
            self.budget -= 1
            if self.budget < 0:
                raise ProtobufError(f"the body has more than {self.limits.max_fields} fields")
            if f.wire == 0:
                value, pos = _varint(data, pos, end)
            else:
                size = 8 if f.wire == 1 else 4
                if size > end - pos:
                    raise _Located("{path}: truncated packed value", "." + f.json)
                value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
            try:
                values.append(_scalar(f.kind, value))
            except ProtobufError as e:
                raise _Located(f"{{path}}: {e}", "." + f.json) from None
        return values

    def _entry(self, f: Field, data: bytes, pos: int, end: int, depth: int) -> tuple[str, Any]:
        """One map entry ``{1 key, 2 value}``: the JSON key and the value."""
        key: Any = "" if f.key == STRING else 0
        span: tuple[int, int] | None = None
        value: Any = None
        while pos < end:
            number, wire, start, pos = self._tag(data, pos, end)
            if number != 1 and number != 2:
                continue
            if wire != (f.key_wire if number == 1 else f.value_wire):
                raise _Located(f"{{path}}: map entry field {number} has wire type {wire}", "")
            if number == 2 and f.value_wire == LEN:
                span = (start, pos)
                continue
            raw = _varint(data, start, pos)[0] if wire == 0 else \
                int.from_bytes(data[start:pos], "little")
            if number == 1 and f.key == STRING:
                try:
                    key = data[start:pos].decode("utf-8")
                except UnicodeDecodeError:
                    raise _Located("{path} key is not valid UTF-8", "") from None
            elif number == 1:
                key = _scalar(f.key, raw)
            else:
                value = _scalar(f.value, raw)
        name = key if isinstance(key, str) else str(key)
        kind = f.value
        if kind == STRING:
            try:
                value = data[span[0]:span[1]].decode("utf-8") if span else ""
            except UnicodeDecodeError:
                raise _Located("{path} is not valid UTF-8", f"[{_clip(name)}]") from None
        elif kind == BYTES:
            value = base64.b64encode(data[span[0]:span[1]]).decode("ascii") if span else ""
        elif kind == MESSAGE:
            lo, hi = span or (0, 0)
            try:
                value = self._value(f, data if span else b"", lo, hi, depth)
            except _Located as err:
                err.segments.append(f"[{_clip(name)}]")
                raise
        elif value is None:
            value = _scalar(kind, 0)
        return name, value

    def _value(self, f: Field, data: bytes, start: int, end: int, depth: int) -> Any:
        """The JSON value of the message of ``f`` (or of its map values) at JSON ``depth``."""
        message = self.tables.messages[f.message]  # type: ignore[index]
        if message.form is None:
            return self._object(message, data, start, end, depth)
        # a form's own fields sit one level up: its value takes the place of the message
        try:
            fields = self._fields(message, data, start, end, depth - 1)[0]
        except _Located as e:
            if e.segments and e.segments[-1].startswith("."):
                e.segments.pop()  # the form's own field names are not in the JSON
            raise
        return _FORMS[message.form](self, message, fields, start == end, depth)

    def _object(self, message: Message, data: bytes, start: int, end: int,
                depth: int) -> dict[str, Any]:
        """A message as a JSON object, members in the Go struct's order."""
        found, ascending = self._fields(message, data, start, end, depth)
        fields = message.fields
        if len(found) > 1 and not (ascending and message.ascending):
            rank = message.rank
            found = {n: found[n] for n in sorted(found, key=rank.__getitem__)}
        out: dict[str, Any] = {}
        for number, value in found.items():
            f = fields[number]
            if value is None or (f.omit_zero and not value):
                continue
            if f.inline:
                own = message.own
                out.update((k, v) for k, v in value.items() if k not in own)
            else:
                out[f.json] = value
        return out


# --- the forms: messages whose JSON is not an object ---------------------------------------------
#
# Each gets the decoder, the message, its fields by number (zeros kept), whether the message was
# empty on the wire and the JSON depth of its value.

Fields = dict[int, Any]


def _time(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    if empty:
        return None  # Go marshals the zero time as no bytes
    seconds = fields.get(1, 0)
    nanos = fields.get(2, 0) if m.form == "microtime" else 0  # Time keeps whole seconds
    micros = seconds * 1_000_000 + (nanos // 1000 if nanos >= 0 else -(-nanos // 1000))
    if micros == _ZERO_TIME * 1_000_000:
        return None  # the zero time's JSON is null
    try:
        moment = _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        raise _Located(f"{{path}}: timestamp {seconds} is out of range", "") from None
    return (timeutil.format_micro_time(moment) if m.form == "microtime"
            else timeutil.format_time(moment))


def _duration(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    return go_duration(fields.get(1, 0))


def _json(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    raw = fields.get(1)
    if not raw:
        return None
    remaining = d.limits.max_depth - depth + 1
    if remaining < 1:
        raise _too_deep(d.limits.max_depth)
    try:
        return decoding.decode_json(raw, decoding.DecodeLimits(max_depth=remaining))
    except decoding.DecodeError as e:
        if "nested deeper than the limit" in str(e):  # the limit of the whole object
            raise _too_deep(d.limits.max_depth) from None
        raise _Located(f"{{path}}: {e}", "") from None


def _int_or_string(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    kind = fields.get(1, 0)
    if kind == 0:
        return fields.get(2, 0)
    if kind == 1:
        return fields.get(3, "")
    raise _Located(f"{{path}}: IntOrString type {kind} is neither 0 (int) nor 1 (string)", "")


def _quantity(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    return fields.get(1, "0")


def _list(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    return fields.get(1, [])


def _schema_or_array(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    return fields.get(2) or fields.get(1)


def _schema_or_bool(d: _Decoder, m: Message, fields: Fields, empty: bool, depth: int) -> Any:
    schema = fields.get(2)
    return schema if schema is not None else fields.get(1, False)


def _schema_or_string_array(d: _Decoder, m: Message, fields: Fields, empty: bool,
                            depth: int) -> Any:
    return fields.get(2) or fields.get(1)


_Form = Callable[[_Decoder, Message, Fields, bool, int], Any]
_FORMS: dict[str, _Form] = {
    "time": _time, "microtime": _time, "duration": _duration, "json": _json,
    "intorstring": _int_or_string, "quantity": _quantity, "list": _list,
    "schemaorarray": _schema_or_array, "schemaorbool": _schema_or_bool,
    "schemaorstringarray": _schema_or_string_array}
