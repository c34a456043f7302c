"""The HTTPS client admission webhooks are called with (the registry's ``Transport``).

One ``aiohttp`` session per webhook configuration, kept while the configuration's calls go to
the same CA bundle, so connections are reused between requests; each session holds at most
:attr:`WebhookClientConfig.connections_per_configuration` connections and at most
:attr:`WebhookClientConfig.max_sessions` sessions are kept (the least recently used is
closed). The server's certificate is verified against the webhook's ``caBundle`` (or the
system's trust store without one) for the name the configuration gives (a service's
``name.namespace.svc``), whatever address the call connects to.

Failures are reported in the words of Kubernetes' Go client, which webhook authors and tests
match on: ``Post "https://...?timeout=10s": context deadline exceeded``, ``... dial tcp
127.0.0.1:1: connect: connection refused``, ``... tls: failed to verify certificate: ...``.
A response is read up to :attr:`WebhookClientConfig.max_response_bytes`; a longer one fails
the call. The call's ``timeoutSeconds`` is one deadline for all of it: connecting, the TLS
handshake, redirects (at most 10 are followed, as Go's client follows them), the answer's
headers and every byte of its body. A body cut short is Go's ``unexpected EOF``, a
connection closed before an answer ``EOF``; what any other failure's message quotes of the
server's bytes is cut at 256 characters.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from setpoint.registry.webhooks import CallFailed, Target

_JSON: Final = "application/json"
#: what Kubernetes' API server calls webhooks as (some webhooks tell its calls by it)
USER_AGENT: Final = "kube-apiserver-admission"
_SHUTDOWN_GRACE: Final = 0.25
#: redirects followed, as Go's HTTP client (kube-apiserver's) follows them
_MAX_REDIRECTS: Final = 10


@dataclass(frozen=True, slots=True)
class WebhookClientConfig:
    #: the largest response read (a longer one fails the call)
    max_response_bytes: int = 3 * 1024 * 1024
    connections_per_configuration: int = 32
    max_sessions: int = 64


class WebhookClient:
    def __init__(self, config: WebhookClientConfig | None = None) -> None:
        self.config = config or WebhookClientConfig()
        self._sessions: OrderedDict[str, tuple[bytes | None, aiohttp.ClientSession]] = \
            OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()
        #: a call was abandoned mid-flight (its connection is closing in the background)
        self._abandoned = False

    def _session(self, target: Target) -> aiohttp.ClientSession:
        found = self._sessions.get(target.pool)
        if found is not None and found[0] == target.ca_bundle and not found[1].closed:
            self._sessions.move_to_end(target.pool)
            return found[1]
        if found is not None:
            self._close_later(found[1])
        context = ssl.create_default_context()
        if target.ca_bundle is not None:
            try:
                context = ssl.create_default_context(cadata=target.ca_bundle.decode("ascii"))
            except (ssl.SSLError, ValueError, UnicodeDecodeError) as e:
                raise CallFailed(f'Post "{target.url}": tls: invalid caBundle: {e}') \
                    from None
        connector = aiohttp.TCPConnector(
            ssl=context, limit=self.config.connections_per_configuration)
        session = aiohttp.ClientSession(connector=connector)
        self._sessions[target.pool] = (target.ca_bundle, session)
        while len(self._sessions) > self.config.max_sessions:
            _, (_, oldest) = self._sessions.popitem(last=False)
            self._close_later(oldest)
        return session

    def _close_later(self, session: aiohttp.ClientSession) -> None:
        task = asyncio.get_running_loop().create_task(session.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def post(self, target: Target, body: bytes, timeout: float) -> bytes:
        session = self._session(target)
        host, _, port = target.address.rpartition(":")
        parts = urlsplit(target.url)
        url = f"https://{host}:{port}{parts.path or '/'}"
        if parts.query:
            url += f"?{parts.query}"
        try:
            async with asyncio.timeout(timeout):
                async with session.post(
                        url, data=body, server_hostname=target.server_name,
                        max_redirects=_MAX_REDIRECTS,
                        headers={"Content-Type": _JSON, "Accept": _JSON,
                                 "Host": target.server_name, "User-Agent": USER_AGENT}) as resp:
                    data = await self._read(resp, target)
                    if resp.status < 200 or resp.status >= 300:
                        raise CallFailed(
                            f"an error on the server (\"{_excerpt(data)}\") has prevented "
                            f"the request from succeeding")
                    return data
        except TimeoutError:
            self._abandoned = True
            raise CallFailed(f'Post "{target.url}": context deadline exceeded') from None
        except aiohttp.ClientConnectorCertificateError as e:
            raise CallFailed(f'Post "{target.url}": tls: failed to verify certificate: '
                             f'{e.certificate_error}') from None
        except aiohttp.ClientSSLError as e:
            raise CallFailed(f'Post "{target.url}": tls: {e}') from None
        except aiohttp.ClientConnectorError as e:
            reason = "connection refused" if isinstance(e.os_error, ConnectionRefusedError) \
                else (e.os_error.strerror or str(e.os_error)).lower()
            raise CallFailed(f'Post "{target.url}": dial tcp {target.address}: connect: '
                             f'{reason}') from None
        except aiohttp.TooManyRedirects:
            raise CallFailed(f'Post "{target.url}": stopped after {_MAX_REDIRECTS} '
                             f'redirects') from None
        except aiohttp.ClientPayloadError:
            # the answer's body ended before its length or its last chunk
            raise CallFailed("unexpected error when reading response body. Please retry. "
                             "Original error: unexpected EOF") from None
        except aiohttp.ServerDisconnectedError:
            raise CallFailed(f'Post "{target.url}": EOF') from None
        except (aiohttp.ClientError, OSError, ValueError) as e:
            # the text of a parser's error can quote what the server sent
            raise CallFailed(f'Post "{target.url}": {type(e).__name__}: '
                             f'{_excerpt(str(e).encode())}') from None

    async def _read(self, resp: aiohttp.ClientResponse, target: Target) -> bytes:
        limit = self.config.max_response_bytes
        if resp.content_length is not None and resp.content_length > limit:
            raise CallFailed(f'Post "{target.url}": the response is larger than '
                             f'{limit} bytes')
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise CallFailed(f'Post "{target.url}": the response is larger than '
                                 f'{limit} bytes')
            chunks.append(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        sessions = [s for _, s in self._sessions.values()]
        self._sessions.clear()
        for session in sessions:
            await session.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
        if self._abandoned:
            # the TLS shutdown of connections abandoned by a timeout is still under way
            # (a close_notify exchange with the peer); give it a moment before the loop ends
            await asyncio.sleep(_SHUTDOWN_GRACE)


def _excerpt(data: bytes) -> str:
    return data[:256].decode("utf-8", "replace").replace('"', "'").strip()
