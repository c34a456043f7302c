"""Where the streams go: what the protocols need from a container, whatever runs it.

A :class:`StreamTarget` is one pod as the streaming subresources see it. The node agent
implements it for the containers it runs, possibly by forwarding to an agent on another
machine; the protocols here neither know nor care. The byte streams are shaped like
asyncio's own (:class:`asyncio.StreamReader`, :class:`asyncio.StreamWriter`), so a
subprocess's pipes or a TCP connection serve as they are.

What the protocols rely on:

* ``exec`` and ``attach`` return once the command is running (or raise an
  :class:`~setpoint.apimachinery.errors.ApiError`, which the client receives as its Status);
  they are cancelled if the client goes away meanwhile, and must then leave nothing behind.
  The session's ``stdin`` exists when asked for; ``stdout``/``stderr`` when asked for (with a
  TTY only ``stdout``: the terminal merges them). Their readers end (``b""``) when the
  command's output ends; ``wait`` returns the exit status once the command has exited.
  ``close`` is called when the client has gone before that: an exec ends its command, an
  attach only lets go of the container.
* ``port_forward`` returns a connection to ``port`` inside the pod (or raises ``OSError``
  or an ``ApiError``, which the client receives as the port's error).
* ``logs`` validates (raising an ``ApiError``, e.g. no previous container) and returns an
  iterator of the log's bytes, already cut by the options but for ``limitBytes``, which the
  server also enforces; with ``follow`` it ends when the container does. The server closes
  the iterator (``aclose``) when the client goes away.

Every method may be called many times concurrently, for different clients.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from setpoint.server.streaming.options import (
    AttachOptions,
    ExecOptions,
    LogOptions,
)


@dataclass(frozen=True, slots=True)
class TerminalSize:
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How a command ended: ``code`` 0-255 (128 + n for signal n, as shells report it)."""

    code: int
    #: a human description, for the client's error message when ``code`` is not 0
    message: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.code <= 255:
            raise ValueError(f"exit code {self.code} out of 0..255")


class ByteReader(Protocol):
    async def read(self, n: int = -1) -> bytes:
        """Up to ``n`` bytes; ``b""`` at the end."""


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def write_eof(self) -> None:
        """No more input (the reader on the other side sees its end)."""

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class Session(Protocol):
    """A command running for an exec or attach."""

    @property
    def stdin(self) -> ByteWriter | None: ...

    @property
    def stdout(self) -> ByteReader | None: ...

    @property
    def stderr(self) -> ByteReader | None: ...

    async def resize(self, size: TerminalSize) -> None:
        """The client's terminal changed size (only with a TTY)."""

    async def wait(self) -> ExitStatus:
        """The command's exit status, once it has exited."""

    async def close(self) -> None:
        """The client is gone: stop the command (exec) or detach (attach)."""


class StreamTarget(Protocol):
    async def exec(self, options: ExecOptions) -> Session: ...

    async def attach(self, options: AttachOptions) -> Session: ...

    async def port_forward(self, port: int) -> tuple[ByteReader, ByteWriter]: ...

    async def logs(self, options: LogOptions) -> AsyncIterator[bytes]: ...
