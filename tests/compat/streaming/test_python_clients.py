"""The Python clients' streaming: ``kubernetes.stream`` and ``kubernetes_asyncio``.

The ``kubernetes`` client is synchronous: it runs in a thread while the server runs in the
test's event loop. Its ``stream()`` leaves the socket of a finished exec for the garbage
collector (a ResourceWarning, which the test suite turns into an error): such calls run
under :func:`quiet`.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

import pytest
from kubernetes import client as k8s
from kubernetes.stream import portforward, stream, ws_client

from tests.integration.streaming import harness

pytestmark = pytest.mark.compat

T = TypeVar("T")


def quiet(call: Callable[[], T]) -> T:
    """``call()``, ignoring the ResourceWarnings of the sockets it leaves unclosed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        result = call()
        gc.collect()
    return result


def join_proxies() -> None:
    """Wait for the port-forward proxy threads: they close their WebSocket as they end."""
    for thread in threading.enumerate():
        if thread.name.startswith("Kubernetes port forward proxy"):
            thread.join(timeout=30)


def api(app: harness.App) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(k8s.ApiClient(k8s.Configuration(host=app.url)))


async def test_exec_output(app: harness.App) -> None:
    core = api(app)
    output = await asyncio.to_thread(quiet, lambda: stream(
        core.connect_get_namespaced_pod_exec, harness.POD, harness.NAMESPACE,
        command=["sh", "-c", "echo hi; echo there >&2"], stderr=True, stdin=False,
        stdout=True, tty=False))
    assert output == "hi\nthere\n"


async def test_exec_streams_stdin_and_the_exit_code_on_v5(app: harness.App) -> None:
    core = api(app)

    def run() -> tuple[str, str, str, int]:
        session = stream(core.connect_get_namespaced_pod_exec, harness.POD, harness.NAMESPACE,
                         command=["sh", "-c", "cat; echo bye >&2; exit 7"], stderr=True,
                         stdin=True, stdout=True, tty=False, _preload_content=False)
        session.write_stdin("first line\n")
        line = session.readline_stdout(timeout=30)
        session.close_channel(ws_client.STDIN_CHANNEL)  # v5: cat sees its end of input
        session.run_forever(timeout=30)
        result = session.subprotocol, line, session.read_stderr(), session.returncode
        session.close()
        return result

    assert await asyncio.to_thread(quiet, run) == ("v5.channel.k8s.io", "first line", "bye\n", 7)


async def test_the_exit_code_on_v4(app: harness.App) -> None:
    configuration = k8s.Configuration(host=app.url)
    url = (app.url.replace("http", "ws") + f"/api/v1/namespaces/{harness.NAMESPACE}/pods/"
           f"{harness.POD}/exec?command=sh&command=-c&command=exit%2042&stdout=True")

    def run() -> tuple[str, int]:
        session = ws_client.WSClient(configuration, url,
                                     {"sec-websocket-protocol": "v4.channel.k8s.io"},
                                     capture_all=True)
        session.run_forever(timeout=30)
        result = session.subprotocol, session.returncode
        session.close()
        return result

    assert await asyncio.to_thread(quiet, run) == ("v4.channel.k8s.io", 42)


async def test_attach(app: harness.App) -> None:
    core = api(app)

    def run() -> str:
        session = stream(core.connect_get_namespaced_pod_attach, harness.POD,
                         harness.NAMESPACE, stderr=True, stdin=True, stdout=True, tty=False,
                         _preload_content=False)
        session.write_stdin("attached\n")
        line = session.readline_stdout(timeout=30)
        session.close()
        return line

    assert await asyncio.to_thread(quiet, run) == "attached"
    process = app.target.sessions[0].process
    assert await process.wait() == -9  # the client left: the attached process is let go


def _http(sock: socket.socket, path: str) -> bytes:
    """One request; the response is read by its length: over WebSocket channels the end of
    one port's connection shows only once every port's has ended."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: pod\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return body


async def test_port_forward(app: harness.App) -> None:
    core = api(app)

    def run() -> tuple[bytes, bytes, str | None]:
        forward = portforward(core.connect_get_namespaced_pod_portforward, harness.POD,
                              harness.NAMESPACE, ports="8080,7")
        web = forward.socket(8080)
        page = _http(web, "/from-python")
        echo = forward.socket(7)
        echo.sendall(b"x" * 300_000)
        echoed = b""
        while len(echoed) < 300_000:
            echoed += echo.recv(65536)
        echo.close()
        web.close()  # the last local socket: the client closes the WebSocket
        join_proxies()
        return page, echoed, forward.error(8080)

    page, echoed, error = await asyncio.to_thread(quiet, run)
    assert page == b"hello from the pod: GET /from-python 0 bytes"
    assert echoed == b"x" * 300_000
    assert error is None


async def test_port_forward_to_a_closed_port(app: harness.App) -> None:
    core = api(app)

    def run() -> str | None:
        forward = portforward(core.connect_get_namespaced_pod_portforward, harness.POD,
                              harness.NAMESPACE, ports="9")
        sock = forward.socket(9)
        while sock.recv(1024):
            pass
        sock.close()
        join_proxies()
        return forward.error(9)

    assert await asyncio.to_thread(quiet, run) == (
        "error forwarding port 9 to pod: nothing listens on port 9")


async def test_kubernetes_asyncio_exec(app: harness.App) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.stream import WsApiClient

    configuration = aclient.Configuration(host=app.url)
    async with WsApiClient(configuration=configuration) as ws_api:
        core = aclient.CoreV1Api(api_client=ws_api)
        output = await core.connect_get_namespaced_pod_exec(
            harness.POD, harness.NAMESPACE, command=["sh", "-c", "echo from asyncio"],
            stderr=True, stdin=False, stdout=True, tty=False)
    assert output == "from asyncio\n"
