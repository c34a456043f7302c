"""A test-only protobuf encoder for built-in kinds, driven by the decoder's own tables.

It writes what client-go's generated (gogo) marshallers write for the typed object whose JSON
is given: fields in ascending number order; every non-pointer scalar and every non-pointer
message written even when zero or absent (an absent struct is its zero value: an empty
``Time``, a ``Quantity`` of ``"0"``, an ``IntOrString`` of 0, an ``ObjectMeta`` whose
strings are all empty); pointers, lists and maps only when present; map entries sorted by key.
So ``decode(encode(obj)) == obj`` for any ``obj`` in the shape the decoder returns.
"""

from __future__ import annotations

import base64
import re
import struct
from datetime import UTC, datetime
from typing import Any

import orjson

from setpoint.apimachinery import protobuf, timeutil
from setpoint.apimachinery.prototables import (
    BOOL,
    BYTES,
    DOUBLE,
    FLOAT,
    INT32,
    INT64,
    MAP,
    MESSAGE,
    RAW,
    STRING,
    UINT32,
    UINT64,
    Field,
    Message,
    Tables,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers are sent as ten-byte two's complement
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def key(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def ld(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field: string, bytes or embedded message."""
    data = payload.encode() if isinstance(payload, str) else payload
    return key(number, 2) + varint(len(data)) + data


_DURATION_PART = re.compile(r"(\d+)(?:\.(\d+))?(h|m|s|ms|µs|us|ns)")
_UNIT_NS = {"h": 3_600_000_000_000, "m": 60_000_000_000, "s": 1_000_000_000, "ms": 1_000_000,
            "µs": 1_000, "us": 1_000, "ns": 1}


def parse_go_duration(text: str) -> int:
    """Nanoseconds of a duration as ``time.Duration.String`` writes it."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    if body == "0s":
        return 0
    total, pos = 0, 0
    for m in _DURATION_PART.finditer(body):
        assert m.start() == pos, text
        pos = m.end()
        unit = _UNIT_NS[m.group(3)]
        total += int(m.group(1)) * unit
        if m.group(2):
            total += int(m.group(2)) * unit // 10 ** len(m.group(2))
    assert pos == len(body), text
    return sign * total


class Encoder:
    """Encodes JSON-shaped objects of the kinds in ``tables``."""

    def __init__(self, tables: Tables | None = None) -> None:
        self.tables = tables or protobuf.tables()

    def body(self, obj: dict[str, Any]) -> bytes:
        """The request body kubectl would send for ``obj``: magic, envelope, object."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        message = self.tables.kinds[(api_version, kind)]
        raw = self.message(message, {k: v for k, v in obj.items()
                                     if k not in ("apiVersion", "kind")})
        return (protobuf.MAGIC + ld(1, ld(1, api_version) + ld(2, kind)) + ld(2, raw)
                + ld(3, "") + ld(4, ""))

    def message(self, message: Message, obj: Any) -> bytes:
        if message.form is not None:
            return self._form(message, obj)
        out = []
        for number in sorted(message.fields):
            f = message.fields[number]
            if f.inline:
                inner = self.tables.messages[f.message]  # type: ignore[index]
                names = self._names(inner)
                out.append(ld(number, self.message(inner, {k: v for k, v in obj.items()
                                                           if k in names})))
                continue
            if f.json in obj and obj[f.json] is not None:
                out.append(self._field(f, obj[f.json]))
            elif not (f.pointer or f.repeated or f.kind in (MAP, BYTES, RAW)):
                out.append(self._field(f, self._zero(f)))
        return b"".join(out)

    def _names(self, message: Message) -> set[str]:
        """The JSON names of a message's members, those of its inline members included."""
        names = set()
        for f in message.fields.values():
            if f.inline:
                names |= self._names(self.tables.messages[f.message])  # type: ignore[index]
            else:
                names.add(f.json)
        return names

    def _zero(self, f: Field) -> Any:
        if f.kind == MESSAGE:
            return _ABSENT
        return {STRING: "", BOOL: False, DOUBLE: 0, FLOAT: 0}.get(f.kind, 0)

    def _field(self, f: Field, value: Any) -> bytes:
        if f.kind == MAP:
            return b"".join(ld(f.number, self._scalar(1, f.key, k)
                               + self._map_value(f, value[k]))
                            for k in sorted(value, key=lambda k: k.encode()))
        if f.repeated:
            return b"".join(self._one(f, item) for item in value)
        return self._one(f, value)

    def _map_value(self, f: Field, value: Any) -> bytes:
        if f.value == MESSAGE:
            return ld(2, self.message(self.tables.messages[f.message],  # type: ignore[index]
                                      value))
        return self._scalar(2, f.value, value)

    def _one(self, f: Field, value: Any) -> bytes:
        if f.kind == MESSAGE:
            message = self.tables.messages[f.message]  # type: ignore[index]
            return ld(f.number, self.message(message, {} if value is _ABSENT and
                                             message.form is None else value))
        return self._scalar(f.number, f.kind, value)

    @staticmethod
    def _scalar(number: int, kind: int, value: Any) -> bytes:
        if kind == STRING:
            return ld(number, value)
        if kind == BYTES:
            return ld(number, base64.b64decode(value))
        if kind == RAW:
            return ld(number, value)
        if kind == BOOL:
            return key(number, 0) + varint(int(value))
        if kind in (INT32, INT64, UINT32, UINT64):
            return key(number, 0) + varint(value)
        if kind == DOUBLE:
            return key(number, 1) + struct.pack("<d", float(value))
        if kind == FLOAT:
            return key(number, 5) + struct.pack("<f", float(value))
        raise AssertionError(f"kind {kind}")

    def _form(self, message: Message, value: Any) -> bytes:
        form = message.form
        absent = value is _ABSENT
        if form in ("time", "microtime"):
            if absent:
                return b""
            moment = timeutil.parse_time(value)
            delta = moment - _EPOCH
            seconds = delta.days * 86_400 + delta.seconds
            nanos = delta.microseconds * 1000 if form == "microtime" else 0
            return key(1, 0) + varint(seconds) + key(2, 0) + varint(nanos)
        if form == "duration":
            return key(1, 0) + varint(0 if absent else parse_go_duration(value))
        if form == "quantity":
            return ld(1, "0" if absent else value)
        if form == "intorstring":
            if absent:
                value = 0
            if isinstance(value, int):
                return key(1, 0) + varint(0) + key(2, 0) + varint(value) + ld(3, "")
            return key(1, 0) + varint(1) + key(2, 0) + varint(0) + ld(3, value)
        if form == "json":
            return b"" if absent else ld(1, orjson.dumps(value))
        if form == "list":
            return b"".join(ld(1, item) for item in ([] if absent else value))
        schema = self.tables.messages[message.fields[1 if form != "schemaorbool" else 2]
                                      .message]  # type: ignore[index]
        if form == "schemaorbool":
            if isinstance(value, bool):
                return key(1, 0) + varint(int(value))
            return key(1, 0) + varint(1) + ld(2, self.message(schema, value))
        if isinstance(value, list) and form == "schemaorarray":
            return b"".join(ld(2, self.message(schema, item)) for item in value)
        if isinstance(value, list):  # schemaorstringarray
            return b"".join(ld(2, item) for item in value)
        return ld(1, self.message(schema, value))


class _Absent:
    """An absent non-pointer message: gogo writes its zero value."""


_ABSENT: Any = _Absent()
