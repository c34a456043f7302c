"""Table tests for setpoint.apimachinery.gotypes: Go's encoding/json errors, base64, times."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from setpoint.apimachinery import gotypes as go
from setpoint.apimachinery.gotypes import (
    BOOL,
    BYTES,
    INT32,
    INT64,
    MICRO_TIME,
    STRING,
    TIME,
    Custom,
    MapOf,
    Scalar,
    SliceOf,
    Struct,
)

SPEC = Struct("v1.LeaseSpec", {"holderIdentity": STRING, "leaseDurationSeconds": INT32,
                               "renewTime": MICRO_TIME})
KIND = Struct("v1.Thing", {
    "data": MapOf(STRING), "binaryData": MapOf(BYTES), "immutable": BOOL, "spec": SPEC,
    "items": SliceOf(Struct("v1.Item", {"name": STRING, "count": INT64})),
    "type": Scalar("v1.SecretType", "string"), "created": TIME,
    "custom": Custom("v1.OrBool", lambda v: None if isinstance(v, bool | dict)
                     else "boolean or JSON schema expected")})

FIELD = "json: cannot unmarshal {} into Go struct field {} of type {}"

CASES: list[tuple[str, Any, str | None]] = [
    ("valid", {"data": {"a": "b"}, "spec": {"holderIdentity": "x",
                                            "leaseDurationSeconds": 15}}, None),
    ("nulls everywhere", {"data": None, "spec": {"holderIdentity": None}, "items": [None]},
     None),
    ("unknown fields are ignored", {"nope": [1, {"x": 2}]}, None),
    ("map as string", {"data": "x"}, FIELD.format("string", "Thing.data",
                                                  "map[string]string")),
    ("map as array", {"data": ["x"]}, FIELD.format("array", "Thing.data",
                                                   "map[string]string")),
    ("map value", {"data": {"a": 1}}, FIELD.format("number", "Thing.data", "string")),
    ("bool as string", {"immutable": "true"}, FIELD.format("string", "Thing.immutable",
                                                           "bool")),
    ("struct as string", {"spec": "x"}, FIELD.format("string", "Thing.spec", "v1.LeaseSpec")),
    ("nested field", {"spec": {"holderIdentity": 5}},
     FIELD.format("number", "LeaseSpec.spec.holderIdentity", "string")),
    ("int32 from float", {"spec": {"leaseDurationSeconds": 1.5}},
     FIELD.format("number 1.5", "LeaseSpec.spec.leaseDurationSeconds", "int32")),
    ("int32 overflow", {"spec": {"leaseDurationSeconds": 1 << 31}},
     FIELD.format("number 2147483648", "LeaseSpec.spec.leaseDurationSeconds", "int32")),
    ("int32 from bool", {"spec": {"leaseDurationSeconds": True}},
     FIELD.format("bool", "LeaseSpec.spec.leaseDurationSeconds", "int32")),
    ("list element", {"items": [{"name": "a"}, {"count": "1"}]},
     FIELD.format("string", "Item.items.count", "int64")),
    ("list as object", {"items": {}}, FIELD.format("object", "Thing.items", "[]v1.Item")),
    ("named type", {"type": 1}, FIELD.format("number", "Thing.type", "v1.SecretType")),
    ("bytes", {"binaryData": {"a": "!!"}}, "illegal base64 data at input byte 0"),
    ("bytes as number", {"binaryData": {"a": 1}}, FIELD.format("number", "Thing.binaryData",
                                                               "[]uint8")),
    ("time as number", {"created": 1}, "json: cannot unmarshal number into Go value of type "
                                       "string"),
    ("time", {"created": "yesterday"},
     'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as '
     '"2006"'),
    ("micro time", {"spec": {"renewTime": "2024-01-02T03:04:05.123Z"}}, None),
    ("custom", {"custom": "x"}, "boolean or JSON schema expected"),
    ("first error in document order", {"immutable": 1, "data": 1},
     FIELD.format("number", "Thing.immutable", "bool")),
    ("top level", "x", "json: cannot unmarshal string into Go value of type v1.Thing"),
]


@pytest.mark.parametrize(("value", "expected"), [(v, e) for _, v, e in CASES],
                         ids=[c[0] for c in CASES])
def test_decode_error(value: Any, expected: str | None) -> None:
    assert go.decode_error(value, KIND) == expected


# Go's base64.StdEncoding.DecodeString on the same inputs
BASE64_CASES = [
    ("aGVsbG8=", b"hello"),
    ("aGVs\nbG8=\n", b"hello"),
    ("aGVs\r\nbG8=", b"hello"),
    ("aGVsbG8h", b"hello!"),
    ("", b""),
    ("\n", b""),
    ("aGk=", b"hi"),
    ("aA==", b"h"),
    ("aGVsbG8", "illegal base64 data at input byte 4"),
    ("a", "illegal base64 data at input byte 0"),
    ("!!!!", "illegal base64 data at input byte 0"),
    ("aGVs!G8=", "illegal base64 data at input byte 4"),
    ("aGVsbG8=x", "illegal base64 data at input byte 8"),
    ("aA=", "illegal base64 data at input byte 3"),
    ("aA=x", "illegal base64 data at input byte 2"),
    ("a===", "illegal base64 data at input byte 1"),
    ("=", "illegal base64 data at input byte 0"),
    ("aGVsbG8=\n\nx", "illegal base64 data at input byte 10"),
    ("aGVs bG8=", "illegal base64 data at input byte 4"),
    ("aGVsbG9=", b"hello"),  # non-zero trailing bits: Go's non-strict decoder takes them
]


@pytest.mark.parametrize(("text", "expected"), BASE64_CASES, ids=[c[0] for c in BASE64_CASES])
def test_decode_base64(text: str, expected: bytes | str) -> None:
    if isinstance(expected, bytes):
        assert go.decode_base64(text) == expected
    else:
        with pytest.raises(ValueError, match=f"^{expected}$"):
            go.decode_base64(text)


@given(hs.binary(max_size=64), hs.integers(min_value=1, max_value=10))
def test_wrapped_base64_is_canonicalized(data: bytes, width: int) -> None:
    canonical = base64.b64encode(data).decode()
    wrapped = "\n".join(canonical[i:i + width] for i in range(0, len(canonical), width))
    assert go.canonical_base64(wrapped + "\r\n") == canonical


@given(hs.text(max_size=20))
def test_decode_error_is_total(text: str) -> None:
    for value in (text, [text], {text: text}, {"data": {text: text}}, {"binaryData": {"a": text}},
                  {"created": text}, {"spec": {"renewTime": text}}):
        result = go.decode_error(value, KIND)
        assert result is None or isinstance(result, str)


TIME_CASES = [
    ("2024-01-02T03:04:05Z", None),
    ("2024-01-02T03:04:05.123456+02:00", None),
    ("2024-01-02T03:04:05,5Z", None),
    ("2024-01-02", 'parsing time "2024-01-02" as "2006-01-02T15:04:05Z07:00": cannot parse "" '
                   'as "T"'),
    ("2024-13-02T03:04:05Z", 'parsing time "2024-13-02T03:04:05Z": month out of range'),
    ("2024-01-02T03:04:05Zx", 'parsing time "2024-01-02T03:04:05Zx": extra text: "x"'),
    ("2024-01-02T03:04:05", 'parsing time "2024-01-02T03:04:05" as '
                            '"2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"'),
    # the day must exist in its month (Go checks it after the whole layout)
    ("2024-02-29T00:00:00Z", None),
    ("2000-02-29T00:00:00Z", None),
    ("2023-02-29T00:00:00Z", 'parsing time "2023-02-29T00:00:00Z": day out of range'),
    ("1900-02-29T00:00:00Z", 'parsing time "1900-02-29T00:00:00Z": day out of range'),
    ("2024-04-31T10:00:00+01:00", 'parsing time "2024-04-31T10:00:00+01:00": day out of range'),
    ("2024-02-30T10:00:00.5Z", 'parsing time "2024-02-30T10:00:00.5Z": day out of range'),
]


@given(hs.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31)))
def test_every_real_date_is_a_time(moment: datetime) -> None:
    assert go.time_error(moment.replace(microsecond=0).isoformat() + "Z") is None


@pytest.mark.parametrize(("text", "expected"), TIME_CASES, ids=[c[0] for c in TIME_CASES])
def test_time_error(text: str, expected: str | None) -> None:
    assert go.time_error(text) == expected


_EDGES = ["00", "01", "09", "10", "12", "13", "19", "20", "23", "24", "28", "29", "30", "31",
          "32", "59", "60", "99", "٣1", "1x", "-1"]
_BASE = "2024-02-28T10:20:30Z"


def _variants() -> list[str]:
    """The server's form with each field (and each separator) replaced by its edge cases."""
    out = []
    for start in (5, 8, 11, 14, 17):
        out += [_BASE[:start] + edge + _BASE[start + 2:] for edge in _EDGES]
    for index, others in ((4, "/"), (7, "/"), (10, "t "), (13, "."), (16, "."), (19, "z+")):
        out += [_BASE[:index] + c + _BASE[index + 1:] for c in others]
    return [*out, "٣024-02-28T10:20:30Z", "2024-02-30T10:20:30Z", "2023-02-29T10:20:30Z"]


@pytest.mark.parametrize("text", _variants())
def test_plain_time_edges_are_decided_as_the_expression_decides(text: str) -> None:
    _plain_as_expression(text)


@given(hs.text(min_size=20, max_size=20))
def test_plain_times_are_decided_as_the_expression_decides(text: str) -> None:
    _plain_as_expression(text)


def _plain_as_expression(text: str) -> None:
    # the check without RE2 takes exactly what the expression takes of the server's own form
    plain = go._plain_utc_time(text)
    assert plain == (len(text) == 20 and text.endswith("Z")
                     and bool(go._TIME_FAST.fullmatch(text)))
    if plain:
        assert go.time_error(text) == (None if go._day_fits(text)
                                       else f'parsing time "{text}": day out of range')
