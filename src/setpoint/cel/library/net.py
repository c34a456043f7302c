"""Kubernetes' IP and CIDR libraries (Go ``net/netip`` semantics).

``ip(s)``, ``isIP(s)``, ``ip.isCanonical(s)``, ``string(ip)``, and on an IP: ``family()``,
``isUnspecified()``, ``isLoopback()``, ``isLinkLocalMulticast()``, ``isLinkLocalUnicast()``,
``isGlobalUnicast()``. ``cidr(s)``, ``isCIDR(s)``, ``string(cidr)``, and on a CIDR:
``containsIP(ip or string)``, ``containsCIDR(cidr or string)``, ``ip()``, ``masked()``,
``prefixLength()``.

Rejected as Kubernetes rejects them: IPv4 octets with leading zeros, IPv6 zones
(``fe80::1%eth0``), IPv4-mapped IPv6 addresses (``::ffff:1.2.3.4``), prefix lengths with
leading zeros or out of range. A CIDR may have host bits set (``cidr('10.0.0.1/8')`` is valid;
``masked()`` clears them); equality compares address and length as written.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from setpoint.apimachinery import regexp
from setpoint.cel import types as t
from setpoint.cel.conversions import to_string
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

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_BITS: Final = regexp.Regexp(r"0|[1-9][0-9]*")
_BROADCAST: Final = ipaddress.IPv4Address("255.255.255.255")


class NetError(ValueError):
    pass


class _AddrError(ValueError):
    def __init__(self, text: str, msg: str, at: str | None = None) -> None:
        where = f" (at {_quote(at)})" if at else ""
        super().__init__(f"ParseAddr({_quote(text)}): {msg}{where}")


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ipv4_fields(text: str, s: str) -> bytes:
    fields = bytearray()
    val, digits = 0, 0
    for i, c in enumerate(s):
        if "0" <= c <= "9":
            if digits == 1 and val == 0:
                raise _AddrError(text, "IPv4 field has octet with leading zero")
            val = val * 10 + ord(c) - 48
            digits += 1
            if val > 255:
                raise _AddrError(text, "IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _AddrError(text, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise _AddrError(text, "IPv4 address too long")
            fields.append(val)
            val, digits = 0, 0
        else:
            raise _AddrError(text, "unexpected character", s[i:])
    if len(fields) < 3:
        raise _AddrError(text, "IPv4 address too short")
    fields.append(val)
    return bytes(fields)


def _ipv6(text: str) -> tuple[bytes, str]:
    s, zone = text, ""
    if "%" in s:
        s, _, zone = s.partition("%")
        if not zone:
            raise _AddrError(text, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis = 0
        s = s[2:]
        if not s:
            return bytes(ip), zone
    i = 0
    while i < 16:
        off, acc = 0, 0
        while off < len(s) and s[off] in "0123456789abcdefABCDEF":
            acc = (acc << 4) + int(s[off], 16)
            if off > 3:
                raise _AddrError(text, "each group must have 4 or less digits", s)
            off += 1
        if off == 0:
            raise _AddrError(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _AddrError(text, "embedded IPv4 address must replace the final 2 fields "
                                       "of the address", s)
            if i + 4 > 16:
                raise _AddrError(text, "too many hex fields to fit an embedded IPv4 at the end "
                                       "of the address", s)
            ip[i:i + 4] = _ipv4_fields(text, s)
            s = ""
            i += 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _AddrError(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _AddrError(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _AddrError(text, "multiple :: in address", s)
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        raise _AddrError(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _AddrError(text, "address string too short")
        n = 16 - i
        ip[ellipsis + n:16] = ip[ellipsis:i]
        ip[ellipsis:ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _AddrError(text, "the :: must expand to at least one field of zeros", s)
    return bytes(ip), zone


def go_parse_addr(text: str) -> tuple[Address, str]:
    """Go's ``netip.ParseAddr``: the address and its zone, or ``_AddrError`` as Go words it."""
    for c in text:
        if c == ".":
            return ipaddress.IPv4Address(_ipv4_fields(text, text)), ""
        if c == ":":
            packed, zone = _ipv6(text)
            return ipaddress.IPv6Address(packed), zone
        if c == "%":
            raise _AddrError(text, "missing IPv6 address")
    raise _AddrError(text, "unable to parse IP")


