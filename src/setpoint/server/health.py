"""Health checks, answered on ``/livez``, ``/readyz`` and ``/healthz`` as kube-apiserver does.

A :class:`HealthChecks` registry belongs to one server; anything that knows a way the server
can be unwell adds a named check to it (``checks.add("storage-file", check, readyz=True)``).
A check is an async callable that returns when healthy and raises when not; it has
``timeout`` seconds to answer.

What the endpoints print (kube-apiserver's format, line for line)::

    GET /readyz              200 "ok"
    GET /readyz?verbose      200 "[+]ping ok\\n[+]etcd ok\\n...readyz check passed\\n"
    GET /readyz (failing)    503 "[+]ping ok\\n[-]etcd failed: reason withheld\\n...
                                  readyz check failed\\n"  (verbose whenever a check fails)
    GET /readyz/etcd         200 "ok", or 503 "internal server error: <reason>\\n"
    GET /readyz?exclude=etcd skips a check ("[+]etcd excluded: ok")

The reason of a failure is withheld from the public listing (it is logged), and given by
the single-check path. ``/healthz`` runs the ``/livez`` checks. Deviation: kube-apiserver
answers a failing check with 500; here it is 503 (Service Unavailable), which is what a
not-ready or not-live server is, and what every probe treats as a failure too.
Non-guarantees: checks run one after the other at each request (no caching), so a probe costs
the sum of its checks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

from aiohttp import web

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[None]]

ENDPOINTS: Final = ("livez", "readyz", "healthz")
TEXT: Final = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class NamedCheck:
    name: str
    check: Check
    livez: bool
    readyz: bool

    def serves(self, endpoint: str) -> bool:
        return self.readyz if endpoint == "readyz" else self.livez


async def ping() -> None:
    """Always healthy: the server answers HTTP."""


class HealthChecks:
    """The named checks of one server, in the order they were added."""

    def __init__(self, *, timeout: float = 5.0) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self._checks: list[NamedCheck] = [NamedCheck("ping", ping, True, True)]

    def add(self, name: str, check: Check, *, livez: bool = False,
            readyz: bool = True) -> None:
        """Add a check to ``/readyz`` (and ``/livez`` and ``/healthz`` with ``livez``)."""
        if not name or any(c in name for c in "\n?&") or name in self.names("any"):
            raise ValueError(f"invalid or duplicate health check name: {name!r}")
        if not (livez or readyz):
            raise ValueError("a health check must be on /livez, /readyz or both")
        self._checks.append(NamedCheck(name, check, livez, readyz))

    def names(self, endpoint: str) -> list[str]:
        return [c.name for c in self._checks if endpoint == "any" or c.serves(endpoint)]

    def _for(self, endpoint: str) -> list[NamedCheck]:
        return [c for c in self._checks if c.serves(endpoint)]

    async def _run(self, check: NamedCheck) -> str | None:
        """None when healthy, else why not."""
        try:
            async with asyncio.timeout(self.timeout):
                await check.check()
        except TimeoutError:
            return f"did not answer within {self.timeout:g}s"
        except Exception as e:  # a failing check is an answer, not a server error
            return str(e) or type(e).__name__
        return None

    async def respond(self, endpoint: str, check_name: str, verbose: bool,
                      excluded: Iterable[str]) -> web.Response:
        """The answer to ``/<endpoint>[/<check_name>]``."""
        checks = self._for(endpoint)
        if check_name:
            found = next((c for c in checks if c.name == check_name), None)
            if found is None:
                return web.Response(status=404, text="404 page not found\n",
                                    content_type="text/plain")
            error = await self._run(found)
            if error is not None:
                return _text(503, f"internal server error: {error}\n")
            return _text(200, "ok")
        skip = set(excluded)
        lines: list[str] = []
        failed: list[str] = []
        for check in checks:
            if check.name in skip:
                skip.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok")
                continue
            error = await self._run(check)
            if error is None:
                lines.append(f"[+]{check.name} ok")
            else:
                lines.append(f"[-]{check.name} failed: reason withheld")
                failed.append(f"{check.name}: {error}")
        if skip:
            lines.append("warn: some health checks cannot be excluded: no matches for "
                         + ", ".join(f'"{name}"' for name in sorted(skip)))
        if failed:
            log.warning("%s check failed: %s", endpoint, "; ".join(failed))
            return _text(503, "\n".join([*lines, f"{endpoint} check failed"]) + "\n")
        if not verbose:
            return _text(200, "ok")
        return _text(200, "\n".join([*lines, f"{endpoint} check passed"]) + "\n")


def _text(status: int, body: str) -> web.Response:
    response = web.Response(status=status, body=body.encode(),
                            headers={"Content-Type": TEXT, "X-Content-Type-Options": "nosniff"})
    return response
