"""SPDY/3 header blocks: the dictionary, the name/value format, bounded inflation."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.server.streaming.spdy import headers as hb


def test_the_dictionary_is_the_spdy3_one() -> None:
    # length and Adler-32 of the dictionary Go's spdy package (and so spdystream, kubectl's
    # SPDY) compresses with: the zlib stream names it by this checksum
    assert len(hb.DICTIONARY) == 1423
    assert zlib.adler32(hb.DICTIONARY) == 0xE3C6A7C2
    assert hb.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert hb.DICTIONARY.endswith(b"utf-8charset=iso-8859-1,utf-,*,enq=0.")


def test_a_block_names_the_dictionary_in_its_zlib_header() -> None:
    block = hb.Deflater().block({"streamtype": "error"})
    cmf, flg = block[0], block[1]
    assert cmf & 0x0F == 8  # deflate
    assert flg & 0x20  # FDICT: a preset dictionary follows
    assert struct.unpack(">I", block[2:6])[0] == zlib.adler32(hb.DICTIONARY)


def test_blocks_round_trip_through_one_stream_per_direction() -> None:
    deflater = hb.Deflater()
    inflater = hb.Inflater(max_bytes=4096, max_pairs=16)
    sent = [
        {"streamtype": "error", "port": "8080", "requestid": "0"},
        {"streamtype": "data", "port": "8080", "requestid": "0"},
        {},
        {"x-multi": ["a", "b", "c"]},
    ]
    for headers in sent:
        got = inflater.block(deflater.block(headers))
        expected = tuple((k, "\0".join(v) if isinstance(v, list) else v)
                         for k, v in headers.items())
        assert got == expected
    assert hb.first(got, "x-multi") == "a"


def test_names_are_lowercased_and_repeated_names_merged() -> None:
    raw = hb.serialize([("StreamType", "stdin"), ("X-A", "1"), ("x-a", "2")])
    assert hb.parse(raw, max_pairs=8) == (("streamtype", "stdin"), ("x-a", "1\x002"))


@pytest.mark.parametrize(("raw", "message"), [
    (b"\x00\x00", "shorter than its pair count"),
    (struct.pack(">I", 100), "100 pairs"),
    (struct.pack(">II", 1, 5) + b"ab", "beyond the block"),
    (struct.pack(">I", 1) + struct.pack(">I", 0) + struct.pack(">I", 0), "empty name"),
    (hb.serialize({"a": "1"}) + b"x", "trailing bytes"),
    (struct.pack(">I", 2) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 0)
     + struct.pack(">I", 1) + b"A" + struct.pack(">I", 0), "appears twice"),
    (struct.pack(">I", 1) + struct.pack(">I", 1) + b"a", "ends inside a length"),
], ids=["short", "too-many-pairs", "length-overrun", "empty-name", "trailing", "duplicate",
        "truncated"])
def test_malformed_blocks_are_refused_for_their_stream_only(raw: bytes, message: str) -> None:
    with pytest.raises(hb.HeaderError, match=message) as caught:
        hb.parse(raw, max_pairs=8)
    assert not caught.value.fatal


def _compress(raw: bytes) -> bytes:
    z = zlib.compressobj(level=9, zdict=hb.DICTIONARY)
    return z.compress(raw) + z.flush(zlib.Z_SYNC_FLUSH)


def test_a_decompression_bomb_is_refused_after_max_bytes() -> None:
    # 10 MiB of header value in a few kilobytes of compressed block
    value = b"a" * (10 << 20)
    bomb = _compress(struct.pack(">II", 1, 1) + b"x" + struct.pack(">I", len(value)) + value)
    assert len(bomb) < 20_000
    inflater = hb.Inflater(max_bytes=16 * 1024, max_pairs=8)
    with pytest.raises(hb.HeaderError, match="larger than 16384 bytes") as caught:
        inflater.block(bomb)
    assert caught.value.fatal
    # the connection's zlib stream is no longer trusted: everything after is refused
    with pytest.raises(hb.HeaderError, match="failed earlier"):
        inflater.block(hb.Deflater().block({"a": "b"}))


def test_garbage_is_fatal() -> None:
    inflater = hb.Inflater(max_bytes=4096, max_pairs=8)
    with pytest.raises(hb.HeaderError, match="does not decompress") as caught:
        inflater.block(b"\x00garbage that is not zlib")
    assert caught.value.fatal


def test_a_block_compressed_with_another_dictionary_is_refused() -> None:
    z = zlib.compressobj(zdict=b"another dictionary")
    other = z.compress(hb.serialize({"a": "b"})) + z.flush(zlib.Z_SYNC_FLUSH)
    with pytest.raises(hb.HeaderError, match="does not decompress") as caught:
        hb.Inflater(max_bytes=4096, max_pairs=8).block(other)
    assert caught.value.fatal


def test_the_end_of_the_peers_zlib_stream_is_fatal() -> None:
    z = zlib.compressobj(zdict=hb.DICTIONARY)
    ended = z.compress(hb.serialize({"a": "b"})) + z.flush(zlib.Z_FINISH)
    with pytest.raises(hb.HeaderError, match="ended its header compression") as caught:
        hb.Inflater(max_bytes=4096, max_pairs=8).block(ended)
    assert caught.value.fatal


@given(st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.:", min_size=1,
                               max_size=20),
                       st.lists(st.text(st.characters(min_codepoint=1, max_codepoint=0xFF),
                                        max_size=30), min_size=1, max_size=3),
                       max_size=10))
def test_any_header_map_round_trips(headers: dict[str, list[str]]) -> None:
    inflater = hb.Inflater(max_bytes=1 << 20, max_pairs=64)
    got = dict(inflater.block(hb.Deflater().block(headers)))
    assert got == {k: "\0".join(v) for k, v in headers.items()}


@given(st.binary(max_size=2048))
def test_garbage_never_escapes_as_anything_but_a_header_error(data: bytes) -> None:
    inflater = hb.Inflater(max_bytes=4096, max_pairs=16)
    try:
        inflater.block(data)
    except hb.HeaderError:
        pass


@given(st.binary(max_size=4096))
def test_garbage_after_the_zlib_header_is_bounded(data: bytes) -> None:
    # valid start of a SPDY zlib stream, then anything
    start = hb.Deflater().block({"a": "b"})[:6]
    inflater = hb.Inflater(max_bytes=1024, max_pairs=16)
    try:
        inflater.block(start + data)
    except hb.HeaderError:
        pass
