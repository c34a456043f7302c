"""String formats, as kube-openapi's ``strfmt.Default`` registry checks them for CRDs.

Kubernetes strips every format a CRD may not use before it validates (apiextensions'
``StripUnsupportedFormatsPostProcess``): on ``integer`` only ``int32``/``int64`` survive, on
``number`` only ``float``/``double``, on ``string`` (or no type) only :data:`SUPPORTED` names,
and on other types nothing. Format names are normalised by removing ``-`` (``date-time`` is
``datetime``). A surviving string format is checked by :func:`validator`; unknown formats are
ignored, never errors.

Invariants: validators are pure ``str -> bool`` functions that never raise, and the set of
names is the one Kubernetes 1.32 supports (the ``k8s-short-name``/``k8s-long-name`` formats
arrived in 1.34 and are ignored here, as 1.32 ignores them).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import unicodedata
from collections.abc import Callable

from setpoint.apimachinery import regexp

Validator = Callable[[str], bool]

SUPPORTED = frozenset({
    "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
    "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
    "byte", "password", "date", "duration", "datetime",
})


def normalize(name: str) -> str:
    return name.replace("-", "")


def effective_format(schema_type: str, fmt: str, *, strip: bool = True) -> str:
    """The format Kubernetes keeps for a node of ``schema_type`` ("" = stripped)."""
    if not fmt or not strip:
        return fmt
    if schema_type in ("", "string"):
        return fmt if normalize(fmt) in SUPPORTED else ""
    if schema_type == "integer":
        return fmt if fmt in ("int32", "int64") else ""
    if schema_type == "number":
        return fmt if fmt in ("float", "double") else ""
    return ""


def validator(fmt: str) -> Validator | None:
    """The check for a string format, or ``None`` if the registry does not know the name."""
    return _VALIDATORS.get(normalize(fmt))


# --- individual formats -----------------------------------------------------------------------

_HEX = frozenset("0123456789abcdefABCDEF")


def _bson_object_id(s: str) -> bool:
    return len(s) == 24 and all(c in _HEX for c in s)


# Each pattern is matched whole (fullmatch), on RE2.
_UUID = regexp.Regexp(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_UUID3 = regexp.Regexp(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}")
_UUID4 = regexp.Regexp(
    r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}")
_UUID5 = regexp.Regexp(
    r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}")
_CREDIT_CARD = regexp.Regexp(
    r"4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|"
    r"3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11}")
_ISBN10 = regexp.Regexp(r"[0-9]{9}X|[0-9]{10}")
_ISBN13 = regexp.Regexp(r"[0-9]{13}")
_HEXCOLOR = regexp.Regexp(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})")
_RGB_PART = r"[\t\n\f\r ]*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])[\t\n\f\r ]*"
_RGBCOLOR = regexp.Regexp(r"rgb\(" + _RGB_PART + "," + _RGB_PART + "," + _RGB_PART + r"\)")
_BASE64 = regexp.Regexp(
    r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})")
_SSN = regexp.Regexp(r"[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}")
_SPACES_AND_MINUS = str.maketrans("", "", "\t\n\v\f\r \x85\xa0-")


def _credit_card(s: str) -> bool:
    digits = "".join(ch for ch in s if "0" <= ch <= "9")
    if not _CREDIT_CARD.fullmatch(digits):
        return False
    total = 0
    double = False
    for ch in reversed(digits):
        d = ord(ch) - 48
        if double:
            d *= 2
            total += d % 10 + 1 if d >= 10 else d
        else:
            total += d
        double = not double
    return total % 10 == 0


def _isbn10(s: str) -> bool:
    clean = s.translate(_SPACES_AND_MINUS)
    if not _ISBN10.fullmatch(clean):
        return False
    total = sum((i + 1) * (ord(clean[i]) - 48) for i in range(9))
    total += 100 if clean[9] == "X" else 10 * (ord(clean[9]) - 48)
    return total % 11 == 0


def _isbn13(s: str) -> bool:
    clean = s.translate(_SPACES_AND_MINUS)
    if not _ISBN13.fullmatch(clean):
        return False
    total = sum((1, 3)[i % 2] * (ord(clean[i]) - 48) for i in range(12))
    return (ord(clean[12]) - 48) - ((10 - total % 10) % 10) == 0


def _ssn(s: str) -> bool:
    return len(s) == 11 and _SSN.fullmatch(s)


def _byte(s: str) -> bool:
    if not _BASE64.fullmatch(s):
        return False
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern already excludes these
        return False
    return True


# hostname: kube-openapi's pattern uses \p{S} and \p{L}; each character is mapped to a class
# letter first (digits D, letters A, symbols S, anything else X), then the pattern is applied
_HOSTNAME_CLASSES = regexp.Regexp(
    r"[ADS]((-?[ADS]{0,62})?)|([ADS](([ADS-]{0,61}[ADS])?)(\.)){1,}(A){2,63}")


def _host_class(ch: str) -> str:
    if ch == "-" or ch == ".":
        return ch
    if "0" <= ch <= "9":
        return "D"
    if ("a" <= ch <= "z") or ("A" <= ch <= "Z"):
        return "A"
    cat = unicodedata.category(ch)
    if cat[0] == "L":
        return "A"
    if cat[0] == "S":
        return "S"
    return "X"


def _hostname(s: str) -> bool:
    if not _HOSTNAME_CLASSES.fullmatch("".join(_host_class(c) for c in s)):
        return False
    raw = s.encode("utf-8", "surrogatepass")
    if len(raw) > 255:
        return False
    return all(len(part) <= 63 for part in raw.split(b"."))


def _parse_ipv4_sloppy(s: str) -> bool:
    """Go 1.16's ``net.ParseIP`` for dotted quads: leading zeros are tolerated."""
    parts = s.split(".")
    if len(parts) != 4:
        return False
    for part in parts:
        if not part or not part.isascii() or not part.isdigit():
            return False
        if len(part) > 8 or int(part) > 255:
            return False
    return True


