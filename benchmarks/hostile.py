"""A well-behaved client's latency and the server's memory, idle and under attack.

One ``setpoint serve`` process (port 0, fresh data dir). A *well-behaved client* runs the
same loop throughout: create a small ConfigMap, read it back, delete it, one request at a
time, recording each request's latency. Two phases of equal length, same run:

1. **idle**: only the well-behaved client;
2. **under attack**: an attacker process (a separate process, so that it does not steal the
   measuring client's event loop) sends, concurrently and without pause, the nastiest inputs
   this project knows of:

   * YAML alias bombs (a few hundred bytes that expand to billions of nodes);
   * custom resources nested deeper than the server can store;
   * strings against an OpenAPI ``pattern`` that backtracking engines take exponential time on;
   * slow clients: connections that send half a request and stall, as many as allowed;
   * concurrent LISTs of a large collection (2,000 ConfigMaps of 10 KB: 20 MB per LIST);
   * merge patches of a 1 MB ConfigMap (each one a new 1 MB revision in the watch cache).

For each phase it prints the well-behaved client's p50/p99/max latency and errors, the
server's RSS (current and peak), and what the attacker got back (status codes).

The attacker process runs niced (``--nice 19``), so that on a small machine it does not
take the CPU from the server and the measuring client; the server still gets all its
requests (they are many times what the client sends).

    python benchmarks/hostile.py [--seconds 20] [--slow 400] [--listers 4] [--nice 19]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import multiprocessing
import os
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import start_serve  # noqa: E402

from setpoint.client import config as client_config  # noqa: E402
from setpoint.client import transport  # noqa: E402

NS = "default"
CM_PATH = f"/api/v1/namespaces/{NS}/configmaps"
CR_PATH = f"/apis/hostile.example.com/v1/namespaces/{NS}/things"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "things.hostile.example.com"},
    "spec": {"group": "hostile.example.com", "scope": "Namespaced",
             "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "word": {"type": "string", "pattern": "^(a+)+$"},
                                   "free": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}}}}}]},
}


def yaml_bomb(levels: int = 9) -> bytes:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnopqrstuvwxyz"
    for i in range(1, levels):
        prev, cur = names[i - 1], names[i]
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    body = "\n".join(lines)
    return ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  x: y\n"
            "bomb:\n  " + body.replace("\n", "\n  ")).encode()


def deep_object(depth: int = 300) -> bytes:
    """A custom resource nested ``depth`` levels (built as text: encoders refuse such depth)."""
    inner = b'{"n":' * depth + b'"leaf"' + b"}" * depth
    return (b'{"apiVersion":"hostile.example.com/v1","kind":"Thing",'
            b'"metadata":{"generateName":"deep-"},"spec":{"free":' + inner + b"}}")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of ``pid`` in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def session_for(kubeconfig: Path, limit: int = 100) -> aiohttp.ClientSession:
    """A session with the kubeconfig's TLS settings and client certificate."""
    cfg = client_config.load_kubeconfig(kubeconfig)
    return transport.create_session(dataclasses.replace(cfg, max_connections=limit))


# --- the well-behaved client -----------------------------------------------------------------


async def behave(kubeconfig: Path, url: str, seconds: float) -> tuple[list[float], int]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds
    i = 0
    async with session_for(kubeconfig, 4) as session:
        while time.monotonic() < deadline:
            name = f"good-{os.getpid()}-{i}"
            i += 1
            steps = [("POST", CM_PATH, orjson.dumps({"metadata": {"name": name},
                                                     "data": {"k": "v"}})),
                     ("GET", f"{CM_PATH}/{name}", None),
                     ("DELETE", f"{CM_PATH}/{name}", None)]
            for method, path, body in steps:
                t0 = time.perf_counter()
                try:
                    async with session.request(
                            method, url + path, data=body,
                            headers={"Content-Type": "application/json"},
                            timeout=aiohttp.ClientTimeout(total=30)) as r:
                        await r.read()
                        if r.status >= 300:
                            errors += 1
                except (aiohttp.ClientError, TimeoutError):
                    errors += 1
                latencies.append(time.perf_counter() - t0)
    return latencies, errors


# --- the attacker -----------------------------------------------------------------------------


