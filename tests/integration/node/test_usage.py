"""What the agent measures for ``kubectl top``: a real process that burns CPU and holds
memory, through :func:`setpoint.node.usage.collect` and the ``/metrics/resource`` text."""

from __future__ import annotations

from pathlib import Path

from setpoint.apimachinery import resourcemetrics as rm
from setpoint.node import usage
from setpoint.testing import eventually
from tests.integration.agent.conftest import make_config, pod, running, sh, start, wait_logs

BURNER = ("import sys, time\n"
          "held = bytearray(64 * 1024 * 1024)\n"
          "for i in range(0, len(held), 4096): held[i] = 1\n"
          "print('holding', flush=True)\n"
          "while True: pass\n")


async def test_a_busy_process_shows_cpu_and_memory(tmp_path: Path) -> None:
    async with running(make_config(tmp_path / "agent", "none")) as rt:
        p = pod(sh("c", f"exec python3 -c \"{BURNER}\""), name="burner")
        p["metadata"]["namespace"] = "work"
        uid = await start(rt, p)
        await wait_logs(rt, uid, "holding")
        probe = usage.NodeProbe()

        async def sample() -> rm.Scrape:
            scrape = await usage.collect(rt, [p], probe, lambda: 1.0e9)
            return rm.parse(rm.render(scrape), now=0)

        first = await sample()
        (c,) = first.containers
        assert (c.namespace, c.pod, c.container) == ("work", "burner", "c")
        assert c.memory_bytes >= 60 * 1024 * 1024
        assert c.start_time is not None
        assert c.start_time <= c.timestamp

        async def later() -> rm.Scrape | None:
            s = await sample()
            return s if s.containers[0].cpu_seconds > c.cpu_seconds else None

        second = await eventually(later, timeout=30)
        (d,) = second.containers
        rate = rm.cpu_rate(d.cpu_seconds, d.timestamp, c.cpu_seconds, c.timestamp)
        assert rate is not None
        assert rate[0] > 0
        # the machine: some CPU used since boot, some memory in use
        assert first.node is not None
        assert first.node.cpu_seconds > 0
        assert first.node.memory_bytes > 0


def test_the_node_probe_reads_proc_stat_and_meminfo(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 20 30 1000 50 5 5 40 0 0\ncpu0 1 2 3 4\n")
    (tmp_path / "meminfo").write_text("MemTotal:  8000 kB\nMemFree: 1000 kB\n"
                                      "MemAvailable:    3000 kB\n")
    probe = usage.NodeProbe(tmp_path, clock_ticks=100)
    sample = probe.sample(5.0)
    assert sample == rm.NodeSample(2.0, 5000 * 1024, 5.0)  # idle and iowait left out
    empty = usage.NodeProbe(tmp_path / "missing").sample(5.0)
    assert (empty.cpu_seconds, empty.memory_bytes) == (0.0, 0)
