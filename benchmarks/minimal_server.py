"""The minimal-work ceiling of ``benchmarks/api.py``: an HTTP endpoint that creates objects
with the least work an API server could do, on the same stack as ``setpoint serve``.

aiohttp on uvloop, orjson; a POST's body is parsed, given a uid, a resourceVersion and a
creationTimestamp, written to SQLite (WAL, ``synchronous=FULL``: what ``setpoint serve``'s
default storage does) with group commit (every write that arrives while a transaction is in
flight goes into the next one, each answered after its commit), and answered 201 with the
object. No schema, no authentication, no authorisation, no watch cache, no field
management: what is left is what no API server can avoid. With ``--cert``/``--key`` it
serves TLS (the client's certificate is not asked for).

    python benchmarks/minimal_server.py --db FILE --port-file FILE [--cert C --key K]

It writes its port to ``--port-file`` once it listens and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import signal
import sqlite3
import ssl
import threading
import uuid
from pathlib import Path
from typing import Any

import orjson
import uvloop
from aiohttp import web


class GroupCommit:
    """One writer thread; writes queued while it commits go into its next transaction."""

    def __init__(self, path: Path) -> None:
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE kv (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "name TEXT NOT NULL UNIQUE, value BLOB NOT NULL)")
        self._pending: list[tuple[str, bytes, asyncio.Future[int]]] = []
        self._lock = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread.start()

    def write(self, name: str, value: bytes) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        self._loop = loop
        future: asyncio.Future[int] = loop.create_future()
        with self._lock:
            self._pending.append((name, value, future))
            self._lock.notify()
        return future

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending:
                    self._lock.wait()
                batch, self._pending = self._pending, []
            results: list[tuple[asyncio.Future[int], int | BaseException]] = []
            self._db.execute("BEGIN")
            for name, value, future in batch:
                try:
                    cursor = self._db.execute("INSERT INTO kv (name, value) VALUES (?, ?)",
                                              (name, value))
                    results.append((future, int(cursor.lastrowid or 0)))
                except sqlite3.IntegrityError as e:
                    results.append((future, e))
            self._db.execute("COMMIT")
            assert self._loop is not None
            self._loop.call_soon_threadsafe(_settle, results)


def _settle(results: list[tuple[asyncio.Future[int], int | BaseException]]) -> None:
    for future, result in results:
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


def build_app(store: GroupCommit) -> web.Application:
    async def create(request: web.Request) -> web.Response:
        obj: dict[str, Any] = orjson.loads(await request.read())
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        key = f"{request.match_info['namespace']}/{meta.get('name', '')}"
        try:
            revision = await store.write(key, orjson.dumps(obj))
        except sqlite3.IntegrityError:
            return web.Response(status=409, body=b'{"kind":"Status","code":409}',
                                content_type="application/json")
        meta["resourceVersion"] = str(revision)
        return web.Response(status=201, body=orjson.dumps(obj),
                            headers={"Content-Type": "application/json"})

    app = web.Application()
    app.router.add_post("/apis/{group}/{version}/namespaces/{namespace}/{resource}", create)
    return app


async def serve(args: argparse.Namespace) -> None:
    store = GroupCommit(Path(args.db))
    context = None
    if args.cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
    runner = web.AppRunner(build_app(store), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    Path(args.port_file).write_text(str(port))  # noqa: ASYNC240 - once, at start
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--cert", default="")
    parser.add_argument("--key", default="")
    uvloop.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
