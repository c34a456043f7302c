"""A supervised child process: ready, restarted when it dies, stopped (SIGTERM, then SIGKILL),
and never left behind; the child's lifeline (real processes)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from setpoint.process import Lifeline, Supervisor, SupervisorConfig
from setpoint.process import lifeline as lifeline_module

# The child waits on a pipe that SIGTERM's handler and the lifeline write to: a handler runs
# between any two bytecodes of the main thread, even inside another handler, so one that took
# a lock (threading.Event.set does) could wait for itself forever when two signals come close
# together (the parent's death sends SIGTERM, and so may whoever killed it)
CHILD = """
import os, signal, sys, threading
from setpoint.process import Lifeline

behaviour = sys.argv[1]
lifeline = Lifeline.from_environment()
assert lifeline is not None
assert lifeline.bind_to_parent()
wake_read, wake_write = os.pipe()
if behaviour == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
else:
    signal.signal(signal.SIGTERM, lambda *_: os.write(wake_write, b"x"))
    lifeline.watch(lambda: os.write(wake_write, b"x"))
lifeline.ready()
if behaviour == "crash":
    sys.exit(3)
os.read(wake_read, 1) if behaviour != "stubborn" else threading.Event().wait()
lifeline.close()
"""


def config(tmp_path: Path, behaviour: str, **kwargs: float) -> SupervisorConfig:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    options: dict[str, float] = {"restart_backoff": 0.05, "max_restart_backoff": 0.2,
                                 "stop_timeout": 10.0, **kwargs}
    return SupervisorConfig(name="child", argv=(sys.executable, str(script), behaviour),
                            **options)  # type: ignore[arg-type]


async def until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    try:
        async with asyncio.timeout(timeout):
            while True:
                if check():
                    return
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {timeout}s") from None


def gone(pid: int) -> bool:
    """The process has exited (a zombie not reaped by its new parent counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def test_the_child_reports_ready_and_stops_with_the_supervisor(tmp_path: Path) -> None:
    supervisor = Supervisor(config(tmp_path, "normal"))
    async with asyncio.TaskGroup() as group:
        run = group.create_task(supervisor.run())
        assert await supervisor.wait_ready(20)
        pid = supervisor.pid
        assert pid is not None
        assert os.getsid(pid) == pid  # a session of its own: a terminal's Ctrl-C skips it
        supervisor.stop()
        await run
    assert supervisor.exit_codes == [0]
    assert supervisor.restarts == 0
    assert supervisor.pid is None
    assert gone(pid)


async def test_a_child_that_dies_is_started_again(tmp_path: Path) -> None:
    supervisor = Supervisor(config(tmp_path, "crash"))
    async with asyncio.TaskGroup() as group:
        run = group.create_task(supervisor.run())
        await until(lambda: len(supervisor.exit_codes) >= 3, "three exits")
        supervisor.stop()
        await run
    assert supervisor.exit_codes[:3] == [3, 3, 3]
    assert len(set(supervisor.pids)) == len(supervisor.pids) >= 3
    assert all(gone(pid) for pid in supervisor.pids)


async def test_a_child_that_ignores_sigterm_is_killed_after_the_stop_timeout(
        tmp_path: Path) -> None:
    supervisor = Supervisor(config(tmp_path, "stubborn", stop_timeout=0.5))
    async with asyncio.TaskGroup() as group:
        run = group.create_task(supervisor.run())
        assert await supervisor.wait_ready(20)
        supervisor.stop()
        await run
    assert supervisor.exit_codes == [-signal.SIGKILL]


async def test_cancelling_the_supervisor_leaves_no_child(tmp_path: Path) -> None:
    supervisor = Supervisor(config(tmp_path, "stubborn"))
    run = asyncio.get_running_loop().create_task(supervisor.run())
    assert await supervisor.wait_ready(20)
    pid = supervisor.pid
    assert pid is not None
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert gone(pid)


def test_the_child_ends_when_its_parent_is_killed(tmp_path: Path) -> None:
    """The parent is a process running a supervisor; ``kill -9`` of it ends the child."""
    parent = tmp_path / "parent.py"
    parent.write_text(f"""
import asyncio, sys
from setpoint.process import Supervisor, SupervisorConfig

async def main():
    supervisor = Supervisor(SupervisorConfig(
        name="child", argv=(sys.executable, {str(tmp_path / 'child.py')!r}, "normal")))
    task = asyncio.get_running_loop().create_task(supervisor.run())
    await supervisor.wait_ready(20)
    print(supervisor.pid, flush=True)
    await task

asyncio.run(main())
""")
    (tmp_path / "child.py").write_text(CHILD)
    with subprocess.Popen([sys.executable, str(parent)], stdout=subprocess.PIPE,
                          text=True) as process:
        assert process.stdout is not None
        child = int(process.stdout.readline())
        assert not gone(child)
        process.kill()
    deadline = time.monotonic() + 20
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gone(child)


def test_lifeline_from_an_environment_without_one() -> None:
    assert Lifeline.from_environment({}) is None
    assert Lifeline.from_environment({lifeline_module.FD_ENV: "x",
                                      lifeline_module.PARENT_ENV: "1"}) is None


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="argv"):
        SupervisorConfig(name="x", argv=())
    with pytest.raises(ValueError, match="positive"):
        SupervisorConfig(name="x", argv=("true",), stop_timeout=0)
    with pytest.raises(ValueError, match="max_restart_backoff"):
        SupervisorConfig(name="x", argv=("true",), restart_backoff=5, max_restart_backoff=1)


async def test_a_command_that_cannot_be_started_is_tried_again(tmp_path: Path) -> None:
    missing = tmp_path / "not-there"
    supervisor = Supervisor(SupervisorConfig(name="missing", argv=(str(missing), "normal"),
                                             restart_backoff=0.01, max_restart_backoff=0.05))
    async with asyncio.TaskGroup() as group:
        run = group.create_task(supervisor.run())
        await until(lambda: supervisor.start_failures >= 2, "two failed starts")
        # it keeps trying; once the command exists, it runs
        missing.write_text(f"#!{sys.executable}\n" + CHILD)
        missing.chmod(0o755)
        await until(lambda: supervisor.ready.is_set(), "the child started at last")
        supervisor.stop()
        await run
    assert supervisor.exit_codes == [0]
