"""The WebSocket channel protocols of exec, attach and port-forward: names and framing.

Every message starts with its channel: one byte (``channel.k8s.io`` and its versions), or one
ASCII digit followed by the payload in base64 (``base64.channel.k8s.io`` variants, text
messages). For exec and attach the channels are 0 stdin, 1 stdout, 2 stderr, 3 error (the
outcome) and 4 resize (terminal sizes as JSON); ``v5.channel.k8s.io`` adds the message
``[255, channel]``, which half-closes a channel (the client's end of stdin). Port-forward
uses two channels per requested port: data ``2i`` and error ``2i+1``, each opened by the
server with the port as two little-endian bytes.

The subprotocols served, first match in the client's order wins (as Kubernetes negotiates):

===========================  ==========  ================================  ==========
subprotocol                  framing     error channel                     close
===========================  ==========  ================================  ==========
``v5.channel.k8s.io``        binary      ``metav1.Status`` JSON, always    yes
``v4.channel.k8s.io``        binary      ``metav1.Status`` JSON, always    no
``v4.base64.channel.k8s.io`` base64      ``metav1.Status`` JSON, always    no
``channel.k8s.io``           binary      the message of a failure only     no
``base64.channel.k8s.io``    base64      the message of a failure only     no
(none offered)               binary      the message of a failure only     no
===========================  ==========  ================================  ==========

Port-forward over channels speaks ``v4.channel.k8s.io``, ``v4.base64.channel.k8s.io`` or no
subprotocol; kubectl's SPDY tunnel is ``SPDY/3.1+portforward.k8s.io`` (see
:mod:`.portforward`).

Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection, Sequence
from dataclasses import dataclass

STDIN = 0
STDOUT = 1
STDERR = 2
ERROR = 3
RESIZE = 4
CLOSE = 255

#: how many subprotocols a client may offer in its header
MAX_OFFERED = 32


@dataclass(frozen=True, slots=True)
class ChannelProtocol:
    name: str
    base64: bool = False
    #: the error channel carries a Status (v4+) rather than a failure's text
    status_json: bool = False
    #: ``[255, channel]`` half-closes a channel (v5)
    close_signal: bool = False


V5 = ChannelProtocol("v5.channel.k8s.io", status_json=True, close_signal=True)
V4 = ChannelProtocol("v4.channel.k8s.io", status_json=True)
V4_BASE64 = ChannelProtocol("v4.base64.channel.k8s.io", base64=True, status_json=True)
V1 = ChannelProtocol("channel.k8s.io")
V1_BASE64 = ChannelProtocol("base64.channel.k8s.io", base64=True)
UNNAMED = ChannelProtocol("")

REMOTE_COMMAND = {p.name: p for p in (V5, V4, V4_BASE64, V1, V1_BASE64, UNNAMED)}
PORT_FORWARD = {p.name: p for p in (V4, V4_BASE64, UNNAMED)}
#: kubectl ≥ 1.31 port-forward: SPDY/3.1 in binary messages
SPDY_TUNNEL = "SPDY/3.1+portforward.k8s.io"


class ChannelError(Exception):
    """A message that does not follow the negotiated framing."""


def offered(header: str | None) -> list[str]:
    """The subprotocols of a ``Sec-WebSocket-Protocol`` header, in the client's order."""
    if not header:
        return []
    names = [p.strip() for p in header.split(",")]
    return [n for n in names if n][:MAX_OFFERED]


def negotiate(offers: Sequence[str], supported: Collection[str]) -> str | None:
    """The first offer the server supports; ``""`` for a client that offered none (when
    an unnamed protocol is supported); ``None`` when nothing matches."""
    if not offers:
        return "" if "" in supported else None
    for name in offers:
        if name in supported and name:
            return name
    return None


@dataclass(frozen=True, slots=True)
class Message:
    channel: int
    data: bytes
    #: a v5 close signal for ``channel`` (no data)
    close: bool = False


def encode(protocol: ChannelProtocol, channel: int, data: bytes) -> bytes | str:
    """One message: bytes for binary framing, text for base64."""
    if not 0 <= channel < CLOSE:
        raise ValueError(f"channel {channel} out of range")
    if protocol.base64:
        if channel > 9:
            raise ValueError("base64 framing numbers channels with one digit")
        return chr(ord("0") + channel) + base64.b64encode(data).decode("ascii")
    return bytes((channel,)) + data


def decode(protocol: ChannelProtocol, payload: bytes | str) -> Message | None:
    """The channel and data of a client's message; ``None`` for an empty message."""
    raw = payload.encode("latin-1", "replace") if isinstance(payload, str) else bytes(payload)
    if not raw:
        return None
    channel = raw[0]
    if protocol.close_signal and channel == CLOSE:
        if len(raw) != 2:
            raise ChannelError("a close signal is two bytes: 255 and the channel")
        return Message(raw[1], b"", close=True)
    if protocol.base64:
        channel -= ord("0")
        if not 0 <= channel <= 9:
            raise ChannelError("base64 framing starts with the channel's digit")
        try:
            data = base64.b64decode(raw[1:], validate=True)
        except (binascii.Error, ValueError) as e:
            raise ChannelError(f"invalid base64 on channel {channel}: {e}") from e
        return Message(channel, data)
    return Message(channel, raw[1:])


def port_prefix(port: int) -> bytes:
    """What opens each port-forward channel: the port, 16-bit little-endian."""
    return int(port).to_bytes(2, "little")
