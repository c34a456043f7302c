"""WebSocket channel framing (v1/v4/v5, binary and base64) and subprotocol negotiation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from setpoint.server.streaming import channels


@pytest.mark.parametrize(("protocol", "wire"), [
    (channels.V5, b"\x01hi\n"),
    (channels.V4, b"\x01hi\n"),
    (channels.V1, b"\x01hi\n"),
    (channels.V4_BASE64, "1aGkK"),
    (channels.V1_BASE64, "1aGkK"),
], ids=lambda p: getattr(p, "name", None) or "wire")
def test_stdout_on_each_protocol(protocol: channels.ChannelProtocol, wire: bytes | str) -> None:
    assert channels.encode(protocol, channels.STDOUT, b"hi\n") == wire
    assert channels.decode(protocol, wire) == channels.Message(channels.STDOUT, b"hi\n")


def test_a_base64_client_may_send_binary_messages() -> None:
    assert channels.decode(channels.V4_BASE64, b"0Zm9vCg==") == channels.Message(0, b"foo\n")


def test_v5_close_signal() -> None:
    assert channels.decode(channels.V5, b"\xff\x00") == channels.Message(0, b"", close=True)
    with pytest.raises(channels.ChannelError, match="two bytes"):
        channels.decode(channels.V5, b"\xff\x00\x00")
    # before v5, 255 is just a channel nobody reads
    assert channels.decode(channels.V4, b"\xff\x00") == channels.Message(255, b"\x00")


def test_empty_messages_are_nothing() -> None:
    assert channels.decode(channels.V5, b"") is None
    assert channels.decode(channels.V4_BASE64, "") is None
    assert channels.encode(channels.V5, channels.STDOUT, b"") == b"\x01"


def test_invalid_base64_is_a_channel_error() -> None:
    with pytest.raises(channels.ChannelError, match="invalid base64"):
        channels.decode(channels.V4_BASE64, "0***")
    with pytest.raises(channels.ChannelError, match="digit"):
        channels.decode(channels.V4_BASE64, "x" + "aGk=")


def test_status_and_close_by_protocol() -> None:
    assert [p.name for p in channels.REMOTE_COMMAND.values() if p.status_json] == [
        "v5.channel.k8s.io", "v4.channel.k8s.io", "v4.base64.channel.k8s.io"]
    assert [p.name for p in channels.REMOTE_COMMAND.values() if p.close_signal] == [
        "v5.channel.k8s.io"]
    assert set(channels.PORT_FORWARD) == {"v4.channel.k8s.io", "v4.base64.channel.k8s.io", ""}


@pytest.mark.parametrize(("header", "supported", "chosen"), [
    ("v5.channel.k8s.io", channels.REMOTE_COMMAND, "v5.channel.k8s.io"),
    # the client's order wins (the Python client offers v5 then v4)
    ("v5.channel.k8s.io,v4.channel.k8s.io", channels.REMOTE_COMMAND, "v5.channel.k8s.io"),
    ("v4.channel.k8s.io, v5.channel.k8s.io", channels.REMOTE_COMMAND, "v4.channel.k8s.io"),
    # the Python client's port-forward offers the exec protocols: v4 is the one served
    ("v5.channel.k8s.io,v4.channel.k8s.io", channels.PORT_FORWARD, "v4.channel.k8s.io"),
    (None, channels.REMOTE_COMMAND, ""),
    ("", channels.PORT_FORWARD, ""),
    ("v9.channel.k8s.io", channels.REMOTE_COMMAND, None),
    (None, (channels.SPDY_TUNNEL,), None),
    ("SPDY/3.1+portforward.k8s.io", (channels.SPDY_TUNNEL,), channels.SPDY_TUNNEL),
], ids=["v5", "order-v5", "order-v4", "pf-v4", "none", "pf-none", "unknown", "tunnel-none",
        "tunnel"])
def test_negotiation(header: str | None, supported: object, chosen: str | None) -> None:
    assert channels.negotiate(channels.offered(header), supported) == chosen  # type: ignore[arg-type]


def test_offers_are_bounded() -> None:
    assert len(channels.offered(",".join(["x"] * 10_000))) == channels.MAX_OFFERED


def test_port_prefix_is_little_endian() -> None:
    assert channels.port_prefix(8080) == b"\x90\x1f"
    assert channels.port_prefix(1) == b"\x01\x00"


@given(st.sampled_from(list(channels.REMOTE_COMMAND.values())), st.integers(0, 9),
       st.binary(max_size=200))
def test_what_is_encoded_decodes(protocol: channels.ChannelProtocol, channel: int,
                                 data: bytes) -> None:
    wire = channels.encode(protocol, channel, data)
    assert channels.decode(protocol, wire) == channels.Message(channel, data)


@given(st.sampled_from(list(channels.REMOTE_COMMAND.values())),
       st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_garbage_is_a_message_nothing_or_a_channel_error(protocol: channels.ChannelProtocol,
                                                         payload: bytes | str) -> None:
    try:
        message = channels.decode(protocol, payload)
    except channels.ChannelError:
        return
    assert message is None or 0 <= message.channel <= 255
