"""Running a process's main coroutine: on uvloop where it is installed, with Python's cyclic
garbage collector set for a long-running server.

Every setpoint process (``serve``, ``run``, the built-in controllers' process, the node agent)
is a long-lived event loop that allocates many short-lived containers per request or event
(decoded JSON, headers, futures). Python's default collector runs a young-generation
collection every 700 net container allocations and, from time to time, a full one that walks
every tracked object in the process, including the ~70,000 that importing setpoint and its
dependencies created and that live as long as the process does. Reference counting frees
almost all of a server's garbage; the collector is only needed for reference cycles.

:func:`run` therefore, once start-up (imports, configuration) is over and before the loop
starts:

* freezes every object alive at that point (:func:`gc.freeze`): they are never walked again
  (they are never garbage: modules, classes, functions, configuration);
* collects the young generation every :data:`YOUNG_THRESHOLD` net allocations instead of 700.

Invariants: the collector stays enabled (cycles are still reclaimed, just less often), and
the settings are applied once per call, in the calling process only. Nothing here depends
on the rest of setpoint.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any

# Tens of requests' worth of container allocations between young collections. A young
# collection walks what is still alive of the containers allocated since the last one (the
# requests in flight, mostly the same whatever the interval), so fewer collections walk
# less in all, and fewer survivors are promoted to be walked again; the cyclic garbage left
# waiting stays bounded (a few MiB at most).
YOUNG_THRESHOLD = 10_000


def settle_collector() -> None:
    """Freeze what start-up created and collect young objects less often (see the module)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` to completion on a new event loop (uvloop's when installed), after
    :func:`settle_collector`."""
    settle_collector()
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency where it exists
        asyncio.run(coro)
        return
    uvloop.run(coro)
