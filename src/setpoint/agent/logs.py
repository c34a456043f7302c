"""Container logs: written in the CRI format, rotated at a size, read as ``kubectl logs`` asks.

**Format** (what the kubelet reads from containerd): one record per line,
``2024-01-02T03:04:05.000000006Z stdout F the line`` — an RFC 3339 timestamp with nine
fractional digits, the stream, ``F`` for a full line or ``P`` for a fragment of a line longer
than :data:`MAX_RECORD` bytes, then the bytes without their newline.

**Writing** (:class:`LogWriter`): one file per container instance, ``<base>``; when it passes
``max_bytes`` it becomes ``<base>.1`` (``.1`` becomes ``.2``, ...) and at most ``max_files``
files are kept, the oldest deleted — so a container's log takes at most
``max_bytes * max_files`` plus one record. A chunk without a final newline is held (at most
:data:`MAX_RECORD` bytes per stream) until its line ends or the stream closes.

**Reading** (:func:`read_log`): the files oldest first, as bytes: ``tail_lines`` (the last N
lines, found by reading backwards), then ``since_time``, ``timestamps`` (the record's time
before each line), ``limit_bytes`` (output stops there), and ``follow`` (waits for the
writer until it closes). Reads are chunked (64 KiB), so a large log never holds the event
loop for long, and what is read is bounded by the files' size.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from setpoint.apimachinery import timeutil

__all__ = ["MAX_RECORD", "LogConfig", "LogWriter", "format_timestamp", "log_files", "read_log"]

#: Longest record content; longer lines are split into ``P`` records (as containerd does).
MAX_RECORD: Final = 16 * 1024
_CHUNK: Final = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Rotation bounds per container (the kubelet's ``containerLogMaxSize``/``MaxFiles``)."""

    max_bytes: int = 10 * 1024 * 1024
    max_files: int = 5

    def __post_init__(self) -> None:
        if self.max_bytes < 1024:
            raise ValueError("log files must be allowed at least 1 KiB")
        if not 1 <= self.max_files <= 100:
            raise ValueError("keep between 1 and 100 log files")


def format_timestamp(dt: datetime) -> str:
    """RFC 3339 with nine fractional digits (``RFC3339NanoFixed``), in UTC."""
    return timeutil.format_micro_time(dt)[:-1] + "000Z"


def log_files(base: Path) -> list[Path]:
    """The files of one log, oldest first: ``base.N`` ... ``base.1``, ``base``."""
    rotated = []
    for p in base.parent.glob(base.name + ".*"):
        suffix = p.name[len(base.name) + 1:]
        if suffix.isdigit():
            rotated.append((int(suffix), p))
    files = [p for _, p in sorted(rotated, reverse=True)]
    if base.exists():
        files.append(base)
    return files


