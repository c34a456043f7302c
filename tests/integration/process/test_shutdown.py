"""Stop signals always end the process: graceful first, then within the bound, even when the
event loop never gets back to its selector (real processes, real signals)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from setpoint.process import FORCED_EXIT_CODE

SCRIPT = """
import asyncio, sys
from setpoint.process import ShutdownGuard

timeout, behaviour, loop_kind = float(sys.argv[1]), sys.argv[2], sys.argv[3]

async def main():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_stop():
        print("stopping", flush=True)
        if behaviour != "ignore":
            stop.set()

    with ShutdownGuard(loop, on_stop, timeout=timeout, name="guarded",
                       on_force=[lambda: print("forced", flush=True)]):
        print("ready", flush=True)
        if behaviour == "busy":
            while True:  # never yields to the event loop
                pass
        await stop.wait()
    print("stopped gracefully", flush=True)

if loop_kind == "uvloop":
    import uvloop
    uvloop.run(main())
else:
    asyncio.run(main())
"""


def start(tmp_path: Path, timeout: float, behaviour: str, loop_kind: str
          ) -> subprocess.Popen[str]:
    script = tmp_path / "guarded.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen([sys.executable, str(script), str(timeout), behaviour,
                                loop_kind], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    return process


LOOPS = pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])


@LOOPS
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_stops_gracefully(tmp_path: Path, loop_kind: str, sig: int) -> None:
    process = start(tmp_path, 60, "graceful", loop_kind)
    process.send_signal(sig)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out == "stopping\nstopped gracefully\n"


@LOOPS
def test_a_busy_event_loop_is_ended_after_the_timeout(tmp_path: Path, loop_kind: str) -> None:
    process = start(tmp_path, 0.5, "busy", loop_kind)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == FORCED_EXIT_CODE
    assert out == "forced\n"  # the graceful stop was never reached; the hooks ran
    assert "guarded: not stopped within 0.5s; exiting now" in err


@LOOPS
def test_a_second_signal_ends_it_at_once(tmp_path: Path, loop_kind: str) -> None:
    process = start(tmp_path, 600, "ignore", loop_kind)
    assert process.stdout is not None
    process.send_signal(signal.SIGTERM)
    assert process.stdout.readline() == "stopping\n"  # the first one was handled
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == FORCED_EXIT_CODE
    assert out == "forced\n"
    assert "guarded: SIGINT again while stopping; exiting now" in err