def _parse_ipv6(s: str, *, sloppy: bool) -> bool:
    if "%" in s or not s.isascii():
        return False
    if sloppy and "." in s:
        head, _, tail = s.rpartition(":")
        if not _parse_ipv4_sloppy(tail):
            return False
        s = head + ":" + ".".join(str(int(p)) for p in tail.split("."))
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def _ipv4(s: str) -> bool:
    if "." not in s:
        return False
    if ":" in s:
        return _parse_ipv6(s, sloppy=True)
    return _parse_ipv4_sloppy(s)


def _ipv6(s: str) -> bool:
    if ":" not in s:
        return False
    return _parse_ipv6(s, sloppy=False)


def _cidr(s: str) -> bool:
    addr, sep, mask = s.partition("/")
    if not sep:
        return False
    if ":" in addr:
        ok = _parse_ipv6(addr, sloppy=True)
        bits = 128
    else:
        ok = _parse_ipv4_sloppy(addr)
        bits = 32
    if not ok or not mask or not mask.isascii() or not mask.isdigit():
        return False
    return int(mask) <= bits


def _mac(s: str) -> bool:
    n = len(s)
    if n < 14:
        return False
    if s[2] in ":-":
        if (n + 1) % 3 != 0:
            return False
        count = (n + 1) // 3
        if count not in (6, 8, 20):
            return False
        sep = s[2]
        for i in range(count):
            pair = s[3 * i: 3 * i + 2]
            if not all(c in _HEX for c in pair):
                return False
            if i < count - 1 and s[3 * i + 2] != sep:
                return False
        return True
    if s[4] == ".":
        if (n + 1) % 5 != 0:
            return False
        count = 2 * (n + 1) // 5
        if count not in (6, 8, 20):
            return False
        for i in range(count // 2):
            group = s[5 * i: 5 * i + 4]
            if not all(c in _HEX for c in group):
                return False
            if i < count // 2 - 1 and s[5 * i + 4] != ".":
                return False
        return True
    return False


_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_ASCII_DIGITS = frozenset("0123456789")

# date and date-time are the formats CRDs use most; their shapes are checked by hand, which is
# linear and faster than a call into any regular-expression engine.


def _all_digits(s: str) -> bool:
    return s.isascii() and s.isdigit()


def _date(s: str) -> bool:
    """kube-openapi's ``^([0-9]{4})-([0-9]{2})-([0-9]{2})$`` and a real day of the month."""
    if len(s) != 10 or s[4] != "-" or s[7] != "-" or not (
            _all_digits(s[:4]) and _all_digits(s[5:7]) and _all_digits(s[8:])):
        return False
    year, month, day = int(s[:4]), int(s[5:7]), int(s[8:])
    if not 1 <= month <= 12 or day < 1:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    limit = 29 if month == 2 and leap else _DAYS[month - 1]
    return day <= limit


def _zone(s: str) -> bool:
    """``z|[+-][0-9]{2}:[0-9]{2}``, the whole of ``s``."""
    return s == "z" or (len(s) == 6 and s[0] in "+-" and s[3] == ":"
                        and _all_digits(s[1:3]) and _all_digits(s[4:]))


def _time_of_day(t: str) -> bool:
    """``^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|[+-][0-9]{2}:[0-9]{2})$`` (lower case),
    hours to 23 and minutes and seconds to 59."""
    if len(t) < 9 or t[2] != ":" or t[5] != ":" or not (
            _all_digits(t[:2]) and _all_digits(t[3:5]) and _all_digits(t[6:8])):
        return False
    if not (t[:2] <= "23" and t[3:5] <= "59" and t[6:8] <= "59"):
        return False
    rest = t[8:]
    if _zone(rest):
        return True
    # a fraction: any one character but a newline, then digits; the zone follows them
    end = 1
    while end < len(rest) and rest[end] in _ASCII_DIGITS:
        end += 1
    return rest[0] != "\n" and end > 1 and _zone(rest[end:])


def _datetime(s: str) -> bool:
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    return len(parts) >= 2 and _date(parts[0]) and _time_of_day(parts[1])


_GO_UNITS = {"ns", "us", "\u00b5s", "\u03bcs", "ms", "s", "m", "h"}
_GO_DURATION = regexp.Regexp(r"(?:[0-9]*(?:\.[0-9]*)?[^0-9.]+)+")
_GO_DURATION_PART = regexp.Regexp(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]+)")
_SCALA_UNITS = (
    ("ns", "nano"), ("us", "\u00b5s", "micro"), ("ms", "milli"), ("s", "sec"), ("m", "min"),
    ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"),
)
_SCALA_PART = regexp.Regexp("([0-9]+)[\\t\\n\\f\\r ]*([A-Za-z\u00b5]+)")
_DURATION_LIMIT = (1 << 63) - 1
_UNIT_NANOS = {"ns": 1, "us": 1000, "\u00b5s": 1000, "\u03bcs": 1000, "ms": 10**6,
               "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def _go_parse_duration(s: str) -> bool:
    """Go's ``time.ParseDuration``: ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+``, or ``0``."""
    if s[:1] in ("-", "+"):
        s = s[1:]
    if s == "0":
        return True
    if not s:
        return False
    if not _GO_DURATION.fullmatch(s):
        return False
    total = 0.0
    # the parts of a text the whole pattern matched follow one another
    for _, number, unit in _GO_DURATION_PART.finditer(s):
        if number in (None, "", ".") or unit not in _GO_UNITS:
            return False
        total += float(number) * _UNIT_NANOS[unit]
        if total > _DURATION_LIMIT + 1:
            return False
    return True


def _duration(s: str) -> bool:
    if _go_parse_duration(s):
        return True
    ok = False
    for _, number, word in _SCALA_PART.finditer(s):
        if len(number or "") > 19 or int(number or 0) > _DURATION_LIMIT:
            return False
        unit = (word or "").strip().lower()
        for variants in _SCALA_UNITS:
            last = len(variants) - 1
            for i, variant in enumerate(variants):
                if (i == last and unit.startswith(variant)) or variant.lower() == unit:
                    ok = True
    return ok


# email: Go's net/mail.ParseAddress accepts "addr-spec" or "Name <addr-spec>".
# atext: these ASCII characters, and any character beyond ASCII (checked by hand: one
# translate() deletes the ASCII ones, faster than a call into RE2 for every part)
_ATEXT_ASCII = str.maketrans("", "", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                             "0123456789!#$%&'*+-/=?^_`{|}~")


def _atext(s: str) -> bool:
    rest = s.translate(_ATEXT_ASCII)
    return bool(s) and (not rest or all(ord(c) > 0x7F for c in rest))


_QUOTED_LOCAL = regexp.Regexp(r'"(?:[^"\\\r\n]|\\.)*"')


def _dot_atom(s: str) -> bool:
    return bool(s) and all(_atext(part) for part in s.split("."))


def _addr_spec(s: str) -> bool:
    local, at, domain = s.rpartition("@")
    if not at or not local or not domain:
        return False
    if not (_dot_atom(local) or _QUOTED_LOCAL.fullmatch(local)):
        return False
    if domain.startswith("[") and domain.endswith("]"):
        return "[" not in domain[1:-1] and "]" not in domain[1:-1] and "\\" not in domain
    return _dot_atom(domain)


def _email(s: str) -> bool:
    s = s.strip(" \t")
    if not s:
        return False
    if s.endswith(">"):
        lt = s.rfind("<")
        if lt < 0:
            return False
        name = s[:lt].strip(" \t")
        if name and not (name.startswith('"') and name.endswith('"')):
            words = name.split()
            if not all(_atext(w.replace(".", "")) or w == "." for w in words):
                return False
        return _addr_spec(s[lt + 1: -1].strip(" \t"))
    return _addr_spec(s)


# uri: Go's url.ParseRequestURI (an absolute URI or an absolute path).
_SCHEME = regexp.Regexp(r"[A-Za-z][A-Za-z0-9+\-.]*")
_HOST_OK = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$&'()*+,;=:[]<>\"")


def _valid_escapes(s: str) -> bool:
    i = s.find("%")
    while i >= 0:
        if len(s) < i + 3 or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
            return False
        i = s.find("%", i + 3)
    return True


_USERINFO_OK = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:~!$&'()*+,;=%@")


def _valid_host(host: str) -> bool:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            return False
        rest = host[end + 1:]
        if rest and not ((rest.startswith(":") and rest[1:].isdigit()) or rest == ":"):
            return False
        return _valid_escapes(host)
    colon = host.rfind(":")
    if colon >= 0:
        port = host[colon + 1:]
        if port and not (port.isascii() and port.isdigit()):
            return False
        host = host[:colon]
    if not _valid_escapes(host):
        return False
    return all(c in _HOST_OK or ord(c) >= 0x80 or c == "%" for c in host)


def _uri(s: str) -> bool:
    if not s or any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        return False
    if s == "*":
        return True
    colon = s.find(":")
    scheme = ""
    rest = s
    if colon == 0:
        return False
    if colon > 0 and _SCHEME.fullmatch(s[:colon]):
        scheme = s[:colon]
        rest = s[colon + 1:]
    if "?" in rest:
        rest = rest.split("?", 1)[0]
    if not rest.startswith("/"):
        return bool(scheme)
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        if "@" in authority:
            userinfo, _, authority = authority.rpartition("@")
            if not all(c in _USERINFO_OK for c in userinfo) or not _valid_escapes(userinfo):
                return False
        if not _valid_host(authority):
            return False
    return _valid_escapes(rest)


def _password(s: str) -> bool:
    return True


_VALIDATORS: dict[str, Validator] = {
    "bsonobjectid": _bson_object_id,
    "uri": _uri,
    "email": _email,
    "hostname": _hostname,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "cidr": _cidr,
    "mac": _mac,
    "uuid": _UUID.fullmatch,
    "uuid3": _UUID3.fullmatch,
    "uuid4": _UUID4.fullmatch,
    "uuid5": _UUID5.fullmatch,
    "isbn": lambda s: _isbn10(s) or _isbn13(s),
    "isbn10": _isbn10,
    "isbn13": _isbn13,
    "creditcard": _credit_card,
    "ssn": _ssn,
    "hexcolor": _HEXCOLOR.fullmatch,
    "rgbcolor": _RGBCOLOR.fullmatch,
    "byte": _byte,
    "password": _password,
    "date": _date,
    "duration": _duration,
    "datetime": _datetime,
}
