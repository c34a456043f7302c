"""The etcd backend's pure parts: key and revision mapping, endpoints, error translation."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("aetcd")

from setpoint.storage import StorageConfig, StorageError, Unavailable, create_backend
from setpoint.storage.etcd import EtcdBackend, keys, wire


@pytest.mark.parametrize(("prefix", "key", "raw"), [
    ("", "/registry/core/configmaps/ns/x", b"/registry/core/configmaps/ns/x"),
    ("/clusters/a", "/registry/x", b"/clusters/a/registry/x"),
    ("/c", "/ns/\u2603", "/c/ns/\u2603".encode()),
    ("", "/lone/\ud800", b"/lone/\xed\xa0\x80"),
], ids=["default", "namespaced", "unicode", "surrogate"])
def test_keys_map_by_concatenation_both_ways(prefix: str, key: str, raw: bytes) -> None:
    space = keys.Keyspace(prefix)

    assert space.key(key) == raw
    assert space.name(raw) == key


@pytest.mark.parametrize(("prefix", "message"), [
    ("/registry", "/registry/registry"),
    ("clusters", "start with '/'"),
    ("/clusters/", "not end with '/'"),
], ids=["doubled", "relative", "trailing-slash"])
def test_bad_prefixes_are_refused(prefix: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        keys.Keyspace(prefix)


def test_names_outside_the_prefix_are_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        keys.Keyspace("/a").name(b"/b/x")


@pytest.mark.parametrize(("prefix", "list_prefix", "start_after", "expected"), [
    ("", "/p/", None, (b"/p/", b"/p0")),
    ("", "/p/", "/p/05", (b"/p/05\x00", b"/p0")),
    ("", "/p/", "/a", (b"/p/", b"/p0")),
    ("", "/p/", "/q", (b"/q\x00", b"/p0")),
    ("", "", None, (b"\x00", b"\x00")),
    ("/c", "", None, (b"/c", b"/d")),
    ("", "/\U0010ffff", None, (b"/\xf4\x8f\xbf\xbf", b"/\xf4\x8f\xbf\xc0")),
], ids=["prefix", "start-after", "start-before", "start-beyond", "everything",
        "namespace", "max-code-point"])
def test_ranges(prefix: str, list_prefix: str, start_after: str | None,
                expected: tuple[bytes, bytes]) -> None:
    assert keys.Keyspace(prefix).range(list_prefix, start_after) == expected


@given(st.lists(st.text(min_size=1), min_size=2, max_size=10))
def test_etcd_byte_order_is_key_order(names: list[str]) -> None:
    space = keys.Keyspace("/c")
    assert sorted(names, key=space.key) == sorted(names)


@given(st.text(), st.text())
def test_ranges_hold_exactly_the_keys_under_the_prefix(prefix: str, key: str) -> None:
    space = keys.Keyspace("/c")
    start, end = space.range(prefix)
    raw = space.key(key)
    inside = start <= raw and (end == b"\x00" or raw < end)
    assert inside == key.startswith(prefix)


def test_revisions_are_etcds_minus_one() -> None:
    assert [keys.to_etcd_revision(r) for r in (0, 1, 41)] == [1, 2, 42]
    assert [keys.from_etcd_revision(r) for r in (0, 1, 2, 42)] == [0, 0, 1, 41]
    with pytest.raises(ValueError, match="negative"):
        keys.to_etcd_revision(-1)


@pytest.mark.parametrize(("endpoints", "target"), [
    (["http://127.0.0.1:2379"], "dns:///127.0.0.1:2379"),
    (["etcd.example:2379"], "dns:///etcd.example:2379"),
    (["http://etcd"], "dns:///etcd:2379"),
    (["http://[::1]:2379"], "dns:///[::1]:2379"),
    (["10.0.0.1:2379", "http://10.0.0.2:2379"], "ipv4:10.0.0.1:2379,10.0.0.2:2379"),
    (["[::1]:1", "http://[::2]:2"], "ipv6:[::1]:1,[::2]:2"),
    (["https://127.0.0.1:2379"], "dns:///127.0.0.1:2379"),
    (["https://10.0.0.1", "https://10.0.0.2:2381"], "ipv4:10.0.0.1:2379,10.0.0.2:2381"),
], ids=["url", "name", "default-port", "ipv6", "several", "several-ipv6", "tls",
        "several-tls"])
def test_endpoints_become_a_grpc_target(endpoints: list[str], target: str) -> None:
    assert wire.target(endpoints) == target


@pytest.mark.parametrize(("endpoints", "message"), [
    ([], "sequence"),
    ("http://127.0.0.1:2379", "sequence"),
    (["unix:///run/etcd.sock"], "only http:// and https://"),
    (["http://127.0.0.1:99999"], "invalid port"),
    (["http://a:1", "http://b:1"], "IP addresses"),
    (["10.0.0.1:1", "[::1]:1"], "all be IPv4"),
    (["http://127.0.0.1:2379/v3"], "host:port"),
], ids=["none", "string", "scheme", "port", "names", "mixed", "path"])
def test_bad_endpoints_are_refused(endpoints: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        wire.target(endpoints)


@dataclass
class _Code:
    name: str


@dataclass
class _RpcError:
    code_name: str
    text: str

    def code(self) -> _Code:
        return _Code(self.code_name)

    def details(self) -> str:
        return self.text


@pytest.mark.parametrize(("code", "details", "expected"), [
    ("OUT_OF_RANGE", "etcdserver: mvcc: required revision has been compacted",
     wire.Compacted),
    ("OUT_OF_RANGE", "etcdserver: mvcc: required revision is a future revision",
     wire.FutureRev),
    ("UNAVAILABLE", "failed to connect to all addresses", Unavailable),
    ("DEADLINE_EXCEEDED", "Deadline Exceeded", Unavailable),
    ("UNKNOWN", "etcdserver: no leader", Unavailable),
    ("RESOURCE_EXHAUSTED", "etcdserver: mvcc: database space exceeded", StorageError),
], ids=["compacted", "future", "unreachable", "timeout", "no-leader", "no-space"])
def test_grpc_errors_are_translated(code: str, details: str, expected: type) -> None:
    error = wire.translate(_RpcError(code, details), "range")
    assert type(error) is expected
    assert details in str(error) or expected in (wire.Compacted, wire.FutureRev)


def test_config_builds_an_unstarted_etcd_backend() -> None:
    config = StorageConfig(kind="etcd", endpoints=("http://127.0.0.1:1",), prefix="/c",
                           watch_buffer=5)

    backend = create_backend(config)

    assert isinstance(backend, EtcdBackend)
    assert backend.prefix == "/c"


def test_backend_options_are_checked_without_connecting() -> None:
    with pytest.raises(ValueError, match="watch_buffer"):
        EtcdBackend(["127.0.0.1:2379"], watch_buffer=0)
    with pytest.raises(ValueError, match="timeout"):
        EtcdBackend(["127.0.0.1:2379"], timeout=0)
    with pytest.raises(ValueError, match="registry"):
        create_backend(StorageConfig(kind="etcd", endpoints=("127.0.0.1:2379",),
                                     prefix="/registry"))
