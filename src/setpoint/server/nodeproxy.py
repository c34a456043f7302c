"""The pods' streaming subresources, served by the node agent that runs the pod.

``GET|POST /api/v1/namespaces/NS/pods/NAME/{exec,attach,portforward,log}``: the server parses
the client's request and speaks the client's protocol (:mod:`setpoint.server.streaming`);
the streams themselves come from the pod's node agent, reached as kube-apiserver reaches a
kubelet: over HTTPS at the address and port its Node reports (``status.addresses``, first
``InternalIP`` then ``Hostname``; ``status.daemonEndpoints.kubeletEndpoint.Port``), on the
kubelet's paths (``/exec/NS/POD/CONTAINER``, ``/attach/...``, ``/portforward/NS/POD``,
``/containerLogs/NS/POD/CONTAINER``), authenticated with the server's client certificate
(``kube-apiserver-kubelet-client``, issued by the cluster CA) which the agent checks.

Between server and agent one protocol per kind of stream, whatever the client spoke:

* exec and attach: WebSocket ``v5.channel.k8s.io`` (stdin with its end, resize, the outcome
  as a Status on the error channel, which becomes the client's outcome: a non-zero exit
  code, or the agent's error);
* port-forward: WebSocket ``v4.channel.k8s.io``, one connection per forwarded connection;
  this protocol has no half-close, so a client's end of input is not passed on (the
  connection ends when either side closes), and a failure to connect inside the pod ends
  the connection without its message reaching the client;
* logs: a plain GET whose body is streamed through.

Before any of it, what only the pod knows, with kube-apiserver's messages (400): the pod
must be bound to a node (``pod NAME does not have a host assigned``), the container named or
the only one (``a container name must be specified for pod NAME, choose one of: [...]``) and
one of the pod's (``container X is not valid for pod NAME``); exec and attach need a pod that
has not completed.

Non-guarantees: the agent's serving certificate is not verified (as kube-apiserver without
``--kubelet-certificate-authority``): the client certificate protects the agent, not the
server's streams from an impostor on the network path. An agent that cannot be reached is a
503-free 400/500 to the client: the connection error is reported as an InternalError.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote

import aiohttp
from aiohttp import web

from setpoint.apimachinery import errors
from setpoint.registry.catalog import Catalog
from setpoint.server import streaming

Obj = Mapping[str, Any]

#: the user of the certificate the server presents to node agents
KUBELET_CLIENT_USER: Final = "kube-apiserver-kubelet-client"
_V5: Final = "v5.channel.k8s.io"
_V4: Final = "v4.channel.k8s.io"
_STDIN, _STDOUT, _STDERR, _ERROR, _RESIZE = 0, 1, 2, 3, 4
_NONZERO_PREFIX: Final = "command terminated with non-zero exit code: "


class NodeDialer:
    """How the server connects to node agents (one connection pool for all of them)."""

    def __init__(self, *, secure: bool, cert_file: str | None = None,
                 key_file: str | None = None, connect_timeout: float = 10.0,
                 max_message_bytes: int = 4 * 1024 * 1024) -> None:
        self.scheme = "https" if secure else "http"
        self._ssl: ssl.SSLContext | bool = False
        if secure:
            context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            if cert_file is not None:
                context.load_cert_chain(cert_file, key_file)
            self._ssl = context
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout,
                                              connect=connect_timeout)
        self.max_message_bytes = max_message_bytes
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=0),
                timeout=self._timeout, auto_decompress=False)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def ssl(self) -> ssl.SSLContext | bool:
        return self._ssl


def node_endpoint(node: Obj) -> tuple[str, int]:
    """(host, port) of a Node's agent, from its status."""
    status = node.get("status") or {}
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    addresses = status.get("addresses") or []
    host = ""
    for kind in ("InternalIP", "ExternalIP", "Hostname"):
        host = next((str(a.get("address")) for a in addresses
                     if a.get("type") == kind and a.get("address")), "")
        if host:
            break
    name = (node.get("metadata") or {}).get("name", "")
    if not host or not isinstance(port, int) or not 0 < port < 65536:
        raise errors.BadRequest(f'node "{name}" reports no agent endpoint')
    return host, port


