"""The data directory lock on its own: exclusive, named holder, released for the next one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from setpoint.cli.datadir import LOCK_FILE, DataDirInUse, DataDirLock


def test_the_lock_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    with DataDirLock(tmp_path) as first:
        assert first.held
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        second = DataDirLock(tmp_path)
        with pytest.raises(DataDirInUse) as in_use:
            second.acquire()
        assert in_use.value.holder == str(os.getpid())
        assert str(in_use.value) == (
            f"data directory {tmp_path} is in use by another setpoint serve "
            f"(pid {os.getpid()}); stop it first or choose another --data-dir")
        assert not second.held
    assert not first.held
    with DataDirLock(tmp_path) as again:  # released: the next server takes it
        assert again.held


def test_a_holder_that_wrote_no_pid_is_another_process(tmp_path: Path) -> None:
    import fcntl

    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(DataDirInUse, match="in use by another process;"):
            DataDirLock(tmp_path).acquire()
    finally:
        os.close(fd)


def test_acquiring_twice_is_a_programming_error(tmp_path: Path) -> None:
    with DataDirLock(tmp_path) as lock, pytest.raises(RuntimeError, match="already locked"):
        lock.acquire()
