"""String formats (kube-openapi's ``strfmt`` checks)."""

from __future__ import annotations

import pytest

from setpoint.schema import formats

FORMAT_CASES: list[tuple[str, str, bool]] = [
    ("date", "2024-02-29", True), ("date", "2023-02-29", False), ("date", "2024-1-01", False),
    ("date-time", "2024-01-02T03:04:05Z", True),
    ("date-time", "2024-01-02T03:04:05.123+02:00", True),
    ("datetime", "2024-01-02t03:04:05z", True), ("date-time", "2024-01-02T25:00:00Z", False),
    ("date-time", "2024-01-02 03:04:05Z", False),
    # the fraction is any one character then digits; the zone follows the digits
    ("date-time", "2024-01-02T03:04:05,5Z", True), ("date-time", "2024-01-02T03:04:05.Z", False),
    ("date-time", "2024-01-02T03:04:05\n5Z", False),
    ("date-time", "2024-01-02T03:04:05+0530", False),
    ("date-time", "2024-01-02T03:04:05+05:30x", False), ("date", "2024-01-0\u0663", False),
    ("date-time", "2024-01-02T03:04:60Z", False), ("date", "2024-01-02\n", False),
    ("duration", "1h30m", True), ("duration", "-1.5s", True), ("duration", "3 days", True),
    ("duration", "1 fortnight", False), ("duration", "", False),
    ("email", "a@example.com", True), ("email", "Alice <a@example.com>", True),
    ("email", "@example.com", False), ("email", "a@", False),
    ("email", "josé.o'neil+x@example.com", True), ("email", "a b@example.com", False),
    ("email", "a..b@example.com", False),
    ("hostname", "example.com", True), ("hostname", "a-b", True), ("hostname", "ab-c", False),
    ("hostname", "a..b", False), ("hostname", "exa_mple.com", False),
    ("ipv4", "192.168.0.1", True), ("ipv4", "192.168.000.001", True), ("ipv4", "256.0.0.1", False),
    ("ipv4", "::ffff:1.2.3.4", True), ("ipv4", "::1", False),
    ("ipv6", "2001:db8::1", True), ("ipv6", "1.2.3.4", False), ("ipv6", "fe80::1%eth0", False),
    ("cidr", "10.0.0.0/8", True), ("cidr", "2001:db8::/32", True), ("cidr", "10.0.0.0/33", False),
    ("cidr", "10.0.0.0", False),
    ("mac", "01:23:45:67:89:ab", True), ("mac", "01-23-45-67-89-ab", True),
    ("mac", "0123.4567.89ab", True), ("mac", "01:23:45:67:89", False),
    ("uri", "https://example.com/a?b=c", True), ("uri", "/absolute/path", True),
    ("uri", "mailto:a@b.c", True), ("uri", "relative/path", False), ("uri", "", False),
    ("uri", "http://exa mple.com/", False), ("uri", "/bad%zz", False),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", True),
    ("uuid", "123E4567E89B12D3A456426614174000", True),
    ("uuid", "123e4567-e89b-12d3-a456", False),
    ("uuid4", "123e4567-e89b-42d3-a456-426614174000", True),
    ("uuid4", "123e4567-e89b-12d3-a456-426614174000", False),
    ("byte", "aGVsbG8=", True), ("byte", "aGVsbG8", False), ("byte", "", False),
    ("password", "anything", True),
    ("isbn10", "0-321-75104-3", True), ("isbn13", "978-0321751041", True), ("isbn", "123", False),
    ("creditcard", "4111-1111-1111-1111", True), ("creditcard", "4111-1111-1111-1112", False),
    ("ssn", "123-45-6789", True), ("ssn", "123456789", False),
    ("hexcolor", "#FFF", True), ("hexcolor", "#FFFF", False),
    ("rgbcolor", "rgb(255, 0, 10)", True), ("rgbcolor", "rgb(256,0,0)", False),
    ("bsonobjectid", "507f1f77bcf86cd799439011", True), ("bsonobjectid", "507f1f77", False),
]


@pytest.mark.parametrize(("fmt", "value", "valid"), FORMAT_CASES,
                         ids=[f"{c[0]}:{c[1]}" for c in FORMAT_CASES])
def test_formats(fmt: str, value: str, valid: bool) -> None:
    check = formats.validator(fmt)
    assert check is not None
    assert check(value) is valid


@pytest.mark.parametrize(("schema_type", "fmt", "kept"), [
    ("string", "date-time", "date-time"), ("", "email", "email"), ("string", "foo", ""),
    ("string", "k8s-short-name", ""), ("integer", "int32", "int32"), ("integer", "email", ""),
    ("number", "double", "double"), ("number", "int64", ""), ("boolean", "date", ""),
    ("object", "email", ""),
])
def test_effective_format(schema_type: str, fmt: str, kept: str) -> None:
    assert formats.effective_format(schema_type, fmt) == kept
