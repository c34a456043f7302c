"""SPDY/3.1 frames: encoding, and an incremental decoder that bounds everything it reads.

Wire format (all integers big-endian)::

    control frame:  1 | version:15 | type:16 | flags:8 | length:24 | payload
    data frame:     0 | stream-id:31          | flags:8 | length:24 | payload

Control frame types used here: SYN_STREAM (1), SYN_REPLY (2), RST_STREAM (3), SETTINGS (4),
PING (6), GOAWAY (7), HEADERS (8), WINDOW_UPDATE (9). Header blocks (SYN_STREAM, SYN_REPLY,
HEADERS) are compressed with the connection's zlib stream (:mod:`.headers`), so they are
decoded in order, even for frames that are otherwise ignored.

Invariants of :class:`Decoder`:

* it buffers at most one frame beyond what it was fed: the 24-bit length is checked against
  ``max_payload`` as soon as the 8-byte frame header is complete, before the payload arrives;
* every malformed frame raises :class:`ProtocolError`: with ``stream_id`` set when only that
  stream is affected (answer RST_STREAM), without it when the connection is (answer GOAWAY
  and close); after a connection error the decoder refuses further input;
* control frames of unknown type (and the unused CREDENTIAL and NOOP) are skipped, as the
  specification requires, after their length was checked; a SETTINGS frame holds at most
  ``MAX_SETTINGS`` entries.

Pure: no I/O, no clocks.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from setpoint.server.streaming.spdy import headers as hb

VERSION = 3
MAX_LENGTH = (1 << 24) - 1
MAX_STREAM_ID = (1 << 31) - 1
MAX_WINDOW = (1 << 31) - 1
#: a stream's window until SETTINGS says otherwise
DEFAULT_WINDOW = 64 * 1024
#: SPDY/3 defines 8 settings; a SETTINGS frame with more entries than this is refused
MAX_SETTINGS = 64

FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
FLAG_CLEAR_SETTINGS = 0x01


class FrameType(enum.IntEnum):
    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    NOOP = 5
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9
    CREDENTIAL = 10


class RstStatus(enum.IntEnum):
    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    UNSUPPORTED_VERSION = 4
    CANCEL = 5
    INTERNAL_ERROR = 6
    FLOW_CONTROL_ERROR = 7
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9
    INVALID_CREDENTIALS = 10
    FRAME_TOO_LARGE = 11


class GoAwayStatus(enum.IntEnum):
    OK = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


class SettingId(enum.IntEnum):
    UPLOAD_BANDWIDTH = 1
    DOWNLOAD_BANDWIDTH = 2
    ROUND_TRIP_TIME = 3
    MAX_CONCURRENT_STREAMS = 4
    CURRENT_CWND = 5
    DOWNLOAD_RETRANS_RATE = 6
    INITIAL_WINDOW_SIZE = 7
    CLIENT_CERTIFICATE_VECTOR_SIZE = 8


class ProtocolError(Exception):
    """A frame the peer should not have sent.

    ``stream_id`` 0: the connection is unusable (GOAWAY, close). Otherwise only that stream
    is (RST_STREAM with ``status``).
    """

    def __init__(self, message: str, *, stream_id: int = 0,
                 status: RstStatus = RstStatus.PROTOCOL_ERROR) -> None:
        super().__init__(message)
        self.stream_id = stream_id
        self.status = status


@dataclass(frozen=True, slots=True)
class SynStream:
    stream_id: int
    associated_id: int
    priority: int
    flags: int
    headers: hb.Headers


@dataclass(frozen=True, slots=True)
class SynReply:
    stream_id: int
    flags: int
    headers: hb.Headers


@dataclass(frozen=True, slots=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class Settings:
    flags: int
    #: (flags, id, value) per entry
    entries: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class Ping:
    ping_id: int


@dataclass(frozen=True, slots=True)
class GoAway:
    last_good_stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class HeadersFrame:
    stream_id: int
    flags: int
    headers: hb.Headers


@dataclass(frozen=True, slots=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True, slots=True)
class Data:
    stream_id: int
    flags: int
    data: bytes


Frame = (SynStream | SynReply | RstStream | Settings | Ping | GoAway | HeadersFrame
         | WindowUpdate | Data)

_HEAD = struct.Struct(">IB3s")
_CONTROL = struct.Struct(">HHB3s")
_U32 = struct.Struct(">I")
_U32x2 = struct.Struct(">II")


# --- encoding --------------------------------------------------------------------------------


def _control(frame_type: FrameType, flags: int, payload: bytes) -> bytes:
    if len(payload) > MAX_LENGTH:
        raise ValueError("control frame payload longer than 2^24-1 bytes")
    return _CONTROL.pack(0x8000 | VERSION, frame_type, flags,
                         len(payload).to_bytes(3, "big")) + payload


def _check_stream(stream_id: int) -> None:
    if not 0 < stream_id <= MAX_STREAM_ID:
        raise ValueError(f"stream id {stream_id} out of range")


HeaderInput = Mapping[str, str | Sequence[str]] | Iterable[tuple[str, str]]


def encode_syn_stream(deflater: hb.Deflater, stream_id: int, headers: HeaderInput, *,
                      fin: bool = False, unidirectional: bool = False,
                      associated_id: int = 0, priority: int = 0) -> bytes:
    _check_stream(stream_id)
    flags = (FLAG_FIN if fin else 0) | (FLAG_UNIDIRECTIONAL if unidirectional else 0)
    payload = (_U32x2.pack(stream_id, associated_id & MAX_STREAM_ID)
               + bytes([(priority & 0x7) << 5, 0]) + deflater.block(headers))
    return _control(FrameType.SYN_STREAM, flags, payload)


def encode_syn_reply(deflater: hb.Deflater, stream_id: int, headers: HeaderInput = (), *,
                     fin: bool = False) -> bytes:
    _check_stream(stream_id)
    return _control(FrameType.SYN_REPLY, FLAG_FIN if fin else 0,
                    _U32.pack(stream_id) + deflater.block(headers))


def encode_headers(deflater: hb.Deflater, stream_id: int, headers: HeaderInput, *,
                   fin: bool = False) -> bytes:
    _check_stream(stream_id)
    return _control(FrameType.HEADERS, FLAG_FIN if fin else 0,
                    _U32.pack(stream_id) + deflater.block(headers))


def encode_rst_stream(stream_id: int, status: int) -> bytes:
    _check_stream(stream_id)
    return _control(FrameType.RST_STREAM, 0, _U32x2.pack(stream_id, status))


def encode_settings(entries: Iterable[tuple[int, int]], *, clear: bool = False) -> bytes:
    """``entries``: (id, value) pairs."""
    items = list(entries)
    payload = _U32.pack(len(items)) + b"".join(
        _U32x2.pack(setting & 0xFFFFFF, value) for setting, value in items)
    return _control(FrameType.SETTINGS, FLAG_CLEAR_SETTINGS if clear else 0, payload)


def encode_ping(ping_id: int) -> bytes:
    return _control(FrameType.PING, 0, _U32.pack(ping_id))


def encode_goaway(last_good_stream_id: int, status: int = GoAwayStatus.OK) -> bytes:
    return _control(FrameType.GOAWAY, 0,
                    _U32x2.pack(last_good_stream_id & MAX_STREAM_ID, status))


def encode_window_update(stream_id: int, delta: int) -> bytes:
    if not 0 < delta <= MAX_WINDOW:
        raise ValueError(f"window delta {delta} out of range")
    return _control(FrameType.WINDOW_UPDATE, 0, _U32x2.pack(stream_id, delta))


def encode_data(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
    _check_stream(stream_id)
    if len(data) > MAX_LENGTH:
        raise ValueError("data frame payload longer than 2^24-1 bytes")
    return _HEAD.pack(stream_id, FLAG_FIN if fin else 0, len(data).to_bytes(3, "big")) + data


# --- decoding --------------------------------------------------------------------------------


class Decoder:
    """Turns the peer's bytes into frames, one frame at a time.

    ``feed`` bytes as they arrive, then call ``next`` until it returns ``None``.
    """

    def __init__(self, *, max_payload: int, max_header_bytes: int,
                 max_header_pairs: int) -> None:
        if not 8 <= max_payload <= MAX_LENGTH:
            raise ValueError("max_payload must be between 8 and 2^24-1")
        self._buffer = bytearray()
        self._max_payload = max_payload
        self._inflater = hb.Inflater(max_bytes=max_header_bytes, max_pairs=max_header_pairs)
        self._failed = False

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        if self._failed:
            raise ProtocolError("the connection already failed")
        self._buffer += data

    def next(self) -> Frame | None:
        """The next complete frame, or ``None`` until more bytes arrive."""
        if self._failed:
            raise ProtocolError("the connection already failed")
        try:
            while True:
                if len(self._buffer) < 8:
                    return None
                first_word, flags, raw_length = _HEAD.unpack_from(self._buffer, 0)
                length = int.from_bytes(raw_length, "big")
                if length > self._max_payload:
                    # skipping it would mean reading (and discarding) up to 16 MiB: the
                    # connection ends instead
                    raise ProtocolError(
                        f"frame of {length} bytes (at most {self._max_payload})",
                        status=RstStatus.FRAME_TOO_LARGE)
                if len(self._buffer) < 8 + length:
                    return None
                payload = bytes(self._buffer[8:8 + length])
                del self._buffer[:8 + length]
                if first_word & 0x80000000:
                    frame = self._control(first_word, flags, payload)
                    if frame is None:
                        continue
                    return frame
                stream_id = first_word & MAX_STREAM_ID
                if stream_id == 0:
                    raise ProtocolError("data frame on stream 0")
                return Data(stream_id, flags, payload)
        except ProtocolError as e:
            if e.stream_id == 0:
                self._failed = True
                self._buffer.clear()
            raise

    def _control(self, first_word: int, flags: int, payload: bytes) -> Frame | None:
        version = (first_word >> 16) & 0x7FFF
        frame_type = first_word & 0xFFFF
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} (only {VERSION} is spoken)")
        length = len(payload)
        if frame_type == FrameType.SYN_STREAM:
            if length < 10:
                raise ProtocolError("SYN_STREAM shorter than 10 bytes")
            stream_id, associated = _U32x2.unpack_from(payload, 0)
            stream_id &= MAX_STREAM_ID
            headers = self._headers(payload[10:], stream_id)
            if stream_id == 0:
                raise ProtocolError("SYN_STREAM for stream 0")
            return SynStream(stream_id, associated & MAX_STREAM_ID, payload[8] >> 5, flags,
                             headers)
        if frame_type in (FrameType.SYN_REPLY, FrameType.HEADERS):
            if length < 4:
                raise ProtocolError(f"{FrameType(frame_type).name} shorter than 4 bytes")
            (stream_id,) = _U32.unpack_from(payload, 0)
            stream_id &= MAX_STREAM_ID
            headers = self._headers(payload[4:], stream_id)
            if stream_id == 0:
                raise ProtocolError(f"{FrameType(frame_type).name} for stream 0")
            if frame_type == FrameType.SYN_REPLY:
                return SynReply(stream_id, flags, headers)
            return HeadersFrame(stream_id, flags, headers)
        if frame_type == FrameType.RST_STREAM:
            if length != 8:
                raise ProtocolError("RST_STREAM of a length other than 8")
            stream_id, status = _U32x2.unpack(payload)
            if stream_id & MAX_STREAM_ID == 0:
                raise ProtocolError("RST_STREAM for stream 0")
            return RstStream(stream_id & MAX_STREAM_ID, status)
        if frame_type == FrameType.SETTINGS:
            if length < 4:
                raise ProtocolError("SETTINGS shorter than 4 bytes")
            (count,) = _U32.unpack_from(payload, 0)
            if length != 4 + 8 * count:
                raise ProtocolError("SETTINGS length does not match its entry count")
            if count > MAX_SETTINGS:
                raise ProtocolError(f"SETTINGS with {count} entries (at most {MAX_SETTINGS})")
            entries = tuple(
                (word >> 24, word & 0xFFFFFF, value)
                for word, value in (_U32x2.unpack_from(payload, 4 + 8 * i)
                                    for i in range(count)))
            return Settings(flags, entries)
        if frame_type == FrameType.PING:
            if length != 4:
                raise ProtocolError("PING of a length other than 4")
            return Ping(_U32.unpack(payload)[0])
        if frame_type == FrameType.GOAWAY:
            if length != 8:
                raise ProtocolError("GOAWAY of a length other than 8")
            last, status = _U32x2.unpack(payload)
            return GoAway(last & MAX_STREAM_ID, status)
        if frame_type == FrameType.WINDOW_UPDATE:
            if length != 8:
                raise ProtocolError("WINDOW_UPDATE of a length other than 8")
            stream_id, delta = _U32x2.unpack(payload)
            stream_id &= MAX_STREAM_ID
            delta &= MAX_WINDOW
            if delta == 0:
                if stream_id == 0:
                    raise ProtocolError("WINDOW_UPDATE of the session by 0")
                raise ProtocolError("WINDOW_UPDATE by 0", stream_id=stream_id)
            return WindowUpdate(stream_id, delta)
        return None  # NOOP, CREDENTIAL and unknown types are ignored

    def _headers(self, block: bytes, stream_id: int) -> hb.Headers:
        try:
            return self._inflater.block(block)
        except hb.HeaderError as e:
            if e.fatal or stream_id == 0:
                raise ProtocolError(str(e)) from e
            raise ProtocolError(str(e), stream_id=stream_id) from e
