"""An agent in a process of its own, for the test that kills it with -9.

``python agent_main.py SPEC_JSON``: starts a :class:`ProcessRuntime` on ``root``, runs the
given pods, prints ``running`` once all are Running, then waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from setpoint.agent import ProcessRuntime, ProcessRuntimeConfig, resolve_inputs


async def main(spec: dict) -> None:  # type: ignore[type-arg]
    config = ProcessRuntimeConfig(root_dir=Path(spec["root"]), isolation=spec["isolation"],
                                  bridge=spec["bridge"], pod_cidr=spec["cidr"],
                                  cgroups=spec["cgroups"])
    async with ProcessRuntime(config) as rt:
        for pod in spec["pods"]:
            await rt.sync_pod(pod, resolve_inputs(pod))
        while True:
            statuses = [rt.pod_status(p["metadata"]["uid"]) for p in spec["pods"]]
            if all(s is not None and s["phase"] == "Running" for s in statuses):
                break
            await asyncio.sleep(0.02)
        print("running", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