ATTACKS = ("bomb", "deep", "pattern", "patch", "slow", "list")


async def attack(kubeconfig: Path, url: str, seconds: float, slow: int, listers: int,
                 attacks: tuple[str, ...] = ATTACKS) -> dict[str, collections.Counter[str]]:
    codes: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    stop = time.monotonic() + seconds
    cfg = client_config.load_kubeconfig(kubeconfig)
    ssl_ctx = transport.ssl_context(cfg)
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    host = host.strip("[]")

    async def send(session: aiohttp.ClientSession, name: str, method: str, path: str,
                   body: bytes | None, content_type: str = "application/json") -> None:
        try:
            async with session.request(method, url + path, data=body,
                                       headers={"Content-Type": content_type},
                                       timeout=aiohttp.ClientTimeout(total=60)) as r:
                await r.read()
                codes[name][str(r.status)] += 1
        except (aiohttp.ClientError, TimeoutError) as e:
            codes[name][type(e).__name__] += 1

    async def loop(name: str, method: str, path: str, body: bytes | None,
                   content_type: str = "application/json") -> None:
        async with session_for(kubeconfig, 2) as session:
            while time.monotonic() < stop:
                await send(session, name, method, path, body, content_type)

    async def slow_clients() -> None:
        head = (f"POST {CM_PATH} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
                "\r\nContent-Length: 100000\r\n\r\n{").encode()
        held: list[asyncio.StreamWriter] = []

        async def hold_one() -> None:
            while time.monotonic() < stop:
                try:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(
                        host, int(port), ssl=ssl_ctx,
                        server_hostname=host if ssl_ctx else None), 10)
                    writer.write(head)
                    await writer.drain()
                    held.append(writer)
                    codes["slow client"]["opened"] += 1
                    data = await asyncio.wait_for(reader.read(), max(0.1, stop - time.monotonic()))
                    codes["slow client"]["closed by server" if not data else "answered"] += 1
                except (OSError, TimeoutError, ssl.SSLError) as e:
                    codes["slow client"][type(e).__name__] += 1
                    await asyncio.sleep(0.1)

        await asyncio.gather(*(hold_one() for _ in range(slow)))
        for writer in held:
            writer.close()

    big_value = "x" * (1024 * 1024 - 100)
    tasks = {
        "bomb": lambda: [loop("yaml bomb", "POST", CM_PATH, yaml_bomb(), "application/yaml")],
        "deep": lambda: [loop("deep object", "POST", CR_PATH, deep_object())],
        "pattern": lambda: [loop("pattern", "POST", CR_PATH, orjson.dumps({
            "apiVersion": "hostile.example.com/v1", "kind": "Thing",
            "metadata": {"generateName": "re-"}, "spec": {"word": "a" * 40 + "!"}}))],
        "patch": lambda: [loop("1 MB patch", "PATCH", f"{CM_PATH}/big", orjson.dumps(
            {"data": {"big": big_value, "n": "0"}}), "application/merge-patch+json")],
        "slow": lambda: [slow_clients()],
        "list": lambda: [loop("large LIST", "GET", CM_PATH + "?labelSelector=bulk%3Dyes", None)
                         for _ in range(listers)],
    }
    await asyncio.gather(*(t for name in attacks for t in tasks[name]()))
    return codes


def attacker_process(kubeconfig: str, url: str, seconds: float, slow: int, listers: int,
                     out: Any, nice: int, attacks: tuple[str, ...]) -> None:
    # On a small machine the attacker's own CPU would slow the measuring client down as
    # much as the server does; niced, it models an attacker on another machine (what the
    # server does with its requests is what is measured). --nice 0 measures both.
    os.nice(nice)
    codes = asyncio.run(attack(Path(kubeconfig), url, seconds, slow, listers, attacks))
    out.put({k: dict(v) for k, v in codes.items()})


# --- setup and report -------------------------------------------------------------------------


