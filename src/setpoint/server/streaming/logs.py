"""pods/log: the container's output as a plain-text stream.

A ``GET`` answered ``200 text/plain`` with chunked encoding, one chunk per piece of output
the target yields, written as it comes (``kubectl logs -f`` sees lines as they are
written). ``limitBytes`` is enforced here whatever the target does. Errors the target
raises before the first byte are Statuses; after it, the stream just ends.

The stream also ends when the client goes away, even while the target has nothing to say
(a ``logs -f`` of a quiet container): the connection is watched for its end, and the target's
iterator is closed (``aclose``). A client that does not read holds at most the socket
buffers; after ``write_timeout`` without taking a chunk it is disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from setpoint.server import responses
from setpoint.server.streaming import conduit
from setpoint.server.streaming.config import StreamingConfig
from setpoint.server.streaming.options import LogOptions
from setpoint.server.streaming.target import StreamTarget

log = logging.getLogger(__name__)


async def serve(request: web.Request, options: LogOptions, target: StreamTarget,
                config: StreamingConfig) -> web.StreamResponse:
    output = await target.logs(options)
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
    responses.stream_body(request, response)
    response.force_close()  # the connection is watched for its end: not reused
    try:
        disconnected = conduit.watch_disconnection(request)
        await response.prepare(request)
        async with asyncio.TaskGroup() as tg:
            copying = tg.create_task(_copy(output, request, response, options, config))
            gone = tg.create_task(disconnected.wait())
            await asyncio.wait({copying, gone}, return_when=asyncio.FIRST_COMPLETED)
            copying.cancel()
            gone.cancel()
    finally:
        aclose = getattr(output, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
    return response


async def _copy(output: AsyncIterator[bytes], request: web.Request,
                response: web.StreamResponse, options: LogOptions,
                config: StreamingConfig) -> None:
    remaining = options.limit_bytes
    while remaining != 0:
        try:
            chunk = await anext(output)
        except StopAsyncIteration:
            break
        except Exception as e:
            # the target failed once the 200 was out: the stream ends without its last chunk,
            # so the client sees a truncated body rather than the end of the log
            log.warning("reading a log failed: %s", e)
            _drop(request)
            return
        if remaining is not None:
            chunk = chunk[:remaining]
            remaining -= len(chunk)
        for start in range(0, len(chunk), config.read_chunk_bytes):
            try:
                async with asyncio.timeout(config.write_timeout):
                    await response.write(chunk[start:start + config.read_chunk_bytes])
            except TimeoutError:
                log.info("a log client did not read for %ss: disconnected",
                         config.write_timeout)
                _drop(request)
                return
            except (ConnectionError, OSError, RuntimeError):
                return  # the client went away
    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
        await response.write_eof()


def _drop(request: web.Request) -> None:
    if request.transport is not None:
        request.transport.abort()
