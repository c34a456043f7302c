"""The server's CPU per write, by kind of write: what each create and patch costs it.

One real ``setpoint serve`` process (fresh data dir, port 0, the built-in controllers in their
own process as by default); an aiohttp client on uvloop in this process, C concurrent
connections. Phases, each after a warm-up of the same requests:

1. creates of a custom resource (the ``benchmarks/api.py`` object, a CRD with a status
   subresource);
2. merge patches of those objects' ``status`` subresource (one patch per object);
3. creates of ConfigMaps;
4. merge patches of those ConfigMaps' data.

For each it prints the server process's CPU time per request (user + system, from ``/proc``:
much less sensitive to the rest of the machine's load than the rate, which it prints beside),
of it the event loop's thread's (the rest is the storage thread's: SQLite, its commits), and
the CPU of the built-in controllers' process per request. ``--rounds R`` repeats the
phases on fresh objects and prints every round. ``--profile DIR`` attaches ``py-spy record``
(on the PATH or beside this Python) to the server (or, ``--profile-process controllers``, to
the built-in controllers' process) for each measured phase and prints the functions its
samples fell in; the CPU figures are then those of a profiled process.

    python benchmarks/writecpu.py [--n 3000] [--concurrency 16] [--rounds 2]
                                  [--security plain|secure] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import orjson
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.api import (  # noqa: E402
    CRD,
    PATH,
    children,
    children_cpu,
    cpu_seconds,
    get_json,
    item,
    print_profile,
)
from tests.conftest import start_serve  # noqa: E402

CM_PATH = "/api/v1/namespaces/default/configmaps"
JSON = {"Content-Type": "application/json"}
MERGE = {"Content-Type": "application/merge-patch+json"}

Request = tuple[str, str, bytes, dict[str, str], int]  # method, path, body, headers, status


def phases(prefix: str, n: int) -> list[tuple[str, list[Request]]]:
    """The four phases' requests for objects named ``{prefix}-{i}``."""
    crs = [(f"{prefix}-{i:06d}", i) for i in range(n)]
    return [
        ("custom resource create", [
            ("POST", PATH, orjson.dumps({**item(i), "metadata": {
                "name": name, "labels": {"bench": "yes"}}}), JSON, 201) for name, i in crs]),
        ("custom resource status merge patch", [
            ("PATCH", f"{PATH}/{name}/status", orjson.dumps({"status": {
                "observedSize": i, "phase": "Ready"}}), MERGE, 200) for name, i in crs]),
        ("ConfigMap create", [
            ("POST", CM_PATH, orjson.dumps({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {"bench": "yes"}},
                "data": {"size": str(i), "owner": "benchmark"}}), JSON, 201)
            for name, i in crs]),
        ("ConfigMap merge patch", [
            ("PATCH", f"{CM_PATH}/{name}", orjson.dumps({"data": {"seen": str(i)}}), MERGE,
             200) for name, i in crs]),
    ]


async def send_all(session: aiohttp.ClientSession, requests: list[Request],
                   concurrency: int) -> float:
    pending: Iterator[Request] = iter(requests)

    async def worker() -> None:
        for method, path, body, headers, status in pending:
            async with session.request(method, path, data=body, headers=headers) as r:
                text = await r.read()
                if r.status != status:
                    raise RuntimeError(f"{method} {path}: {r.status} {text[:300]!r}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


def thread_cpu(pid: int, tid: int) -> float:
    """User + system CPU time of one thread of a process (the event loop's is ``pid``)."""
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def profiled(pid: int, path: Path | None) -> Iterator[None]:
    """``py-spy record`` attached to ``pid`` for the block, its raw stacks in ``path``."""
    if path is None:
        yield
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    recorder = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--format", "raw",
                                 "-r", "250", "-o", str(path)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=60)


async def run(args: argparse.Namespace, tmp: Path) -> None:
    server = start_serve(tmp / "data", timeout=60, extra_args=[
        *([] if args.security == "secure" else ["--insecure-plain-http"])])
    pid = server.process.pid
    rows: list[tuple[int, str, float, float, float, float]] = []
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + 4,
                                         ssl=server.ssl_context() or False)
        async with aiohttp.ClientSession(base_url=server.url, connector=connector) as s:
            async with s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              data=orjson.dumps(CRD), headers=JSON) as r:
                assert r.status == 201, await r.text()
            for _ in range(200):
                if (await get_json(s, PATH + "?limit=1"))[0] == 200:
                    break
                await asyncio.sleep(0.05)
            for step in phases("warm", min(args.n, 500)):
                await send_all(s, step[1], args.concurrency)
            for round_ in range(args.rounds):
                for index, (name, requests) in enumerate(phases(f"r{round_}", args.n)):
                    profile = Path(args.profile) / f"round{round_}-phase{index}.txt" \
                        if args.profile else None
                    target = pid if args.profile_process == "server" else \
                        max(children(pid), key=cpu_seconds)
                    with profiled(target, profile):
                        cpu0, ctl0 = cpu_seconds(pid), children_cpu(pid)
                        loop0 = thread_cpu(pid, pid)
                        seconds = await send_all(s, requests, args.concurrency)
                        cpu1, ctl1 = cpu_seconds(pid), children_cpu(pid)
                        loop1 = thread_cpu(pid, pid)
                    rows.append((round_, name, len(requests) / seconds,
                                 (cpu1 - cpu0) / len(requests) * 1e6,
                                 (loop1 - loop0) / len(requests) * 1e6,
                                 (ctl1 - ctl0) / len(requests) * 1e6))
                    if profile is not None:
                        print(f"\n== {name}, round {round_}")
                        print_profile(profile, args.security == "secure", top=args.top)
    finally:
        server.stop()
    load = os.getloadavg()
    print(f"\nsetpoint write CPU: n={args.n} concurrency={args.concurrency} "
          f"security={args.security} load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
          f"{' profiled' if args.profile else ''}")
    print(f"{'round':>5}  {'phase':<36} {'req/s':>8} {'server µs/req':>14} "
          f"{'of it event loop':>17} {'controllers µs/req':>19}")
    for round_, name, rate, cpu, loop, ctl in rows:
        print(f"{round_:>5}  {name:<36} {rate:>8,.0f} {cpu:>14,.0f} {loop:>17,.0f} "
              f"{ctl:>19,.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--security", choices=("plain", "secure"), default="plain")
    parser.add_argument("--profile", default="")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--profile-process", choices=("server", "controllers"),
                        default="server",
                        help="which process --profile records: the server or the built-in "
                             "controllers' process")
    args = parser.parse_args()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="setpoint-writecpu-") as tmp:
        uvloop.run(run(args, Path(tmp)))


if __name__ == "__main__":
    main()
