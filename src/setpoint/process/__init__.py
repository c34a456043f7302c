"""``setpoint.process``: the operating-system side of ``setpoint serve``'s process tree.

- :mod:`~setpoint.process.supervisor`: a child process owned by this one (started, restarted
  when it dies, stopped with SIGTERM then SIGKILL, never left behind);
- :mod:`~setpoint.process.lifeline`: the child's side: it ends when its parent does (even
  after ``kill -9``) and reports when it is ready;
- :mod:`~setpoint.process.shutdown`: SIGINT/SIGTERM handlers that always end the process,
  gracefully first, then within a bound, however busy its event loop is.

It depends on nothing else in setpoint (import-linter checks it), so any part of the
control plane can run its work in a process of its own.
"""

from __future__ import annotations

from setpoint.process.lifeline import Lifeline
from setpoint.process.shutdown import FORCED_EXIT_CODE, ShutdownGuard
from setpoint.process.supervisor import Supervisor, SupervisorConfig

__all__ = ["FORCED_EXIT_CODE", "Lifeline", "ShutdownGuard", "Supervisor", "SupervisorConfig"]