class LogWriter:
    """Appends a container's output to its log file; see the module docstring."""

    def __init__(self, base: Path, config: LogConfig, now: Callable[[], datetime]) -> None:
        self.base = base
        self._config = config
        self._now = now
        base.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._fd = os.open(base, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = os.fstat(self._fd).st_size
        self._partial: dict[str, bytes] = {"stdout": b"", "stderr": b""}
        self._changed = asyncio.Event()
        self.closed = False

    def write(self, stream: str, data: bytes) -> None:
        """Record ``data`` read from ``stream`` (``stdout`` or ``stderr``)."""
        if self.closed:
            return
        buf = self._partial.get(stream, b"") + data
        stamp = format_timestamp(self._now()).encode()
        tag = stream.encode()
        records: list[bytes] = []
        pos = 0
        while True:
            nl = buf.find(b"\n", pos, pos + MAX_RECORD + 1)
            if nl >= 0:
                records.append(b"%s %s F %s\n" % (stamp, tag, buf[pos:nl]))
                pos = nl + 1
            elif len(buf) - pos > MAX_RECORD:
                records.append(b"%s %s P %s\n" % (stamp, tag, buf[pos:pos + MAX_RECORD]))
                pos += MAX_RECORD
            else:
                break
        self._partial[stream] = buf[pos:]
        if records:
            self._append(b"".join(records))

    def end_stream(self, stream: str) -> None:
        """The stream closed: its held fragment is written as a full line."""
        rest = self._partial.get(stream, b"")
        if rest and not self.closed:
            stamp = format_timestamp(self._now()).encode()
            self._append(b"%s %s F %s\n" % (stamp, stream.encode(), rest))
        self._partial[stream] = b""

    def _append(self, data: bytes) -> None:
        if self._size and self._size + len(data) > self._config.max_bytes:
            self._rotate()
        os.write(self._fd, data)
        self._size += len(data)
        self._changed.set()
        self._changed = asyncio.Event()

    def _rotate(self) -> None:
        os.close(self._fd)
        keep = self._config.max_files
        for p in log_files(self.base)[:-1]:
            n = int(p.name.rsplit(".", 1)[1])
            if n + 1 >= keep:
                p.unlink(missing_ok=True)
            else:
                p.rename(p.with_name(f"{self.base.name}.{n + 1}"))
        if keep > 1:
            self.base.rename(self.base.with_name(self.base.name + ".1"))
        else:
            self.base.unlink(missing_ok=True)
        self._fd = os.open(self.base, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                           0o600)
        self._size = 0

    def change_event(self) -> asyncio.Event:
        """An event set by the next write (or :meth:`close`); taken *before* reading, it
        cannot miss a write that happens after."""
        return self._changed

    def close(self) -> None:
        if self.closed:
            return
        for stream in list(self._partial):
            self.end_stream(stream)
        self.closed = True
        os.close(self._fd)
        self._changed.set()


@dataclass(slots=True)
class _Record:
    stamp: bytes
    full: bool
    content: bytes


def _parse(line: bytes) -> _Record | None:
    parts = line.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        return None
    content = parts[3] if len(parts) == 4 else b""
    return _Record(parts[0], parts[2] != b"P", content)


def _tail_start(files: list[Path], lines: int) -> tuple[int, int]:
    """(file index, offset) where the last ``lines`` lines begin (a line is P... F records)."""
    if lines <= 0:
        return len(files), 0
    full_seen = 0
    for index in range(len(files) - 1, -1, -1):
        try:
            f = files[index].open("rb")
        except FileNotFoundError:
            continue
        with f:
            pos = f.seek(0, os.SEEK_END)
            carry = b""
            at_end = True
            while pos > 0:
                step = min(_CHUNK, pos)
                pos -= step
                f.seek(pos)
                block = f.read(step) + carry
                end = len(block)
                if at_end:
                    end = block.rfind(b"\n") + 1  # a record being written is not a line yet
                    at_end = False
                carry = b""
                while end > 0:
                    prev = block.rfind(b"\n", 0, end - 1)
                    if prev < 0 and pos > 0:
                        carry = block[:end]
                        break
                    rec_start = prev + 1
                    header = block[rec_start:rec_start + 64].split(b" ", 3)
                    if not (len(header) >= 3 and header[2] == b"P"):
                        full_seen += 1
                        if full_seen > lines:
                            return index, pos + end
                    end = rec_start
    return 0, 0


async def read_log(base: Path, *, tail_lines: int | None = None,
                   since_time: datetime | None = None, timestamps: bool = False,
                   limit_bytes: int | None = None, follow: bool = False,
                   writer: LogWriter | None = None) -> AsyncIterator[bytes]:
    """The log at ``base`` as ``kubectl logs`` shows it; see the module docstring.

    ``follow`` waits for ``writer`` (the live instance's) to write more, until it closes;
    without a writer (the instance ended) the log is read to its end.
    """
    since = since_time
    budget = limit_bytes if limit_bytes is not None and limit_bytes > 0 else None
    files = log_files(base)
    first_index, first_offset = (0, 0) if tail_lines is None else _tail_start(files, tail_lines)
    pending = b""  # an incomplete record at the end of what was read

    def render(data: bytes) -> bytes:
        out: list[bytes] = []
        for line in data.splitlines(keepends=False):
            rec = _parse(line)
            if rec is None:
                continue
            if since is not None:
                try:
                    if timeutil.parse_time(rec.stamp.decode()) < since:
                        continue
                except ValueError:
                    continue
            if timestamps:
                out.append(rec.stamp + b" ")
            out.append(rec.content)
            if rec.full:
                out.append(b"\n")
        return b"".join(out)

    def take(data: bytes) -> tuple[bytes, bool]:
        nonlocal budget
        if budget is None:
            return data, False
        if len(data) >= budget:
            out, budget = data[:budget], 0
            return out, True
        budget -= len(data)
        return data, False

    # What exists now, oldest file first; the current file is kept open to follow it.
    current: int | None = None
    offset = 0
    for index in range(first_index, len(files)):
        path = files[index]
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        is_current = index == len(files) - 1 and path == base
        try:
            pos = first_offset if index == first_index else 0
            while True:
                chunk = os.pread(fd, _CHUNK, pos)
                if not chunk:
                    break
                pos += len(chunk)
                data = pending + chunk
                cut = data.rfind(b"\n") + 1
                pending = data[cut:]
                out, done = take(render(data[:cut]))
                if out:
                    yield out
                if done:
                    return
                await asyncio.sleep(0)
        except BaseException:
            os.close(fd)
            raise
        if is_current:
            current, offset = fd, pos
        else:
            os.close(fd)
    if not follow or writer is None:
        if current is not None:
            os.close(current)
        return
    try:
        if current is None:
            current = os.open(base, os.O_RDONLY | os.O_CLOEXEC | os.O_CREAT, 0o600)
            offset = 0
        while True:
            changed = writer.change_event()
            chunk = os.pread(current, _CHUNK, offset)
            if chunk:
                offset += len(chunk)
                data = pending + chunk
                cut = data.rfind(b"\n") + 1
                pending = data[cut:]
                out, done = take(render(data[:cut]))
                if out:
                    yield out
                if done:
                    return
                continue
            # At the end of the file: it may have been rotated away.
            try:
                if os.stat(base).st_ino != os.fstat(current).st_ino:
                    os.close(current)
                    current = os.open(base, os.O_RDONLY | os.O_CLOEXEC)
                    offset = 0
                    pending = b""
                    continue
            except FileNotFoundError:
                pass
            if writer.closed:
                return
            await changed.wait()
    finally:
        if current is not None:
            os.close(current)