def _containers(pod: Obj, key: str) -> list[str]:
    return [str(c.get("name")) for c in (pod.get("spec") or {}).get(key) or []]


def pick_container(pod: Obj, container: str) -> str:
    """The container a request means, with kube-apiserver's messages."""
    name = (pod.get("metadata") or {}).get("name", "")
    containers = _containers(pod, "containers")
    inits = _containers(pod, "initContainers")
    ephemeral = _containers(pod, "ephemeralContainers")
    if not container:
        if len(containers) == 1:
            return containers[0]
        message = (f"a container name must be specified for pod {name}, choose one of: "
                   f"[{' '.join(containers)}]")
        if inits:
            message += f" or one of the init containers: [{' '.join(inits)}]"
        raise errors.BadRequest(message)
    if container not in (*containers, *inits, *ephemeral):
        raise errors.BadRequest(f"container {container} is not valid for pod {name}")
    return container


class PodStreams:
    """Serves ``pods/{exec,attach,portforward,log}`` of the pods in ``catalog``."""

    def __init__(self, catalog: Catalog, dialer: NodeDialer,
                 config: streaming.StreamingConfig | None = None) -> None:
        self._catalog = catalog
        self._dialer = dialer
        self._config = config or streaming.StreamingConfig()

    async def serve(self, request: web.Request, namespace: str, name: str,
                    subresource: str) -> web.StreamResponse:
        options = streaming.parse(request, subresource, self._config)
        pod = await self._catalog.store("", "pods").get(namespace, name, "v1")
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise errors.BadRequest(f"pod {name} does not have a host assigned")
        phase = (pod.get("status") or {}).get("phase")
        if isinstance(options, streaming.ExecOptions | streaming.AttachOptions) \
                and phase in ("Succeeded", "Failed"):
            verb = "exec into" if isinstance(options, streaming.ExecOptions) else "attach to"
            raise errors.BadRequest(f"cannot {verb} a container in a completed pod; "
                                        f"current phase is {phase}")
        container = ""
        if not isinstance(options, streaming.PortForwardOptions):
            container = pick_container(pod, options.container)
        try:
            node = await self._catalog.store("", "nodes").get(None, str(node_name), "v1")
        except errors.NotFound:
            raise errors.BadRequest(f'node "{node_name}" not found') from None
        host, port = node_endpoint(node)
        if ":" in host:
            host = f"[{host}]"
        base = f"{self._dialer.scheme}://{host}:{port}"
        target = AgentTarget(self._dialer, base, namespace, name, container,
                             self._config)
        return await streaming.serve(request, options, target, self._config)