def parse_ip(text: str) -> Address:
    """Kubernetes' ``parseIPAddr``: no zones, no IPv4-mapped IPv6."""
    try:
        addr, zone = go_parse_addr(text)
    except _AddrError as e:
        raise NetError(f"IP Address {_quote(text)} parse error during conversion from string: "
                       f"{e}") from None
    if zone:
        raise NetError(f"IP address {_quote(text)} with zone value is not allowed")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise NetError(f"IPv4-mapped IPv6 address {_quote(text)} is not allowed")
    return addr


def parse_cidr(text: str) -> tuple[Address, int]:
    """Kubernetes' ``parseCIDR`` over Go's ``netip.ParsePrefix``."""
    def fail(msg: str) -> NetError:
        return NetError("network address parse error during conversion from string: "
                        f"netip.ParsePrefix({_quote(text)}): {msg}")
    addr_text, slash, bits_text = text.rpartition("/")
    if not slash:
        raise fail("no '/'")
    try:
        addr, zone = go_parse_addr(addr_text)
    except _AddrError as e:
        raise fail(str(e)) from None
    if zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    if not _BITS.fullmatch(bits_text):
        raise fail(f"bad bits after slash: {_quote(bits_text)}")
    bits = int(bits_text)
    if not 0 <= bits <= addr.max_prefixlen:
        raise fail("prefix length out of range")
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise NetError(f"IPv4-mapped IPv6 address {_quote(text)} is not allowed")
    return addr, bits


@dataclass(frozen=True, slots=True, eq=False)
class IP(Opaque):
    type_name: ClassVar[str] = "net.IP"
    addr: Address

    def equals(self, other: Any) -> bool:
        return isinstance(other, IP) and self.addr == other.addr

    def cel_string(self) -> str:
        return str(self.addr)


@dataclass(frozen=True, slots=True, eq=False)
class CIDR(Opaque):
    type_name: ClassVar[str] = "net.CIDR"
    addr: Address
    bits: int

    def equals(self, other: Any) -> bool:
        return isinstance(other, CIDR) and (self.addr, self.bits) == (other.addr, other.bits)

    def cel_string(self) -> str:
        return f"{self.addr}/{self.bits}"

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        return ipaddress.ip_network((self.addr, self.bits), strict=False)


def to_ip(v: Any) -> IP:
    if isinstance(v, CIDR):
        return IP(v.addr)
    if type(v) is not str:
        raise NoSuchOverload()
    try:
        return IP(parse_ip(v))
    except NetError as e:
        raise EvalError(str(e)) from None


is_ip = string_predicate(parse_ip, NetError)


def is_canonical(v: Any) -> bool:
    if type(v) is not str:
        raise NoSuchOverload()
    try:
        return str(parse_ip(v)) == v
    except NetError as e:
        raise EvalError(str(e)) from None


def to_cidr(v: Any) -> CIDR:
    if type(v) is not str:
        raise NoSuchOverload()
    try:
        addr, bits = parse_cidr(v)
    except NetError as e:
        raise EvalError(f"network address parse error during conversion from string: {e}") \
            from None
    return CIDR(addr, bits)


is_cidr = string_predicate(parse_cidr, NetError)


def _ip(v: Any) -> Address:
    if not isinstance(v, IP):
        raise NoSuchOverload()
    return v.addr


def _cidr(v: Any) -> CIDR:
    if not isinstance(v, CIDR):
        raise NoSuchOverload()
    return v


def contains_ip(c: Any, other: Any) -> bool:
    cidr = _cidr(c)
    addr = to_ip(other).addr if type(other) is str else _ip(other)
    return addr.version == cidr.addr.version and addr in cidr.network


