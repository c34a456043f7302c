"""Where interface keys and revisions live in etcd: two small, exact mappings.

**Keys.** A backend owns every etcd key that starts with its ``prefix``: interface key ``k``
is etcd key ``prefix + k`` (UTF-8), and nothing is stripped or added on the way back. The
interface's keys already carry their own root (``/registry/core/configmaps/ns/name``), so the
default prefix is empty and etcd shows those keys unchanged; a prefix such as ``/clusters/a``
stores them as ``/clusters/a/registry/...``, which lets several clusters share one etcd.
``/registry`` itself is refused because it would read as the doubled
``/registry/registry/...``. Two backends sharing an etcd need prefixes of which neither
starts with the other (``/clusters/a`` and ``/clusters/ab`` overlap).

**Revisions.** etcd's store starts at revision 1 with no keys; the interface calls that
state 0, and its first write 1. So interface revision ``r`` is etcd revision ``r + 1``:
``resourceVersion`` is etcd's ``mod_revision - 1``, and the contract's "an empty store is at
revision 0" holds on a fresh etcd.

Both mappings are bijections on what they accept and preserve order (UTF-8 byte order is
code-point order, and lone surrogates are carried with ``surrogatepass``), so etcd's
byte-ordered ranges are the interface's key-ordered prefixes.
"""

from __future__ import annotations

REVISION_OFFSET = 1
"""etcd revision minus interface revision."""

_DOUBLED = "/registry"

_ALL_KEYS = b"\x00"
"""As a range end: no upper bound. As a range start: the smallest non-empty key."""


def to_etcd_revision(revision: int) -> int:
    """The etcd revision of interface revision ``revision`` (which must not be negative).

    >>> to_etcd_revision(0), to_etcd_revision(7)
    (1, 8)
    """
    if revision < 0:
        raise ValueError(f"revision must not be negative, got {revision}")
    return revision + REVISION_OFFSET


def from_etcd_revision(revision: int) -> int:
    """The interface revision of etcd revision ``revision``; etcd's 0 ("none") stays 0.

    >>> from_etcd_revision(1), from_etcd_revision(8), from_etcd_revision(0)
    (0, 7, 0)
    """
    return max(revision - REVISION_OFFSET, 0)


def range_end(start: bytes) -> bytes:
    """etcd's end of the range of keys starting with ``start``: ``start`` with its last
    byte below 0xff incremented and everything after it dropped; ``b"\\x00"`` (no bound)
    when there is no such byte.

    >>> range_end(b"/a/"), range_end(b"a\\xff"), range_end(b""), range_end(b"\\xff")
    (b'/a0', b'b', b'\\x00', b'\\x00')
    """
    for index in range(len(start) - 1, -1, -1):
        if start[index] < 0xFF:
            return start[:index] + bytes([start[index] + 1])
    return _ALL_KEYS


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


class Keyspace:
    """The etcd keys of one backend: everything under ``prefix``.

    >>> space = Keyspace("/clusters/a")
    >>> space.key("/registry/x")
    b'/clusters/a/registry/x'
    >>> space.name(b"/clusters/a/registry/x")
    '/registry/x'
    >>> space.range("/registry/")
    (b'/clusters/a/registry/', b'/clusters/a/registry0')
    """

    __slots__ = ("_prefix", "_raw")

    def __init__(self, prefix: str = "") -> None:
        if prefix and (not prefix.startswith("/") or prefix.endswith("/")):
            raise ValueError(f"etcd prefix must be empty or start with '/' and not end with "
                             f"'/', got {prefix!r}")
        if prefix == _DOUBLED:
            raise ValueError("etcd prefix '/registry' would store keys as "
                             "'/registry/registry/...'; the default prefix '' already keeps "
                             "them under '/registry/'")
        self._prefix = prefix
        self._raw = _encode(prefix)

    @property
    def prefix(self) -> str:
        return self._prefix

    def key(self, key: str) -> bytes:
        """The etcd key of interface key ``key``."""
        return self._raw + _encode(key)

    def name(self, raw: bytes) -> str:
        """The interface key of etcd key ``raw``, which must lie under the prefix."""
        if not raw.startswith(self._raw):
            raise ValueError(f"etcd key {raw!r} is outside prefix {self._prefix!r}")
        return raw[len(self._raw):].decode("utf-8", "surrogatepass")

    def range(self, prefix: str, start_after: str | None = None) -> tuple[bytes, bytes]:
        """``[start, end)`` covering the keys under ``prefix`` strictly after
        ``start_after`` (``start >= end`` when ``start_after`` lies beyond the prefix; etcd
        reads nothing from such a range).

        >>> Keyspace().range("/p/", start_after="/p/05")
        (b'/p/05\\x00', b'/p0')
        >>> Keyspace().range("")
        (b'\\x00', b'\\x00')
        """
        start = self.key(prefix)
        end = range_end(start)
        if start_after is not None:
            # The smallest key above ``start_after`` is ``start_after`` followed by NUL.
            start = max(start, self.key(start_after) + b"\x00")
        return start or _ALL_KEYS, end
