"""``setpoint.process.eventloop.run``: the collector settings every setpoint process runs
with. Each check runs in a child interpreter: the settings are process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import asyncio, gc, json, weakref
    from setpoint.process import eventloop

    before = {"frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()}
    seen = {}

    class Node:
        pass

    async def main():
        seen["loop"] = type(asyncio.get_running_loop()).__module__
        seen["frozen"] = gc.get_freeze_count()
        seen["threshold"] = gc.get_threshold()
        seen["enabled"] = gc.isenabled()
        # a reference cycle made while serving is still reclaimed, without an explicit
        # collection: by the young collections that enough allocations trigger
        a, b = Node(), Node()
        a.other, b.other = b, a
        alive = weakref.ref(a)
        del a, b
        kept = []
        for i in range(20 * eventloop.YOUNG_THRESHOLD):
            kept.append([i])
            if alive() is None:
                seen["reclaimed_after"] = i
                break
        kept.clear()

    eventloop.run(main())
    print(json.dumps({"before": before, "seen": seen}))
""")


def run_child() -> dict[str, dict[str, object]]:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=60, check=True)
    result: dict[str, dict[str, object]] = json.loads(done.stdout)
    return result


def test_start_up_objects_are_frozen_and_young_collections_are_rarer() -> None:
    from setpoint.process.eventloop import YOUNG_THRESHOLD

    result = run_child()
    before, seen = result["before"], result["seen"]
    assert before["frozen"] == 0
    assert isinstance(seen["frozen"], int)
    assert seen["frozen"] > 1_000
    assert isinstance(before["threshold"], list)
    assert before["threshold"][0] < YOUNG_THRESHOLD
    assert seen["threshold"] == [YOUNG_THRESHOLD, *before["threshold"][1:]]
    assert seen["enabled"] is True
    assert seen["loop"] == "uvloop"


def test_cycles_made_while_serving_are_still_collected() -> None:
    from setpoint.process.eventloop import YOUNG_THRESHOLD

    seen = run_child()["seen"]
    # reclaimed by a young collection, not kept until some far later one
    assert isinstance(seen["reclaimed_after"], int)
    assert 0 <= seen["reclaimed_after"] <= 2 * YOUNG_THRESHOLD
