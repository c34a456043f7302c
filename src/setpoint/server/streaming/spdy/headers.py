"""SPDY/3 header blocks: the name/value format and its zlib compression.

A header block is a 32-bit pair count, then per pair a 32-bit name length, the name, a 32-bit
value length and the value (several values of one name are joined by NUL). Each direction of a
connection compresses its header blocks with one zlib stream that runs for the connection's
lifetime, primed with the SPDY/3 dictionary and flushed (``Z_SYNC_FLUSH``) after every block,
so a block can only be decoded after every earlier block of the same direction.

Invariants:

* :class:`Inflater` never produces more than ``max_bytes`` of a block: decompression is
  bounded by output size (a 1 KiB frame that inflates to gigabytes is refused after
  ``max_bytes + 1`` bytes), and after any failure the inflater refuses everything, because
  the shared zlib stream can no longer be trusted.
* Names are lowercased on both sides; a block holds at most ``max_pairs`` distinct names.

Non-guarantees: header values are bytes on the wire; they are decoded as Latin-1 (lossless),
not validated as HTTP tokens.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping, Sequence

#: The length-prefixed words at the start of the SPDY/3 compression dictionary (section
#: 2.6.10.1 of the SPDY/3 draft), each preceded on the wire by its 32-bit length.
_WORDS = (
    "options", "head", "post", "put", "delete", "trace", "accept", "accept-charset",
    "accept-encoding", "accept-language", "accept-ranges", "age", "allow", "authorization",
    "cache-control", "connection", "content-base", "content-encoding", "content-language",
    "content-length", "content-location", "content-md5", "content-range", "content-type",
    "date", "etag", "expect", "expires", "from", "host", "if-match", "if-modified-since",
    "if-none-match", "if-range", "if-unmodified-since", "last-modified", "location",
    "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
    "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent",
    "vary", "via", "warning", "www-authenticate", "method", "get", "status", "200 OK",
    "version", "HTTP/1.1", "url", "public", "set-cookie", "keep-alive", "origin",
)
#: ... and the text that follows them.
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
    "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
    "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
    "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
    "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
    "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)

DICTIONARY = b"".join(struct.pack(">I", len(w)) + w.encode() for w in _WORDS) + _TAIL.encode()

#: (name, value) pairs; a value with several parts has them joined by NUL
Headers = tuple[tuple[str, str], ...]

_U32 = struct.Struct(">I")


class HeaderError(Exception):
    """A header block that cannot be decoded.

    ``fatal`` errors leave the connection's zlib stream unusable (the connection must end);
    the others concern one block only (its stream can be refused).
    """

    def __init__(self, message: str, *, fatal: bool) -> None:
        super().__init__(message)
        self.fatal = fatal


def serialize(headers: Mapping[str, str | Sequence[str]] | Iterable[tuple[str, str]]) -> bytes:
    """The uncompressed block; repeated names are merged into one NUL-joined value."""
    merged: dict[str, list[str]] = {}
    items = headers.items() if isinstance(headers, Mapping) else headers
    for name, value in items:
        values = [value] if isinstance(value, str) else list(value)
        merged.setdefault(name.lower(), []).extend(values)
    out = [_U32.pack(len(merged))]
    for name, values in merged.items():
        raw_name = name.encode("latin-1")
        raw_value = "\0".join(values).encode("latin-1")
        out += [_U32.pack(len(raw_name)), raw_name, _U32.pack(len(raw_value)), raw_value]
    return b"".join(out)


def parse(block: bytes, *, max_pairs: int) -> Headers:
    """Decode an uncompressed block (raises a non-fatal :class:`HeaderError`)."""
    view = memoryview(block)
    if len(view) < 4:
        raise HeaderError("header block shorter than its pair count", fatal=False)
    (count,) = _U32.unpack_from(view, 0)
    if count > max_pairs:
        raise HeaderError(f"header block with {count} pairs (at most {max_pairs})",
                          fatal=False)
    offset = 4
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for _ in range(count):
        name, offset = _field(view, offset)
        value, offset = _field(view, offset)
        if not name:
            raise HeaderError("header with an empty name", fatal=False)
        key = name.lower()
        if key in seen:
            raise HeaderError(f"header {key!r} appears twice", fatal=False)
        seen.add(key)
        pairs.append((key, value))
    if offset != len(view):
        raise HeaderError("header block has trailing bytes", fatal=False)
    return tuple(pairs)


def _field(view: memoryview, offset: int) -> tuple[str, int]:
    if offset + 4 > len(view):
        raise HeaderError("header block ends inside a length", fatal=False)
    (length,) = _U32.unpack_from(view, offset)
    offset += 4
    if length > len(view) - offset:
        raise HeaderError("header length beyond the block", fatal=False)
    return bytes(view[offset:offset + length]).decode("latin-1"), offset + length


def first(headers: Headers, name: str) -> str | None:
    """The first value of ``name`` (lowercase), as Go's ``http.Header.Get`` gives it."""
    for key, value in headers:
        if key == name:
            return value.split("\0", 1)[0]
    return None


class Deflater:
    """Compresses one direction's header blocks (one zlib stream per connection)."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(level=9, zdict=DICTIONARY)

    def block(self, headers: Mapping[str, str | Sequence[str]] | Iterable[tuple[str, str]]
              ) -> bytes:
        return self._z.compress(serialize(headers)) + self._z.flush(zlib.Z_SYNC_FLUSH)


class Inflater:
    """Decompresses the peer's header blocks, at most ``max_bytes`` each."""

    def __init__(self, *, max_bytes: int, max_pairs: int) -> None:
        if max_bytes < 4 or max_pairs < 1:
            raise ValueError("a header block needs at least 4 bytes and 1 pair")
        self._z = zlib.decompressobj(zdict=DICTIONARY)
        self._max_bytes = max_bytes
        self._max_pairs = max_pairs
        self._broken = False

    def block(self, compressed: bytes) -> Headers:
        if self._broken:
            raise HeaderError("header compression failed earlier on this connection",
                              fatal=True)
        try:
            raw = self._z.decompress(compressed, self._max_bytes + 1)
        except zlib.error as e:
            self._broken = True
            raise HeaderError(f"header block does not decompress: {e}", fatal=True) from e
        if len(raw) > self._max_bytes or self._z.unconsumed_tail:
            self._broken = True
            raise HeaderError(f"header block larger than {self._max_bytes} bytes", fatal=True)
        if self._z.eof:
            self._broken = True
            raise HeaderError("the peer ended its header compression stream", fatal=True)
        return parse(raw, max_pairs=self._max_pairs)