def contains_cidr(c: Any, other: Any) -> bool:
    cidr = _cidr(c)
    inner = to_cidr(other) if type(other) is str else _cidr(other)
    if inner.addr.version != cidr.addr.version:
        return False
    return cidr.network.overlaps(inner.network) and cidr.bits <= inner.bits


def masked(c: Any) -> CIDR:
    cidr = _cidr(c)
    return CIDR(cidr.network.network_address, cidr.bits)


def _is_global_unicast(a: Address) -> bool:
    if a == _BROADCAST or a.is_unspecified or a.is_loopback or a.is_multicast:
        return False
    return not _is_link_local_unicast(a)


def _is_link_local_unicast(a: Address) -> bool:
    if a.version == 4:
        return a in ipaddress.IPv4Network("169.254.0.0/16")
    return a in ipaddress.IPv6Network("fe80::/10")


def _is_link_local_multicast(a: Address) -> bool:
    if a.version == 4:
        return a in ipaddress.IPv4Network("224.0.0.0/24")
    packed = a.packed
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02


def _string_cost(args: Sequence[Any], result: Any) -> int:
    return string_cost(actual_size(args[0]))


def _contains_cost(args: Sequence[Any], result: Any) -> int:
    cidr_size = len(args[0].cel_string()) if isinstance(args[0], CIDR) else 1
    cost = string_cost(2 * cidr_size)
    if type(args[1]) is str:
        cost += string_cost(len(args[1]))
    return cost


_IP, _CIDR, _S, _B = t.IP, t.CIDR, t.STRING, t.BOOL


def _ip_method(name: str, oid: str, fn: Any, result: t.Type = _B) -> Function:
    return Function(name, (member(oid, (_IP,), result),), lambda v: fn(_ip(v)))


NETWORKS = library(
    Function("ip", (overload("string_to_ip", (_S,), _IP), member("cidr_ip", (_CIDR,), _IP)),
             to_ip, lambda args, result: 1 if isinstance(args[0], CIDR)
             else string_cost(actual_size(args[0]))),
    Function("isIP", (overload("is_ip", (_S,), _B),), is_ip, _string_cost),
    Function("ip.isCanonical", (overload("ip_is_canonical", (_S,), _B),), is_canonical,
             lambda args, result: string_cost(actual_size(args[0]), 2)),
    _ip_method("family", "ip_family", lambda a: a.version, t.INT),
    _ip_method("isUnspecified", "ip_is_unspecified", lambda a: a.is_unspecified),
    _ip_method("isLoopback", "ip_is_loopback", lambda a: a.is_loopback),
    _ip_method("isLinkLocalMulticast", "ip_is_link_local_multicast", _is_link_local_multicast),
    _ip_method("isLinkLocalUnicast", "ip_is_link_local_unicast", _is_link_local_unicast),
    _ip_method("isGlobalUnicast", "ip_is_global_unicast", _is_global_unicast),
    Function("cidr", (overload("string_to_cidr", (_S,), _CIDR),), to_cidr, _string_cost),
    Function("isCIDR", (overload("is_cidr", (_S,), _B),), is_cidr, _string_cost),
    Function("containsIP", (member("cidr_contains_ip_ip", (_CIDR, _IP), _B),
                            member("cidr_contains_ip_string", (_CIDR, _S), _B)), contains_ip,
             _contains_cost),
    Function("containsCIDR", (member("cidr_contains_cidr", (_CIDR, _CIDR), _B),
                              member("cidr_contains_cidr_string", (_CIDR, _S), _B)),
             contains_cidr, _contains_cost),
    Function("masked", (member("cidr_masked", (_CIDR,), _CIDR),), masked),
    Function("prefixLength", (member("cidr_prefix_length", (_CIDR,), t.INT),),
             lambda c: _cidr(c).bits),
    Function("string", (overload("ip_to_string", (_IP,), _S),
                        overload("cidr_to_string", (_CIDR,), _S)), to_string),
)