class AgentTarget:
    """One pod's streams at its node agent (see the module docstring)."""

    def __init__(self, dialer: NodeDialer, base: str, namespace: str, pod: str,
                 container: str, config: streaming.StreamingConfig) -> None:
        self._dialer = dialer
        self._base = base
        self._namespace = namespace
        self._pod = pod
        self._container = container
        self._config = config

    def _url(self, kind: str, container: str | None) -> str:
        parts = [kind, self._namespace, self._pod]
        if container is not None:
            parts.append(container)
        return self._base + "/" + "/".join(quote(p, safe="") for p in parts)

    async def _connect(self, url: str, params: Sequence[tuple[str, str]],
                       protocol: str) -> aiohttp.ClientWebSocketResponse:
        try:
            return await self._dialer.session.ws_connect(
                url, params=list(params), protocols=(protocol,), autoclose=False,
                autoping=True, max_msg_size=self._dialer.max_message_bytes)
        except aiohttp.WSServerHandshakeError as e:
            raise _agent_error(e.status, e.message) from None
        except (aiohttp.ClientError, OSError) as e:
            raise errors.InternalError(f"error dialing the node agent: {e}") from None

    async def _command(self, kind: str, container: str, command: Sequence[str], stdin: bool,
                       stdout: bool, stderr: bool, tty: bool) -> streaming.Session:
        params = [("command", c) for c in command]
        params += [("stdin", _b(stdin)), ("stdout", _b(stdout)), ("stderr", _b(stderr)),
                   ("tty", _b(tty))]
        ws = await self._connect(self._url(kind, container), params, _V5)
        return _RemoteSession(ws, stdin=stdin, stdout=stdout, stderr=stderr and not tty)

    async def exec(self, options: streaming.ExecOptions) -> streaming.Session:
        return await self._command("exec", options.container or self._container,
                                   options.command, options.stdin, options.stdout,
                                   options.stderr, options.tty)

    async def attach(self, options: streaming.AttachOptions) -> streaming.Session:
        return await self._command("attach", options.container or self._container, (),
                                   options.stdin, options.stdout, options.stderr, options.tty)

    async def port_forward(self, port: int
                           ) -> tuple[streaming.ByteReader, streaming.ByteWriter]:
        ws = await self._connect(self._url("portforward", None), [("ports", str(port))], _V4)
        forward = _RemoteForward(ws)
        return forward.reader, forward

    async def logs(self, options: streaming.LogOptions) -> AsyncIterator[bytes]:
        params: list[tuple[str, str]] = []
        for key, value in (("follow", options.follow), ("previous", options.previous),
                           ("timestamps", options.timestamps)):
            if value:
                params.append((key, "true"))
        for key, number in (("sinceSeconds", options.since_seconds),
                            ("tailLines", options.tail_lines),
                            ("limitBytes", options.limit_bytes)):
            if number is not None:
                params.append((key, str(number)))
        if options.since_time is not None:
            params.append(("sinceTime", options.since_time.strftime("%Y-%m-%dT%H:%M:%SZ")))
        if options.stream is not None:
            params.append(("stream", options.stream))
        url = self._url("containerLogs", options.container or self._container)
        try:
            response = await self._dialer.session.get(url, params=params)
        except (aiohttp.ClientError, OSError) as e:
            raise errors.InternalError(f"error dialing the node agent: {e}") from None
        if response.status != 200:
            body = await _bounded_body(response)
            response.release()
            raise _status_error(response.status, body)
        return _body_chunks(response)


def _b(value: bool) -> str:
    return "true" if value else "false"


async def _bounded_body(response: aiohttp.ClientResponse, limit: int = 64 * 1024) -> bytes:
    with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
        return await response.content.read(limit)
    return b""


def _status_error(code: int, body: bytes) -> errors.ApiError:
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("kind") == "Status":
        return errors.from_status(status, code)
    return _agent_error(code, body.decode("utf-8", "replace")[:1024])


def _agent_error(code: int, message: str) -> errors.ApiError:
    text = f"the node agent answered {code}: {message}".strip()
    if code == 404:
        return errors.NotFound(text)
    if 400 <= code < 500:
        return errors.BadRequest(text)
    return errors.InternalError(text)


async def _body_chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.content.iter_any():
            yield chunk
    except (TimeoutError, aiohttp.ClientError):
        return
    finally:
        response.release()
        response.close()


