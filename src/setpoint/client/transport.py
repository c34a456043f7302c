"""HTTP for the client: the aiohttp session, TLS, credentials, timeouts and failure mapping.

:func:`ssl_context` and :func:`create_session` build what a :class:`ClientConfig` describes;
:class:`Transport` sends requests over such a session (or one the caller injects) and maps
every failure to an :mod:`setpoint.apimachinery.errors` exception:

- an error response → the exception its Status names (:mod:`setpoint.client.responses`);
- a connection failure (refused, reset, TLS handshake, connect timeout, truncated body) →
  ``ServiceUnavailable``, raised ``from`` the underlying error;
- a request that outlives ``request_timeout`` → ``Timeout``.

Requests (:meth:`Transport.request`) and streams (:meth:`Transport.stream`, watches) go
through :class:`setpoint.client.http1.Pool`, a lean HTTP/1.1 client, unless a proxy is
configured or the caller injected a session: those use aiohttp, which is imported only then
(a process that never needs it does not pay for importing it).

Invariants: every response is released before :meth:`Transport.request` returns or raises,
and :meth:`Transport.stream` hands the caller an open response that the caller must close.
Credentials are added per request (a rotated token applies at once) and only over https.
A session passed in by the caller is used as is and never closed here; one created here is
closed by :meth:`Transport.close`.

Non-guarantees: no retries (not even on 429 or a dropped connection: ``retry_after`` is
reported on the exception and the caller decides); proxy environment variables are ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import sys
import tempfile
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from setpoint.apimachinery import clock as clocks
from setpoint.apimachinery import errors
from setpoint.client import auth, http1, kubeconfig, responses
from setpoint.client import config as cfg

if TYPE_CHECKING:
    import aiohttp

Params = Mapping[str, str]

#: the most of an error answer's body a stream reads (its Status)
MAX_ERROR_BODY = 1024 * 1024


class BodyStream(Protocol):
    """An open streaming response (what :meth:`Transport.stream` returns).

    ``read_some`` returns the body's next bytes, ``b""`` once it has ended, raises
    ``TimeoutError`` when nothing arrives within its timeout, and raises
    ``ConnectionError`` (a :class:`~setpoint.client.http1.ConnectionLost`) or
    :class:`~setpoint.client.http1.ProtocolError` when it cannot end well. ``close`` is
    idempotent; the caller must call it.
    """

    url: str

    async def read_some(self, timeout: float | None = None) -> bytes:
        """The next bytes (``TimeoutError`` when none come within ``timeout`` seconds)."""

    def close(self) -> None: ...

# what stays unescaped in a path (already-escaped sequences included) and a query value
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = "/:,"


@contextlib.contextmanager
def _pem_path(data: bytes, name: str) -> Iterator[str]:
    """A path holding ``data`` while the context lasts: a memory file where the OS has them,
    else a file in a private (0700) temporary directory, removed on exit."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create(name)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="setpoint-tls-") as directory:
        path = os.path.join(directory, name)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as f:
            f.write(data)
        yield path


def _load_client_certificate(context: ssl.SSLContext, config: cfg.ClientConfig) -> None:
    # ssl loads certificates only from paths, so inline PEM is exposed through _pem_path
    # for the duration of the load.
    with contextlib.ExitStack() as stack:
        cert: str | Path | None = config.client_cert_file
        key: str | Path | None = config.client_key_file
        if config.client_cert_data is not None:
            cert = stack.enter_context(_pem_path(config.client_cert_data, "cert.pem"))
        if config.client_key_data is not None:
            key = stack.enter_context(_pem_path(config.client_key_data, "key.pem"))
        if cert is None or key is None:
            raise kubeconfig.ConfigError("a client certificate needs its key")
        context.load_cert_chain(cert, key)


def ssl_context(config: cfg.ClientConfig) -> ssl.SSLContext | None:
    """The TLS context for ``config``'s server, or ``None`` for plain http.

    Without a CA the system trust store is used. Unreadable or malformed certificate material
    raises :class:`~setpoint.client.kubeconfig.ConfigError` naming the field.
    """
    if not config.is_https:
        return None
    try:
        context = ssl.create_default_context(
            cafile=str(config.ca_file) if config.ca_file is not None else None,
            cadata=config.ca_data.decode("ascii") if config.ca_data is not None else None)
    except (OSError, ssl.SSLError, UnicodeDecodeError) as e:
        raise kubeconfig.ConfigError(f"cannot load the certificate authority: {e}") from e
    if config.insecure_skip_tls_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    has_cert = config.client_cert_data is not None or config.client_cert_file is not None
    if has_cert:
        try:
            _load_client_certificate(context, config)
        except (OSError, ssl.SSLError) as e:
            raise kubeconfig.ConfigError(f"cannot load the client certificate and key: {e}") from e
    return context


