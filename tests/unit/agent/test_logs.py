"""Container logs: CRI records, rotation, and reading them as kubectl logs asks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from setpoint.agent import logs
from setpoint.apimachinery.clock import FakeClock


def writer(tmp_path: Path, clock: FakeClock, **config: int) -> logs.LogWriter:
    return logs.LogWriter(tmp_path / "c" / "0.log", logs.LogConfig(**config), clock.now)


async def read(base: Path, **options: object) -> bytes:
    out = b""
    async for chunk in logs.read_log(base, **options):  # type: ignore[arg-type]
        out += chunk
    return out


async def test_records_are_cri_lines(tmp_path: Path) -> None:
    clock = FakeClock(datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC))
    w = writer(tmp_path, clock)
    w.write("stdout", b"one\ntw")
    w.write("stderr", b"err\n")
    w.write("stdout", b"o\n")
    w.write("stdout", b"no newline")
    w.close()
    assert w.base.read_bytes() == (
        b"2024-01-02T03:04:05.006000000Z stdout F one\n"
        b"2024-01-02T03:04:05.006000000Z stderr F err\n"
        b"2024-01-02T03:04:05.006000000Z stdout F two\n"
        b"2024-01-02T03:04:05.006000000Z stdout F no newline\n")
    assert await read(w.base) == b"one\nerr\ntwo\nno newline\n"
    assert await read(w.base, timestamps=True) == (
        b"2024-01-02T03:04:05.006000000Z one\n2024-01-02T03:04:05.006000000Z err\n"
        b"2024-01-02T03:04:05.006000000Z two\n2024-01-02T03:04:05.006000000Z no newline\n")


async def test_long_lines_are_split_into_partial_records(tmp_path: Path) -> None:
    w = writer(tmp_path, FakeClock())
    line = b"x" * (logs.MAX_RECORD * 2 + 10)
    w.write("stdout", line + b"\nshort\n")
    w.close()
    tags = [r.split(b" ")[2] for r in w.base.read_bytes().splitlines()]
    assert tags == [b"P", b"P", b"F", b"F"]
    assert await read(w.base) == line + b"\nshort\n"
    assert await read(w.base, tail_lines=1) == b"short\n"
    assert await read(w.base, tail_lines=2) == line + b"\nshort\n"


async def test_tail_since_and_limit(tmp_path: Path) -> None:
    clock = FakeClock(datetime(2024, 1, 1, tzinfo=UTC))
    w = writer(tmp_path, clock)
    for i in range(10):
        w.write("stdout", f"line {i}\n".encode())
        clock.advance(1)
    w.close()
    assert await read(w.base, tail_lines=3) == b"line 7\nline 8\nline 9\n"
    assert await read(w.base, tail_lines=0) == b""
    assert await read(w.base, tail_lines=100) == b"".join(f"line {i}\n".encode()
                                                          for i in range(10))
    since = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=8)
    assert await read(w.base, since_time=since) == b"line 8\nline 9\n"
    assert await read(w.base, limit_bytes=9) == b"line 0\nli"


async def test_rotation_keeps_a_bounded_number_of_files(tmp_path: Path) -> None:
    clock = FakeClock()
    w = writer(tmp_path, clock, max_bytes=1024, max_files=3)
    for i in range(200):
        w.write("stdout", f"{i:04d}\n".encode())
    w.close()
    files = logs.log_files(w.base)
    assert [f.name for f in files] == ["0.log.2", "0.log.1", "0.log"]
    assert all(f.stat().st_size <= 1024 for f in files)
    text = (await read(w.base)).decode().split()
    assert text[-1] == "0199"
    assert text == [f"{i:04d}" for i in range(int(text[0]), 200)]  # contiguous, oldest gone
    assert (await read(w.base, tail_lines=40)).decode().split() == [
        f"{i:04d}" for i in range(160, 200)]  # across files


async def test_follow_until_the_writer_closes(tmp_path: Path) -> None:
    w = writer(tmp_path, FakeClock(), max_bytes=1024, max_files=2)
    w.write("stdout", b"before\n")
    got: list[bytes] = []
    first = asyncio.Event()

    async def follow() -> None:
        async for chunk in logs.read_log(w.base, follow=True, writer=w):
            got.append(chunk)
            first.set()

    task = asyncio.create_task(follow())
    await first.wait()
    assert got == [b"before\n"]
    w.write("stdout", b"after\n")
    for i in range(100):  # through a rotation
        w.write("stdout", f"{i:03d}\n".encode())
    w.write("stdout", b"last")
    w.close()
    await asyncio.wait_for(task, 10)
    lines = b"".join(got).split(b"\n")
    assert lines[:2] == [b"before", b"after"]
    assert lines[-2:] == [b"last", b""]


@pytest.mark.parametrize("tail", [None, 2])
async def test_a_missing_log_reads_empty(tmp_path: Path, tail: int | None) -> None:
    assert await read(tmp_path / "none.log", tail_lines=tail) == b""