class _WsWriter:
    """stdin (or a forwarded connection's data) as WebSocket messages on one channel."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, channel: int | None) -> None:
        self._ws = ws
        self._prefix = b"" if channel is None else bytes([channel])
        self._pending: list[bytes] = []
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()

    def write(self, data: bytes) -> None:
        if data:
            self._pending.append(self._prefix + bytes(data))

    async def drain(self) -> None:
        async with self._lock:
            while self._pending:
                if self._ws.closed:
                    raise ConnectionResetError("the node agent closed the connection")
                await self._ws.send_bytes(self._pending.pop(0))

    def send_later(self, message: bytes) -> None:
        self._pending.append(message)
        task = asyncio.ensure_future(self.drain())
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a closed socket is not worth a warning

    def write_eof(self) -> None:
        if self._prefix:
            self.send_later(bytes([255, self._prefix[0]]))  # v5: this channel is closed

    def close(self) -> None:
        return None

    async def wait_closed(self) -> None:
        return None


class _RemoteSession:
    """An exec or attach running at the agent, read as the v5 channel protocol."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, *, stdin: bool, stdout: bool,
                 stderr: bool) -> None:
        self._ws = ws
        self._stdin = _WsWriter(ws, _STDIN) if stdin else None
        self._resize = _WsWriter(ws, _RESIZE)
        self._out = asyncio.StreamReader() if stdout else None
        self._err = asyncio.StreamReader() if stderr else None
        self._outcome: bytes | None = None
        self._pump = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    if msg.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE):
                        break
                    continue
                channel, payload = msg.data[0], msg.data[1:]
                if channel == _STDOUT and self._out is not None and payload:
                    self._out.feed_data(payload)
                elif channel == _STDERR and self._err is not None and payload:
                    self._err.feed_data(payload)
                elif channel == _ERROR and payload:
                    self._outcome = (self._outcome or b"") + payload
        finally:
            for reader in (self._out, self._err):
                if reader is not None:
                    reader.feed_eof()

    @property
    def stdin(self) -> streaming.ByteWriter | None:
        return self._stdin

    @property
    def stdout(self) -> streaming.ByteReader | None:
        return self._out

    @property
    def stderr(self) -> streaming.ByteReader | None:
        return self._err

    async def resize(self, size: streaming.TerminalSize) -> None:
        self._resize.write(json.dumps({"Width": size.width, "Height": size.height}).encode())
        await self._resize.drain()

    async def wait(self) -> streaming.ExitStatus:
        await asyncio.shield(self._pump)
        if self._outcome is None:
            raise errors.InternalError("the connection to the node agent ended without an "
                                       "outcome")
        try:
            status = json.loads(self._outcome)
        except ValueError:
            raise errors.InternalError(self._outcome.decode("utf-8", "replace")) from None
        if not isinstance(status, dict) or status.get("status") == "Success":
            return streaming.ExitStatus(0)
        if status.get("reason") == "NonZeroExitCode":
            causes = (status.get("details") or {}).get("causes") or [{}]
            try:
                code = int(causes[0].get("message", 1))
            except (TypeError, ValueError):
                code = 1
            message = str(status.get("message") or "")
            if message.startswith(_NONZERO_PREFIX):
                message = message[len(_NONZERO_PREFIX):]
            return streaming.ExitStatus(min(max(code, 1), 255), message)
        raise errors.from_status(status, int(status.get("code") or 500))

    async def close(self) -> None:
        await self._ws.close()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._pump


class _RemoteForward(_WsWriter):
    """One forwarded connection: v4 channels 0 (data) and 1 (error), each first carrying
    the port as two bytes."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        super().__init__(ws, _STDIN)
        self.reader = asyncio.StreamReader()
        self._seen: set[int] = set()
        self._pump = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    if msg.type in (aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE):
                        break
                    continue
                channel, payload = msg.data[0], msg.data[1:]
                if channel not in self._seen:
                    self._seen.add(channel)
                    payload = payload[2:]
                if channel == 0 and payload:
                    self.reader.feed_data(payload)
                elif channel == 1 and payload:
                    self.reader.set_exception(ConnectionResetError(
                        payload.decode("utf-8", "replace")[:1024]))
                    return
        finally:
            if self.reader.exception() is None:
                self.reader.feed_eof()

    def write_eof(self) -> None:
        return None  # no half-close in this protocol (see the module docstring)

    def close(self) -> None:
        task = asyncio.ensure_future(self._ws.close())
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        self._pump.cancel()

    async def wait_closed(self) -> None:
        await self._ws.close()