def create_session(config: cfg.ClientConfig, *,
                   context: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """A session with a bounded connection pool and TLS as ``config`` says.

    Must be called with an event loop running. Timeouts are set per request, not here.
    """
    import aiohttp

    tls: ssl.SSLContext | bool = context or ssl_context(config) or False
    connector = aiohttp.TCPConnector(ssl=tls, limit=config.max_connections,
                                     keepalive_timeout=30.0)
    return aiohttp.ClientSession(connector=connector, trust_env=False,
                                 timeout=aiohttp.ClientTimeout(
                                     total=None, connect=config.connect_timeout))


class Transport:
    """Sends requests to one API server; owns its session unless one was injected."""

    def __init__(self, config: cfg.ClientConfig, *, session: aiohttp.ClientSession | None = None,
                 clock: clocks.Clock | None = None) -> None:
        self.config = config
        self._session = session
        self._owns_session = session is None
        self._credentials = auth.Credentials(config, clock=clock)
        self._closed = False
        # plain request-response calls go through the lean pool unless a proxy is configured
        # or the caller brought its own session (which then carries every request)
        self._lean = session is None and config.proxy_url is None
        self._pool: http1.Pool | None = None
        self._tls: ssl.SSLContext | None = None
        self._tls_made = False
        split = urllib.parse.urlsplit(config.server)
        self._prefix = split.path.rstrip("/")
        self._host = split.hostname or ""
        self._port = split.port or (443 if split.scheme == "https" else 80)
        self._authority = split.netloc.rpartition("@")[2]

    def _tls_context(self) -> ssl.SSLContext | None:
        """The config's TLS context, made once for the session and the pool."""
        if not self._tls_made:
            self._tls = ssl_context(self.config)
            self._tls_made = True
        return self._tls

    @property
    def session(self) -> aiohttp.ClientSession:
        """The session, created on first use (it needs a running event loop)."""
        if self._closed:
            raise RuntimeError("the client is closed")
        if self._session is None:
            self._session = create_session(self.config, context=self._tls_context())
        return self._session

    def _lean_pool(self) -> http1.Pool:
        if self._closed:
            raise RuntimeError("the client is closed")
        if self._pool is None:
            self._pool = http1.Pool(
                self._host, self._port, ssl_context=self._tls_context(),
                server_hostname=self.config.tls_server_name, authority=self._authority,
                max_connections=self.config.max_connections,
                connect_timeout=self.config.connect_timeout)
        return self._pool

    async def close(self) -> None:
        """Close the session if it was created here. Idempotent."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await session.close()

    async def _headers(self, content_type: str | None, accept: str) -> dict[str, str]:
        headers = {"Accept": accept, "User-Agent": self.config.user_agent}
        if content_type is not None:
            headers["Content-Type"] = content_type
        authorization = await self._credentials.authorization()
        if authorization is not None:
            headers["Authorization"] = authorization
        return headers

    def _failure(self, method: str, path: str, error: Exception) -> errors.ApiError:
        if isinstance(error, http1.ProtocolError | ssl.SSLError) or _client_error(error) or (
                isinstance(error, OSError) and not isinstance(error, TimeoutError)):
            detail = str(error) or type(error).__name__
            return errors.ServiceUnavailable(
                f"{method} {self.config.server}{path}: connection failed: {detail}")
        return errors.Timeout(f"{method} {self.config.server}{path}: no response within "
                              f"{self.config.request_timeout:g}s")

    def _raise_for(self, status: int, reason: str, retry_after: str | None,
                   body: bytes) -> NoReturn:
        if status == 401:
            self._credentials.invalidate()
        raise responses.error_from_response(status, body, reason_phrase=reason,
                                            retry_after=retry_after)

    async def request(self, method: str, path: str, *, params: Params | None = None,
                      body: bytes | None = None, content_type: str | None = None,
                      accept: str = "application/json") -> Any:
        """Send one request and return its decoded JSON body (``None`` when empty)."""
        headers = await self._headers(content_type, accept)
        if self._lean:
            return await self._request_lean(method, path, params, body, headers)
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=self.config.request_timeout,
                                        connect=self.config.connect_timeout)
        try:
            async with self.session.request(
                    method, self.config.server + path, params=params, data=body,
                    headers=headers, timeout=timeout, proxy=self.config.proxy_url,
                    server_hostname=self.config.tls_server_name) as response:
                payload = await response.read()
                if response.status >= 400:
                    self._raise_for(response.status, response.reason or "",
                                    response.headers.get("Retry-After"), payload)
        except (aiohttp.ClientError, TimeoutError) as e:
            if isinstance(e, aiohttp.InvalidURL):
                raise
            raise self._failure(method, path, e) from e
        return responses.decode(payload, f"{method} {path}")

    def _target(self, path: str, params: Params | None) -> str:
        target = self._prefix + urllib.parse.quote(path, safe=_PATH_SAFE)
        if params:
            target += "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote,
                                                   safe=_QUERY_SAFE)
        return target

    async def _request_lean(self, method: str, path: str, params: Params | None,
                            body: bytes | None, headers: dict[str, str]) -> Any:
        target = self._target(path, params)
        try:
            response = await self._lean_pool().request(method, target, headers, body,
                                                       timeout=self.config.request_timeout)
        except (OSError, ssl.SSLError, http1.ProtocolError) as e:
            raise self._failure(method, path, e) from e
        if response.status >= 400:
            self._raise_for(response.status, response.reason,
                            response.headers.get("retry-after"), response.body)
        return responses.decode(response.body, f"{method} {path}")

    async def stream(self, method: str, path: str, *, params: Params | None = None,
                     accept: str = "application/json") -> BodyStream:
        """Open a streaming response with status < 400; the caller must close it.

        Only the wait for the response's head has a timeout here (``request_timeout``, or
        the connect timeout with aiohttp): reading is the caller's to bound.
        """
        headers = await self._headers(None, accept)
        if not self._lean:
            return await self._stream_aiohttp(method, path, params, headers)
        target = self._target(path, params)
        timeout = self.config.request_timeout
        try:
            stream = await self._lean_pool().stream(method, target, headers, timeout=timeout,
                                                    url=self.config.server + path)
            if stream.status < 400:
                return stream
            try:
                async with asyncio.timeout(timeout):  # an error answer: a rare path
                    payload = await stream.read_all(MAX_ERROR_BODY)
            finally:
                stream.close()
        except (OSError, ssl.SSLError, http1.ProtocolError) as e:
            raise self._failure(method, path, e) from e
        self._raise_for(stream.status, stream.reason, stream.headers.get("retry-after"),
                        payload)

    async def _stream_aiohttp(self, method: str, path: str, params: Params | None,
                              headers: dict[str, str]) -> BodyStream:
        import aiohttp

        timeout = aiohttp.ClientTimeout(total=None, connect=self.config.connect_timeout,
                                        sock_read=None)
        try:
            response = await self.session.request(
                method, self.config.server + path, params=params, headers=headers,
                timeout=timeout, proxy=self.config.proxy_url,
                server_hostname=self.config.tls_server_name)
        except (aiohttp.ClientError, TimeoutError) as e:
            if isinstance(e, aiohttp.InvalidURL):
                raise
            raise self._failure(method, path, e) from e
        if response.status < 400:
            return _AiohttpStream(response)
        try:
            async with asyncio.timeout(self.config.request_timeout):
                payload = await response.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            raise self._failure(method, path, e) from e
        finally:
            response.close()
        self._raise_for(response.status, response.reason or "",
                        response.headers.get("Retry-After"), payload)


class _AiohttpStream:
    """An aiohttp streaming response as a :class:`BodyStream`."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.url = str(response.url)

    async def read_some(self, timeout: float | None = None) -> bytes:
        import aiohttp

        response = self._response
        try:
            async with asyncio.timeout(timeout):
                return await response.content.readany()
        except aiohttp.ClientError as e:
            raise http1.ConnectionLost(str(e) or type(e).__name__,
                                       nothing_received=False) from e
        except RuntimeError as e:
            # aiohttp raises RuntimeError when the connection was closed under the reader
            # (e.g. the session was closed); anything else is not ours to translate
            connection = response.connection
            if connection is not None and not connection.closed:
                raise
            raise http1.ConnectionLost(str(e) or "the connection was closed",
                                       nothing_received=False) from e

    def close(self) -> None:
        self._response.close()


def _client_error(error: BaseException) -> bool:
    """Whether ``error`` is one of aiohttp's client errors (without importing aiohttp when
    nothing has)."""
    aiohttp = sys.modules.get("aiohttp")
    return aiohttp is not None and isinstance(error, aiohttp.ClientError)
