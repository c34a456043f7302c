"""exec and attach over both transports, including what real clients never send."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import aiohttp
import orjson
import pytest

from setpoint.server import streaming
from setpoint.server.streaming.spdy import frames
from tests.integration.streaming import harness
from tests.integration.streaming.raw import RawSpdy

EXEC = f"/api/v1/namespaces/{harness.NAMESPACE}/pods/{harness.POD}/exec"


def query(*command: str, **flags: str) -> str:
    parts = [f"command={aiohttp.helpers.quote(c, safe='')}" for c in command]
    parts += [f"{k}={v}" for k, v in flags.items()]
    return "?" + "&".join(parts)


async def ws_exec(app: harness.App, path: str, protocols: tuple[str, ...],
                  stdin: bytes | None = None) -> tuple[dict[int, bytes], list[object], int]:
    """Run one exec over a WebSocket: output per channel, messages as received, close code."""
    out: dict[int, bytes] = {}
    messages: list[object] = []
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(app.url + path, protocols=protocols) as ws:
        if stdin is not None:
            await ws.send_bytes(b"\x00" + stdin)
            await ws.send_bytes(b"\xff\x00")
        async for msg in ws:
            messages.append(msg.data)
            raw = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
            out[raw[0]] = out.get(raw[0], b"") + raw[1:]
        assert ws.close_code is not None
        return out, messages, ws.close_code


async def test_v5_exec_with_stdin_close_and_exit_code(app: harness.App) -> None:
    out, messages, code = await ws_exec(
        app, EXEC + query("sh", "-c", "tr a-z A-Z; echo oops >&2; exit 4", stdin="true"),
        ("v5.channel.k8s.io",), stdin=b"hello\n")
    assert code == 1000
    assert messages[0] == b"\x01"  # the empty message that says the streams are there
    assert out[1] == b"HELLO\n"
    assert out[2] == b"oops\n"
    status = orjson.loads(out[3])
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "4"}]


async def test_v4_base64_exec(app: harness.App) -> None:
    _, messages, _ = await ws_exec(app, EXEC + query("echo", "hi"),
                                   ("v4.base64.channel.k8s.io",))
    assert all(isinstance(m, str) for m in messages)
    assert messages[-2:] == ["1aGkK", "3" + base64.b64encode(
        b'{"metadata":{},"status":"Success"}').decode()]


async def test_v1_sends_only_a_failures_text(app: harness.App) -> None:
    out, _, _ = await ws_exec(app, EXEC + query("sh", "-c", "exit 3"), ())  # no subprotocol
    assert out[3].startswith(b"command terminated with non-zero exit code")
    out, _, _ = await ws_exec(app, EXEC + query("true"), ("channel.k8s.io",))
    assert 3 not in out


async def test_an_unsupported_subprotocol_is_refused_before_the_upgrade(
        app: harness.App) -> None:
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await session.ws_connect(app.url + EXEC + query("true"),
                                     protocols=("v9.channel.k8s.io",))
        assert caught.value.status == 400
        # and that is what kubectl falls back to SPDY on
    assert app.target.sessions == []


async def test_a_failing_start_is_the_status(app: harness.App) -> None:
    out, _, _ = await ws_exec(app, EXEC + query("true", container="other"),
                              ("v5.channel.k8s.io",))
    status = orjson.loads(out[3])
    assert status["code"] == 400
    assert status["message"] == "container other is not valid for pod web"
    out, _, _ = await ws_exec(app, EXEC + query("/no/such/command"), ("v5.channel.k8s.io",))
    status = orjson.loads(out[3])
    assert status["code"] == 500
    assert status["message"].startswith(
        "Internal error occurred: error executing command in container:")


async def test_the_client_going_away_ends_the_command(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(app.url + EXEC + query("sh", "-c", "echo up; sleep 600"),
                                      protocols=("v5.channel.k8s.io",))
        while (await ws.receive_bytes()) != b"\x01up\n":
            pass
        await ws.close()
    process = app.target.sessions[0].process
    assert await process.wait() == -9


@pytest.mark.parametrize("config", [streaming.StreamingConfig(write_timeout=0.2)])
async def test_a_client_that_does_not_read_is_cut_off(app: harness.App) -> None:
    # ``yes`` writes forever; the client reads nothing: the server's buffers stay bounded
    # (the command blocks on its pipe) until the write timeout ends the connection
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(app.url + EXEC + query("yes"),
                                      protocols=("v5.channel.k8s.io",))
        await app.target.started.wait()
        process = app.target.sessions[0].process
        assert await process.wait() == -9
        await ws.close()


@pytest.mark.parametrize("config", [streaming.StreamingConfig(idle_timeout=0.2)])
async def test_an_idle_connection_is_closed(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(app.url + EXEC + query("sleep", "600"),
                               protocols=("v5.channel.k8s.io",)) as ws:
        async for _ in ws:
            pass
        assert ws.close_code is not None
    assert await app.target.sessions[0].process.wait() == -9


@pytest.mark.parametrize("config", [streaming.StreamingConfig(max_message_bytes=1024)])
async def test_an_oversized_message_closes_the_connection(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(app.url + EXEC + query("cat", stdin="true"),
                               protocols=("v5.channel.k8s.io",)) as ws:
        await ws.send_bytes(b"\x00ping\n")
        while (await ws.receive_bytes()) != b"\x01ping\n":  # cat runs
            pass
        await ws.send_bytes(b"\x00" + b"x" * 4096)
        async for _ in ws:
            pass
        assert ws.close_code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG
    assert await app.target.sessions[0].process.wait() == -9


async def test_resize_messages_reach_the_terminal(app: harness.App) -> None:
    script = ("for i in $(seq 200); do s=$(stty size); [ \"$s\" = '33 99' ] && break; "
              "sleep 0.02; done; echo size=$s")
    async with aiohttp.ClientSession() as session, \
            session.ws_connect(app.url + EXEC + query("sh", "-c", script, tty="true",
                                                      stdin="true"),
                               protocols=("v5.channel.k8s.io",)) as ws:
        # garbage first: a resize that is not JSON is skipped until it parses
        await ws.send_bytes(b'\x04{"Width":99,"Height":33}\n')
        output = b""
        async for msg in ws:
            if msg.data[0] == 1:
                output += msg.data[1:]
    assert b"size=33 99" in output
    assert app.target.sessions[0].resizes == [streaming.TerminalSize(99, 33)]


async def test_upgrade_is_required(app: harness.App) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.post(app.url + EXEC + query("true")) as response:
            assert response.status == 400
            assert (await response.json())["message"] == "Upgrade request required"
        async with session.put(app.url + EXEC + query("true")) as response:
            assert response.status == 405
        async with session.get(app.url + EXEC) as response:
            body = await response.json()
            assert response.status == 400
            assert body["message"] == "you must specify at least one command for the container"
            assert body["kind"] == "Status"


# --- SPDY -----------------------------------------------------------------------------------


async def test_spdy_exec_v4(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("sh", "-c", "cat; echo e >&2; exit 2",
                                                         stdin="true"),
                                   ("v9.channel.k8s.io", "v4.channel.k8s.io"))
    assert client.status == 101
    assert client.header("X-Stream-Protocol-Version") == ["v4.channel.k8s.io"]
    assert client.header("Upgrade") == ["SPDY/3.1"]
    for stream_id, kind in ((1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")):
        client.syn(stream_id, {"streamType": kind})
    client.send(frames.encode_data(3, b"in and out\n", fin=True))
    await client.until_fin(1, 3, 5, 7)
    assert [f for f in client.others if isinstance(f, frames.SynReply)] == [
        frames.SynReply(i, 0, ()) for i in (1, 3, 5, 7)]
    assert bytes(client.data[5]) == b"in and out\n"
    assert bytes(client.data[7]) == b"e\n"
    assert orjson.loads(client.data[1])["details"]["causes"][0]["message"] == "2"
    await client.close()


async def test_spdy_exec_v2_sends_the_failures_text(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("sh", "-c", "exit 3"),
                                   ("v2.channel.k8s.io",))
    for stream_id, kind in ((1, "error"), (3, "stdout"), (5, "stderr")):
        client.syn(stream_id, {"streamtype": kind})
    await client.until_fin(1, 3, 5)
    assert client.data[1].startswith(b"command terminated with non-zero exit code")
    await client.close()


async def test_spdy_negotiation_failures(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("true"), ())
    assert client.status == 400
    assert orjson.loads(client.body)["message"] == (
        "unable to upgrade: X-Stream-Protocol-Version is required")
    await client.close()
    client = await RawSpdy.connect(app.url, EXEC + query("true"), ("v9.channel.k8s.io",))
    assert client.status == 403
    assert client.header("X-Accepted-Stream-Protocol-Versions")[0] == "v5.channel.k8s.io"
    assert len(client.header("X-Accepted-Stream-Protocol-Versions")) == 5
    await client.close()


async def test_unexpected_and_duplicate_streams_are_refused(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("echo", "x"), ("v4.channel.k8s.io",))
    client.syn(1, {"streamtype": "stdin"})  # stdin was not asked for
    client.syn(3, {"streamtype": "error"})
    client.syn(5, {"streamtype": "error"})
    client.syn(7, {"streamtype": "stdout"})
    client.syn(9, {"streamtype": "stderr"})
    await client.until_fin(3, 7, 9)
    resets = [f for f in client.others if isinstance(f, frames.RstStream)]
    assert resets == [frames.RstStream(1, frames.RstStatus.REFUSED_STREAM),
                      frames.RstStream(5, frames.RstStatus.REFUSED_STREAM)]
    assert bytes(client.data[7]) == b"x\n"
    await client.close()


@pytest.mark.parametrize("config", [streaming.StreamingConfig(stream_creation_timeout=0.2)])
async def test_streams_must_come_in_time(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("true"), ("v4.channel.k8s.io",))
    client.syn(1, {"streamtype": "error"})
    others = await client.until_end()
    assert others[-1] == frames.GoAway(1, frames.GoAwayStatus.OK)
    assert app.target.sessions == []  # nothing was started
    await client.close()


async def test_garbage_closes_one_connection_and_the_others_go_on(app: harness.App) -> None:
    other = await RawSpdy.connect(app.url, EXEC + query("sh", "-c", "read x; echo got $x",
                                                        stdin="true"),
                                  ("v4.channel.k8s.io",))
    for stream_id, kind in ((1, "error"), (3, "stdin"), (5, "stdout"), (7, "stderr")):
        other.syn(stream_id, {"streamtype": kind})
    bad = await RawSpdy.connect(app.url, EXEC + query("true"), ("v4.channel.k8s.io",))
    # a SYN_STREAM whose header block is not zlib
    bad.send(b"\x80\x03\x00\x01\x00\x00\x00\x12" + b"\x00\x00\x00\x01" + b"\x00" * 6
             + b"\xff" * 8)
    assert await bad.until_end() == [frames.GoAway(0, frames.GoAwayStatus.PROTOCOL_ERROR)]
    other.send(frames.encode_data(3, b"still served\n"))
    await other.until_fin(1, 5, 7)
    assert bytes(other.data[5]) == b"got still served\n"
    await bad.close()
    await other.close()


async def test_a_header_bomb_closes_the_connection(app: harness.App) -> None:
    import struct
    import zlib

    from setpoint.server.streaming.spdy import headers as hb

    value = b"v" * (8 << 20)
    z = zlib.compressobj(level=9, zdict=hb.DICTIONARY)
    block = z.compress(struct.pack(">II", 1, 1) + b"x" + struct.pack(">I", len(value)) + value)
    block += z.flush(zlib.Z_SYNC_FLUSH)
    client = await RawSpdy.connect(app.url, EXEC + query("true"), ("v4.channel.k8s.io",))
    payload = struct.pack(">II", 1, 0) + b"\x00\x00" + block
    client.send(struct.pack(">HHB", 0x8003, 1, 0) + len(payload).to_bytes(3, "big") + payload)
    assert await client.until_end() == [frames.GoAway(0, frames.GoAwayStatus.PROTOCOL_ERROR)]
    await client.close()


@pytest.mark.parametrize("config", [streaming.StreamingConfig(write_timeout=0.2)])
async def test_a_spdy_client_that_does_not_read_is_cut_off(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("yes"), ("v4.channel.k8s.io",))
    for stream_id, kind in ((1, "error"), (3, "stdout"), (5, "stderr")):
        client.syn(stream_id, {"streamtype": kind})
    await app.target.started.wait()
    assert await app.target.sessions[0].process.wait() == -9
    await client.close()


async def test_a_spdy_client_going_away_ends_the_command(app: harness.App) -> None:
    client = await RawSpdy.connect(app.url, EXEC + query("sh", "-c", "echo up; sleep 600"),
                                   ("v5.channel.k8s.io",))
    for stream_id, kind in ((1, "error"), (3, "stdout"), (5, "stderr")):
        client.syn(stream_id, {"streamtype": kind})
    while bytes(client.data[3]) != b"up\n":
        await client.pump()
    await client.close()
    assert await app.target.sessions[0].process.wait() == -9


async def test_attach_streams_the_main_command(app: harness.App) -> None:
    attach = f"/api/v1/namespaces/{harness.NAMESPACE}/pods/{harness.POD}/attach"
    out, _, _ = await ws_exec(app, attach + "?stdin=true&stdout=true&stderr=true",
                              ("v5.channel.k8s.io",), stdin=b"attached\n")
    assert out[1] == b"attached\n"
    assert orjson.loads(out[3]) == {"metadata": {}, "status": "Success"}


class SlowStart(harness.ProcessTarget):
    """A target whose exec never gets going (a node that does not answer)."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.entered = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def exec(self, options: streaming.ExecOptions) -> harness.ProcessSession:
        self.entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


async def test_a_client_leaving_while_the_command_starts_cancels_the_start(
        tmp_path: Path) -> None:
    target = SlowStart(tmp_path)
    app = await harness.start_app(target)
    try:
        async with aiohttp.ClientSession() as session:
            ws = await session.ws_connect(app.url + EXEC + query("true"),
                                          protocols=("v5.channel.k8s.io",))
            await target.entered.wait()
            await ws.close()
        await target.cancelled.wait()
    finally:
        await app.close()