async def prepare(kubeconfig: Path, url: str) -> None:
    async with session_for(kubeconfig, 16) as session:
        async with session.post(url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                data=orjson.dumps(CRD),
                                headers={"Content-Type": "application/json"}) as r:
            await r.read()
        for _ in range(100):
            async with session.get(url + CR_PATH) as r:
                await r.read()
                if r.status == 200:
                    break
            await asyncio.sleep(0.1)
        value = "y" * 10_000
        sem = asyncio.Semaphore(16)

        async def bulk(i: int) -> None:
            async with sem, session.post(url + CM_PATH, data=orjson.dumps(
                    {"metadata": {"name": f"bulk-{i:05d}", "labels": {"bulk": "yes"}},
                     "data": {"v": value}}), headers={"Content-Type": "application/json"}) as r:
                await r.read()

        await asyncio.gather(*(bulk(i) for i in range(2000)))
        async with session.post(url + CM_PATH, data=orjson.dumps(
                {"metadata": {"name": "big"}, "data": {"big": "z"}}),
                headers={"Content-Type": "application/json"}) as r:
            await r.read()


async def sample_rss(pid: int, seconds: float) -> list[int]:
    samples = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        samples.append(rss_kib(pid)[0])
        await asyncio.sleep(0.25)
    return samples


async def phase(kubeconfig: Path, url: str, pid: int, seconds: float
                ) -> tuple[list[float], int, list[int]]:
    (latencies, errors), rss = await asyncio.gather(behave(kubeconfig, url, seconds),
                                                    sample_rss(pid, seconds))
    return latencies, errors, rss


def report(name: str, latencies: list[float], errors: int, rss: list[int]) -> None:
    print(f"{name:<14} {len(latencies):>8} {errors:>7} {pct(latencies, 50) * 1000:>9.1f} "
          f"{pct(latencies, 99) * 1000:>9.1f} {max(latencies, default=0) * 1000:>9.1f} "
          f"{(max(rss, default=0)) / 1024:>10.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--slow", type=int, default=400, help="slow connections to hold")
    parser.add_argument("--listers", type=int, default=4, help="concurrent large LISTs")
    parser.add_argument("--attacks", default=",".join(ATTACKS),
                        help="which attacks, comma-separated (default: all of "
                        f"{','.join(ATTACKS)})")
    parser.add_argument("--nice", type=int, default=19,
                        help="the attacker process's niceness (default 19: it gets the CPU "
                        "the server and the client leave; 0: it competes with them)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        serve = start_serve(Path(tmp) / "data", storage="sqlite")
        try:
            pid = serve.process.pid
            asyncio.run(prepare(serve.kubeconfig, serve.url))
            print(f"server pid {pid}, {serve.url}; prepared 2,000 x 10 KB ConfigMaps; RSS "
                  f"{rss_kib(pid)[0] / 1024:.0f} MiB")
            idle = asyncio.run(phase(serve.kubeconfig, serve.url, pid, args.seconds))
            queue: multiprocessing.Queue[Any] = multiprocessing.Queue()
            attacker = multiprocessing.Process(
                target=attacker_process, args=(str(serve.kubeconfig), serve.url, args.seconds,
                                               args.slow, args.listers, queue, args.nice,
                                               tuple(args.attacks.split(","))))
            attacker.start()
            time.sleep(1.0)  # let the attack ramp up before measuring
            under = asyncio.run(phase(serve.kubeconfig, serve.url, pid, args.seconds - 1))
            codes = queue.get(timeout=args.seconds + 120) if attacker.is_alive() or \
                not queue.empty() else {"attacker": {f"exit {attacker.exitcode}": 1}}
            attacker.join(timeout=30)
            peak = rss_kib(pid)[1]
            print(f"\n{'phase':<14} {'requests':>8} {'errors':>7} {'p50 ms':>9} {'p99 ms':>9} "
                  f"{'max ms':>9} {'RSS MiB':>10}")
            report("idle", *idle)
            report("under attack", *under)
            ratio = pct(under[0], 99) / pct(idle[0], 99)
            print(f"\np99 under attack / idle: {ratio:.1f}x;  server peak RSS (VmHWM): "
                  f"{peak / 1024:.0f} MiB")
            print("\nwhat the attacker got back:")
            for name, counter in sorted(codes.items()):
                shown = ", ".join(f"{k}: {v}" for k, v in sorted(counter.items()))
                print(f"  {name:<14} {shown}")
        finally:
            with contextlib.suppress(Exception):
                serve.stop()


if __name__ == "__main__":
    main()
