"""SPDY/3.1 frames: every type round trips, fed in any pieces; malformed input is bounded."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from setpoint.server.streaming.spdy import frames
from setpoint.server.streaming.spdy import headers as hb

LIMITS = {"max_payload": 64 * 1024, "max_header_bytes": 4096, "max_header_pairs": 16}


def decoder() -> frames.Decoder:
    return frames.Decoder(**LIMITS)


def decode_all(dec: frames.Decoder, data: bytes) -> list[frames.Frame]:
    dec.feed(data)
    out = []
    while (frame := dec.next()) is not None:
        out.append(frame)
    return out


def test_every_frame_type_round_trips() -> None:
    deflater = hb.Deflater()
    wire = b"".join([
        frames.encode_syn_stream(deflater, 1, {"streamtype": "error"}, fin=True,
                                 associated_id=0, priority=3),
        frames.encode_syn_reply(deflater, 1, {"a": "b"}),
        frames.encode_headers(deflater, 1, {"x": "y"}, fin=True),
        frames.encode_rst_stream(3, frames.RstStatus.CANCEL),
        frames.encode_settings([(frames.SettingId.INITIAL_WINDOW_SIZE, 1 << 20),
                                (frames.SettingId.MAX_CONCURRENT_STREAMS, 100)]),
        frames.encode_ping(7),
        frames.encode_goaway(5, frames.GoAwayStatus.PROTOCOL_ERROR),
        frames.encode_window_update(1, 4096),
        frames.encode_window_update(0, 1),
        frames.encode_data(1, b"hello"),
        frames.encode_data(3, b"", fin=True),
    ])
    got = decode_all(decoder(), wire)
    assert got == [
        frames.SynStream(1, 0, 3, frames.FLAG_FIN, (("streamtype", "error"),)),
        frames.SynReply(1, 0, (("a", "b"),)),
        frames.HeadersFrame(1, frames.FLAG_FIN, (("x", "y"),)),
        frames.RstStream(3, frames.RstStatus.CANCEL),
        frames.Settings(0, ((0, 7, 1 << 20), (0, 4, 100))),
        frames.Ping(7),
        frames.GoAway(5, frames.GoAwayStatus.PROTOCOL_ERROR),
        frames.WindowUpdate(1, 4096),
        frames.WindowUpdate(0, 1),
        frames.Data(1, 0, b"hello"),
        frames.Data(3, frames.FLAG_FIN, b""),
    ]


def test_the_wire_format_is_spdy3() -> None:
    # control bit, version 3, type, flags, 24-bit length
    assert frames.encode_ping(1) == bytes.fromhex("80030006 00000004 00000001")
    assert frames.encode_rst_stream(1, 5) == bytes.fromhex("80030003 00000008 00000001 00000005")
    assert frames.encode_goaway(3) == bytes.fromhex("80030007 00000008 00000003 00000000")
    assert frames.encode_window_update(1, 10) == bytes.fromhex(
        "80030009 00000008 00000001 0000000a")
    assert frames.encode_data(5, b"ab", fin=True) == bytes.fromhex("00000005 01000002 6162")
    syn = frames.encode_syn_stream(hb.Deflater(), 1, {}, unidirectional=True, priority=7)
    assert syn[:4] == bytes.fromhex("80030001")
    assert syn[4] == frames.FLAG_UNIDIRECTIONAL
    assert syn[8:16] == bytes.fromhex("00000001 00000000")
    assert syn[16] == 7 << 5


def test_frames_fed_one_byte_at_a_time_come_out_whole() -> None:
    deflater = hb.Deflater()
    wire = (frames.encode_syn_stream(deflater, 1, {"k": "v"}) + frames.encode_data(1, b"x" * 300)
            + frames.encode_ping(1))
    dec = decoder()
    got: list[frames.Frame] = []
    for i in range(len(wire)):
        got += decode_all(dec, wire[i:i + 1])
    assert [type(f) for f in got] == [frames.SynStream, frames.Data, frames.Ping]
    assert dec.buffered == 0


def test_an_oversized_frame_is_refused_from_its_header_alone() -> None:
    dec = decoder()
    header = struct.pack(">IB", 1, 0) + (64 * 1024 + 1).to_bytes(3, "big")
    with pytest.raises(frames.ProtocolError, match="65537 bytes") as caught:
        decode_all(dec, header)  # the payload never has to arrive
    assert caught.value.stream_id == 0
    assert caught.value.status == frames.RstStatus.FRAME_TOO_LARGE
    with pytest.raises(frames.ProtocolError, match="already failed"):
        dec.feed(b"more")


def control(frame_type: int, payload: bytes, flags: int = 0, version: int = 3) -> bytes:
    return struct.pack(">HHB", 0x8000 | version, frame_type, flags) + \
        len(payload).to_bytes(3, "big") + payload


@pytest.mark.parametrize(("wire", "message"), [
    (control(6, b"\x00\x00\x00\x01", version=2), "SPDY version 2"),
    (control(1, b"\x00" * 9), "SYN_STREAM shorter"),
    (control(2, b"\x00" * 3), "SYN_REPLY shorter"),
    (control(8, b"\x00" * 3), "HEADERS shorter"),
    (control(3, b"\x00" * 7), "RST_STREAM of a length"),
    (control(3, struct.pack(">II", 0, 1)), "RST_STREAM for stream 0"),
    (control(4, b"\x00" * 3), "SETTINGS shorter"),
    (control(4, struct.pack(">I", 2) + b"\x00" * 8), "does not match its entry count"),
    (control(6, b"\x00" * 5), "PING of a length"),
    (control(7, b"\x00" * 4), "GOAWAY of a length"),
    (control(9, b"\x00" * 4), "WINDOW_UPDATE of a length"),
    (control(9, struct.pack(">II", 0, 0)), "session by 0"),
    (struct.pack(">IB", 0, 0) + b"\x00\x00\x01" + b"x", "data frame on stream 0"),
    (control(1, struct.pack(">II", 1, 0) + b"\x00\x00" + b"not zlib at all"),
     "does not decompress"),
], ids=["version", "syn-short", "reply-short", "headers-short", "rst-length", "rst-zero",
        "settings-short", "settings-count", "ping-length", "goaway-length", "window-length",
        "window-session-zero", "data-zero", "syn-garbage-headers"])
def test_connection_errors(wire: bytes, message: str) -> None:
    with pytest.raises(frames.ProtocolError, match=message) as caught:
        decode_all(decoder(), wire)
    assert caught.value.stream_id == 0


def test_stream_errors_leave_the_connection_usable() -> None:
    dec = decoder()
    with pytest.raises(frames.ProtocolError, match="WINDOW_UPDATE by 0") as caught:
        decode_all(dec, control(9, struct.pack(">II", 5, 0)))
    assert caught.value.stream_id == 5
    # a duplicate header name spoils one stream, not the connection's zlib stream
    z = zlib.compressobj(level=9, zdict=hb.DICTIONARY)

    def syn(stream_id: int, raw: bytes) -> bytes:
        block = z.compress(raw) + z.flush(zlib.Z_SYNC_FLUSH)
        return control(1, struct.pack(">II", stream_id, 0) + b"\x00\x00" + block)

    twice = struct.pack(">I", 2) + b"".join(
        struct.pack(">I", 1) + b"a" + struct.pack(">I", 1) + b"1" for _ in range(2))
    with pytest.raises(frames.ProtocolError, match="appears twice") as caught:
        decode_all(dec, syn(3, twice))
    assert caught.value.stream_id == 3
    got = decode_all(dec, syn(5, hb.serialize({"ok": "yes"})))
    assert got == [frames.SynStream(5, 0, 0, 0, (("ok", "yes"),))]


def test_unknown_and_unused_control_frames_are_skipped() -> None:
    wire = control(10, b"credential") + control(5, b"") + control(0x1234, b"future") + \
        frames.encode_ping(3)
    assert decode_all(decoder(), wire) == [frames.Ping(3)]


def test_reserved_bits_are_ignored() -> None:
    wire = control(9, struct.pack(">II", 0x80000001, 0x80000010))
    assert decode_all(decoder(), wire) == [frames.WindowUpdate(1, 16)]


def test_encoders_refuse_what_cannot_be_framed() -> None:
    with pytest.raises(ValueError, match="stream id"):
        frames.encode_data(0, b"")
    with pytest.raises(ValueError, match="window delta"):
        frames.encode_window_update(1, 0)
    with pytest.raises(ValueError, match="2\\^24-1"):
        frames.encode_data(1, b"x" * (1 << 24))


# --- properties ------------------------------------------------------------------------------

_headers = st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12),
                           st.text("abcdefghijklmnopqrstuvwxyz0123456789 /", max_size=40),
                           max_size=6)
_ids = st.integers(1, frames.MAX_STREAM_ID)


@st.composite
def frame_lists(draw: st.DrawFn) -> list[tuple[str, tuple[object, ...]]]:
    kinds = st.one_of(
        st.tuples(st.just("syn"), _ids, _headers, st.booleans()),
        st.tuples(st.just("reply"), _ids, _headers),
        st.tuples(st.just("headers"), _ids, _headers),
        st.tuples(st.just("rst"), _ids, st.integers(1, 11)),
        st.tuples(st.just("ping"), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("goaway"), st.integers(0, frames.MAX_STREAM_ID), st.integers(0, 2)),
        st.tuples(st.just("window"), st.integers(0, frames.MAX_STREAM_ID),
                  st.integers(1, frames.MAX_WINDOW)),
        st.tuples(st.just("data"), _ids, st.binary(max_size=300), st.booleans()),
    )
    return [(k[0], k[1:]) for k in draw(st.lists(kinds, max_size=12))]


def _encode(deflater: hb.Deflater, kind: str, args: tuple[object, ...]) -> bytes:
    a: tuple = args  # type: ignore[type-arg]
    if kind == "syn":
        return frames.encode_syn_stream(deflater, a[0], a[1], fin=a[2])
    if kind == "reply":
        return frames.encode_syn_reply(deflater, a[0], a[1])
    if kind == "headers":
        return frames.encode_headers(deflater, a[0], a[1])
    if kind == "rst":
        return frames.encode_rst_stream(a[0], a[1])
    if kind == "ping":
        return frames.encode_ping(a[0])
    if kind == "goaway":
        return frames.encode_goaway(a[0], a[1])
    if kind == "window":
        return frames.encode_window_update(a[0], a[1])
    return frames.encode_data(a[0], a[1], fin=a[2])


@given(frame_lists(), st.lists(st.integers(1, 64), min_size=1, max_size=20))
@settings(max_examples=200)
def test_any_frame_sequence_round_trips_in_any_pieces(
        items: list[tuple[str, tuple[object, ...]]], cuts: list[int]) -> None:
    deflater = hb.Deflater()
    wire = b"".join(_encode(deflater, kind, args) for kind, args in items)
    dec = decoder()
    got: list[frames.Frame] = []
    i = 0
    while i < len(wire):
        step = cuts[len(got) % len(cuts)]
        got += decode_all(dec, wire[i:i + step])
        i += step
    assert len(got) == len(items)
    for frame, (kind, args) in zip(got, items, strict=True):
        if kind in ("syn", "reply", "headers"):
            assert frame.stream_id == args[0]  # type: ignore[union-attr]
            assert dict(frame.headers) == args[1]  # type: ignore[union-attr]
        elif kind == "data":
            assert frame == frames.Data(args[0], frames.FLAG_FIN if args[2] else 0, args[1])


@given(st.binary(max_size=4096))
@settings(max_examples=500)
def test_garbage_raises_only_protocol_errors_and_stays_bounded(data: bytes) -> None:
    dec = decoder()
    try:
        dec.feed(data)
        while dec.next() is not None:
            pass
    except frames.ProtocolError:
        return
    # whatever is left is less than one frame
    assert dec.buffered < 8 + LIMITS["max_payload"]


@given(st.lists(st.binary(min_size=1, max_size=64), max_size=30))
def test_garbage_behind_valid_frames_raises_only_protocol_errors(chunks: list[bytes]) -> None:
    deflater = hb.Deflater()
    dec = decoder()
    dec.feed(frames.encode_syn_stream(deflater, 1, {"streamtype": "stdin"}))
    assert isinstance(dec.next(), frames.SynStream)
    try:
        for chunk in chunks:
            dec.feed(chunk)
            while dec.next() is not None:
                pass
    except frames.ProtocolError:
        pass


def test_settings_are_bounded() -> None:
    entries = [(frames.SettingId.ROUND_TRIP_TIME, i) for i in range(frames.MAX_SETTINGS + 1)]
    with pytest.raises(frames.ProtocolError, match="at most 64"):
        decode_all(decoder(), frames.encode_settings(entries))
    ok = decode_all(decoder(), frames.encode_settings(entries[:frames.MAX_SETTINGS]))
    assert len(ok[0].entries) == frames.MAX_SETTINGS  # type: ignore[union-attr]
