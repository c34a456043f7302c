"""port-forward: SPDY streams (plain and tunnelled in WebSocket) and WebSocket channels."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from setpoint.server import streaming
from setpoint.server.streaming.spdy import frames
from tests.integration.streaming import harness
from tests.integration.streaming.raw import RawSpdy

PORTFORWARD = f"/api/v1/namespaces/{harness.NAMESPACE}/pods/{harness.POD}/portforward"


def pair(client: RawSpdy, error_id: int, data_id: int, port: int, request: str | None) -> None:
    headers = {"port": str(port)} | ({"requestID": request} if request is not None else {})
    client.syn(error_id, headers | {"streamType": "error"}, fin=True)
    client.syn(data_id, headers | {"streamType": "data"})


async def test_spdy_pairs_carry_connections_with_half_closes(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    assert client.status == 101
    assert client.header("X-Stream-Protocol-Version") == ["portforward.k8s.io"]
    # two connections to the echo port at once, with request ids, and one to the HTTP port
    pair(client, 1, 3, 7, "0")
    pair(client, 5, 7, 7, "1")
    pair(client, 9, 11, 8080, "2")
    client.send(frames.encode_data(3, b"first " * 1000), frames.encode_data(3, b"", fin=True))
    client.send(frames.encode_data(7, b"second", fin=True))
    client.send(frames.encode_data(11, b"GET /x HTTP/1.0\r\n\r\n"))  # it closes after
    # the client's FIN closes the pod connection's write side; the echo server then ends,
    # which ends the data stream; the error streams end empty
    await client.until_fin(1, 3, 5, 7, 9, 11)
    assert bytes(client.data[3]) == b"first " * 1000
    assert bytes(client.data[7]) == b"second"
    assert bytes(client.data[11]).endswith(b"hello from the pod: GET /x 0 bytes")
    assert client.data[1] == client.data[5] == client.data[9] == b""
    await client.close()


async def test_clients_without_request_ids_pair_by_stream_id(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    pair(client, 1, 3, 7, None)
    client.send(frames.encode_data(3, b"old client", fin=True))
    await client.until_fin(1, 3)
    assert bytes(client.data[3]) == b"old client"
    await client.close()


async def test_a_refused_connection_is_reported_on_the_error_stream(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    pair(client, 1, 3, 9, "0")
    await client.until_fin(1, 3)
    assert bytes(client.data[1]) == (
        b"error forwarding port 9 to pod: nothing listens on port 9")
    await client.close()


async def test_invalid_streams_are_refused(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    client.syn(1, {"streamType": "data"})  # no port
    client.syn(3, {"streamType": "data", "port": "0"})
    client.syn(5, {"streamType": "data", "port": "65536"})
    client.syn(7, {"streamType": "exec", "port": "7"})
    client.syn(9, {"streamType": "data", "port": "7", "requestID": "a"})
    client.syn(11, {"streamType": "data", "port": "7", "requestID": "a"})  # twice
    client.syn(13, {"streamType": "error", "port": "8080", "requestID": "a"})  # other port
    while len(client.others) < 7:
        await client.pump()
    assert [f for f in client.others if isinstance(f, frames.RstStream)] == [
        frames.RstStream(i, frames.RstStatus.REFUSED_STREAM) for i in (1, 3, 5, 7, 11, 13)]
    await client.close()


@pytest.mark.parametrize("config", [streaming.StreamingConfig(stream_creation_timeout=0.2)])
async def test_an_incomplete_pair_times_out(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    client.syn(1, {"streamType": "error", "port": "7", "requestID": "0"}, fin=True)
    await client.until_fin(1)
    assert bytes(client.data[1]) == b"timed out waiting for streams"
    # the connection stays open for other requests
    pair(client, 3, 5, 7, "1")
    client.send(frames.encode_data(5, b"later", fin=True))
    await client.until_fin(3, 5)
    assert bytes(client.data[5]) == b"later"
    await client.close()


@pytest.mark.parametrize("config", [streaming.StreamingConfig(max_streams=4)])
async def test_streams_beyond_the_limit_are_refused(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    for i in range(3):
        client.syn(4 * i + 1, {"streamType": "error", "port": "7", "requestID": str(i)})
        client.syn(4 * i + 3, {"streamType": "data", "port": "7", "requestID": str(i)})
    while len(client.others) < 6:
        await client.pump()
    assert client.others[4:] == [frames.RstStream(9, frames.RstStatus.REFUSED_STREAM),
                                 frames.RstStream(11, frames.RstStatus.REFUSED_STREAM)]
    await client.close()


async def test_a_reset_data_stream_ends_the_pod_connection(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, PORTFORWARD, ("portforward.k8s.io",))
    pair(client, 1, 3, 7, "0")
    client.send(frames.encode_data(3, b"ping"))
    while bytes(client.data[3]) != b"ping":
        await client.pump()
    client.send(frames.encode_rst_stream(3, frames.RstStatus.CANCEL))
    await client.until_fin(1)  # the pair is over: its error stream ends
    await client.close()


async def test_the_spdy_tunnel_in_websocket_messages(app: harness.App) -> None:
    from setpoint.server.streaming.spdy import headers as hb

    deflater = hb.Deflater()
    decoder = frames.Decoder(max_payload=1 << 20, max_header_bytes=4096, max_header_pairs=16)
    async with aiohttp.ClientSession() as session, session.ws_connect(
            app.url + PORTFORWARD, protocols=("SPDY/3.1+portforward.k8s.io",)) as ws:
        assert ws.protocol == "SPDY/3.1+portforward.k8s.io"
        headers = {"port": "7", "requestid": "0"}
        await ws.send_bytes(frames.encode_syn_stream(deflater, 1, headers | {
            "streamtype": "error"}, fin=True))
        await ws.send_bytes(frames.encode_syn_stream(deflater, 3, headers | {
            "streamtype": "data"}))
        await ws.send_bytes(frames.encode_ping(1))
        await ws.send_bytes(frames.encode_data(3, b"through the tunnel", fin=True))
        got: dict[int, bytes] = {}
        ended: set[int] = set()
        seen: list[frames.Frame] = []
        while ended != {1, 3}:
            decoder.feed(await ws.receive_bytes())
            while (frame := decoder.next()) is not None:
                seen.append(frame)
                if isinstance(frame, frames.Data):
                    got[frame.stream_id] = got.get(frame.stream_id, b"") + frame.data
                    if frame.flags & frames.FLAG_FIN:
                        ended.add(frame.stream_id)
        assert got[3] == b"through the tunnel"
        assert frames.Ping(1) in seen


async def test_websocket_channels(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session, session.ws_connect(
            app.url + PORTFORWARD + "?ports=7,9", protocols=("v4.channel.k8s.io",)) as ws:
        opening = [await ws.receive_bytes() for _ in range(4)]
        assert opening == [b"\x00\x07\x00", b"\x01\x07\x00", b"\x02\x09\x00", b"\x03\x09\x00"]
        # port 9 refuses: its error channel says so
        assert await ws.receive_bytes() == (
            b"\x03error forwarding port 9 to pod: nothing listens on port 9")
        await ws.send_bytes(b"\x00echo me")
        assert await ws.receive_bytes() == b"\x00echo me"


async def test_websocket_channels_report_a_pod_end_that_fails_later(app: harness.App) -> None:
    # The node agent's port-forward opens, then says it could not connect: that port's error
    # channel carries it (the kubernetes client closes that port's socket when it does) while
    # the other ports go on.
    async with aiohttp.ClientSession() as session, session.ws_connect(
            app.url + PORTFORWARD + f"?ports=7,{harness.LATE_REFUSAL}",
            protocols=("v4.channel.k8s.io",)) as ws:
        opening = [await ws.receive_bytes() for _ in range(4)]
        assert opening == [b"\x00\x07\x00", b"\x01\x07\x00", b"\x02\x0d\x00", b"\x03\x0d\x00"]
        assert await ws.receive_bytes() == (
            b"\x03error forwarding port 13 to pod: nothing listens on port 13")
        await ws.send_bytes(b"\x00still here")
        assert await ws.receive_bytes() == b"\x00still here"


async def test_websocket_channels_close_once_every_port_is_done(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session, session.ws_connect(
            app.url + PORTFORWARD + "?ports=8080", protocols=("v4.base64.channel.k8s.io",)) as ws:
        assert [await ws.receive_str() for _ in range(2)] == ["0kB8=", "1kB8="]
        import base64
        await ws.send_str("0" + base64.b64encode(b"GET /b64 HTTP/1.0\r\n\r\n").decode())
        body = b""
        async for msg in ws:
            body += base64.b64decode(msg.data[1:])
        assert body.endswith(b"hello from the pod: GET /b64 0 bytes")


async def test_websocket_channels_need_ports(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(app.url + PORTFORWARD, protocols=("v4.channel.k8s.io",))
        assert caught.value.status == 400
        async with session.get(app.url + PORTFORWARD + "?ports=http") as response:
            assert response.status == 400
            assert (await response.json())["message"] == 'unable to parse "http" as a port'


async def test_the_client_going_away_closes_pod_connections(app: harness.App,
                                                            echo_port: int) -> None:
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(app.url + PORTFORWARD + "?ports=7",
                                      protocols=("v4.channel.k8s.io",))
        for _ in range(2):
            await ws.receive_bytes()
        await ws.send_bytes(b"\x00hello")
        assert await ws.receive_bytes() == b"\x00hello"
        await ws.close()
    # the echo server's connection was closed: a new request is served by the same server
    reader, writer = await asyncio.open_connection("127.0.0.1", echo_port)
    writer.write(b"still up")
    assert await reader.read(100) == b"still up"
    writer.close()
    await writer.wait_closed()
