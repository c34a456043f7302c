"""Kubernetes' URL library: ``url(s)``, ``isURL(s)`` and the ``get*`` accessors.

A string is a URL when Go's ``url.ParseRequestURI`` accepts it (an absolute URI, or an
absolute path); its parts are then those of Go's ``url.Parse`` (which also splits off the
``#fragment``). This module reimplements the parts of Go's ``net/url`` those functions use:
scheme, authority (user info, host, port, bracketed IPv6), path unescaping and
``EscapedPath``, and ``Query`` (``+`` is a space; malformed pairs are dropped).

Not guaranteed: Go's validation of host characters beyond percent-escapes and ports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from setpoint.cel import types as t
from setpoint.cel.errors import EvalError, NoSuchOverload
from setpoint.cel.functions import (
    Function,
    actual_size,
    library,
    member,
    overload,
    string_cost,
    string_predicate,
)
from setpoint.cel.objects import Opaque

_UNRESERVED: Final = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
_PATH_KEEP: Final = _UNRESERVED | frozenset("$&+,/:;=@")
_VALID_ENCODED_EXTRA: Final = frozenset("!$&'()*+,;=:@[]/%")
_HEX: Final = "0123456789ABCDEF"


class URLError(ValueError):
    pass


def _unescape(s: str, *, query: bool) -> str:
    out = bytearray()
    i = 0
    raw = s.encode()
    while i < len(raw):
        c = raw[i]
        if c == 0x25:  # %
            chunk = raw[i:i + 3]
            if len(chunk) < 3 or not all(chr(x) in "0123456789abcdefABCDEF" for x in chunk[1:]):
                bad = chunk.decode(errors="replace")
                raise URLError(f'invalid URL escape "{bad}"')
            out.append(int(chunk[1:].decode(), 16))
            i += 3
        elif c == 0x2B and query:  # +
            out.append(0x20)
            i += 1
        else:
            out.append(c)
            i += 1
    return out.decode(errors="replace")


def _escape_path(s: str) -> str:
    out = []
    for b in s.encode():
        c = chr(b)
        if c in _PATH_KEEP:
            out.append(c)
        else:
            out.append("%" + _HEX[b >> 4] + _HEX[b & 15])
    return "".join(out)


def _valid_encoded(s: str) -> bool:
    for c in s:
        if c in _UNRESERVED or c in _VALID_ENCODED_EXTRA:
            continue
        return False
    return True


def _valid_port(port: str) -> bool:
    return port == "" or (port.startswith(":") and port[1:].isascii() and
                          (port[1:] == "" or port[1:].isdigit()))


@dataclass(frozen=True, slots=True)
class ParsedURL:
    scheme: str = ""
    opaque: str = ""
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""
    fragment: str = ""

    def escaped_path(self) -> str:
        if self.raw_path and _valid_encoded(self.raw_path):
            try:
                if _unescape(self.raw_path, query=False) == self.path:
                    return self.raw_path
            except URLError:
                pass
        if self.path == "*":
            return "*"
        return _escape_path(self.path)

    def hostname(self) -> str:
        host, _ = _split_host_port(self.host)
        return host

    def port(self) -> str:
        _, port = _split_host_port(self.host)
        return port


def _split_host_port(hostport: str) -> tuple[str, str]:
    host, port = hostport, ""
    colon = host.rfind(":")
    if colon >= 0 and _valid_port(host[colon:]):
        host, port = host[:colon], host[colon + 1:]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _scheme(raw: str) -> tuple[str, str]:
    for i, c in enumerate(raw):
        if c.isascii() and c.isalpha():
            continue
        if c.isascii() and (c.isdigit() or c in "+-."):
            if i == 0:
                return "", raw
            continue
        if c == ":":
            if i == 0:
                raise URLError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return "", raw
    return "", raw


def _parse_host(host: str) -> str:
    if host.startswith("["):
        end = host.rfind("]")
        if end < 0:
            raise URLError("missing ']' in host")
        port = host[end + 1:]
        if not _valid_port(port):
            raise URLError(f'invalid port "{port}" after host')
        return _unescape(host, query=False)
    colon = host.rfind(":")
    if colon >= 0:
        port = host[colon:]
        if not _valid_port(port):
            raise URLError(f'invalid port "{port}" after host')
    return _unescape(host, query=False)


def _parse(raw: str, *, via_request: bool) -> ParsedURL:
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise URLError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise URLError("empty url")
    if raw == "*":
        return ParsedURL(path="*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    raw_query = ""
    if rest.endswith("?") and rest.count("?") == 1:
        rest = rest[:-1]
    elif "?" in rest:
        rest, _, raw_query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return ParsedURL(scheme=scheme, opaque=rest, raw_query=raw_query)
        if via_request:
            raise URLError("invalid URI for request")
        if ":" in rest.split("/", 1)[0]:
            raise URLError("first path segment in URL cannot contain colon")
    host = ""
    if (scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        rest = slash + tail
        userinfo, at, hostpart = authority.rpartition("@")
        if not at:
            hostpart = authority
        elif any(c in userinfo for c in "/?#"):
            raise URLError("net/url: invalid userinfo")
        host = _parse_host(hostpart)
    path = _unescape(rest, query=False)
    raw_path = rest if _escape_path(path) != rest else ""
    return ParsedURL(scheme=scheme, host=host, path=path, raw_path=raw_path, raw_query=raw_query)


def parse_request_uri(raw: str) -> ParsedURL:
    try:
        return _parse(raw, via_request=True)
    except URLError as e:
        raise URLError(f'parse "{raw}": {e}') from None


def parse_url(raw: str) -> ParsedURL:
    base, hash_, fragment = raw.partition("#")
    try:
        u = _parse(base, via_request=False)
        frag = _unescape(fragment, query=False) if hash_ else ""
    except URLError as e:
        raise URLError(f'parse "{raw}": {e}') from None
    return ParsedURL(u.scheme, u.opaque, u.host, u.path, u.raw_path, u.raw_query, frag)


def parse_query(raw: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for part in raw.split("&"):
        if not part or ";" in part:
            continue
        key, _, value = part.partition("=")
        try:
            k = _unescape(key, query=True)
            v = _unescape(value, query=True)
        except URLError:
            continue
        out.setdefault(k, []).append(v)
    return out


@dataclass(frozen=True, slots=True, eq=False)
class URL(Opaque):
    type_name: ClassVar[str] = "kubernetes.URL"
    text: str
    parsed: ParsedURL = field(default_factory=ParsedURL)

    def equals(self, other: Any) -> bool:
        return isinstance(other, URL) and self.parsed == other.parsed


def to_url(s: Any) -> URL:
    if type(s) is not str:
        raise NoSuchOverload()
    try:
        parse_request_uri(s)
        return URL(s, parse_url(s))
    except URLError as e:
        raise EvalError(f"URL parse error during conversion from string: {e}") from None


is_url = string_predicate(parse_request_uri, URLError)


def _u(v: Any) -> ParsedURL:
    if not isinstance(v, URL):
        raise NoSuchOverload()
    return v.parsed


def _query(v: Any) -> dict[str, list[str]]:
    return parse_query(_u(v).raw_query)


_U, _S = t.URL, t.STRING

URLS = library(
    Function("url", (overload("string_to_url", (_S,), _U),), to_url,
             lambda args, result: string_cost(actual_size(args[0]))),
    Function("isURL", (overload("is_url_string", (_S,), t.BOOL),), is_url),
    Function("getScheme", (member("url_get_scheme", (_U,), _S),), lambda u: _u(u).scheme),
    Function("getHost", (member("url_get_host", (_U,), _S),), lambda u: _u(u).host),
    Function("getHostname", (member("url_get_hostname", (_U,), _S),),
             lambda u: _u(u).hostname()),
    Function("getPort", (member("url_get_port", (_U,), _S),), lambda u: _u(u).port()),
    Function("getEscapedPath", (member("url_get_escaped_path", (_U,), _S),),
             lambda u: _u(u).escaped_path()),
    Function("getQuery", (member("url_get_query", (_U,),
                                 t.map_of(_S, t.list_of(_S))),), _query),
)
