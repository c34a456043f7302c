"""Measure the whole API path of a real ``setpoint serve`` process, beside its ceilings.

Phases, all in one run against one server process started here (port 0, fresh data dir):

1. once the server and its children (the controllers' process, the node agent) have settled
   after start, create N custom resources with C concurrent clients (creates/s, p50/p99
   latency), ``--rounds`` times, taking turns with the minimal-work ceiling below;
2. list them all, several times (best and median time);
3. watch delivery: one watcher, then W watchers (``--watchers 1,1000``), all on one object
   (a field selector on its name); U updates of it, one at a time; the delay from each
   update being acknowledged to each watcher receiving its event (p50/p99; 0 when the
   event arrived first: the server writes caught-up watchers' events before it answers the
   update), the delay from the update's request being sent to each receipt (p50/p99), and
   the server's CPU time per delivered event (from ``/proc``). The first count is the
   baseline of the same run;
4. the server's peak RSS (VmHWM from /proc).

The ceilings, same run, same load generator, same concurrency (and, less sensitive to
what else runs on the machine than rates, the CPU time each server spent per create, the
load generator's own, and the share of creates/s that the CPU time of all of them allows:
on a machine whose cores the load generator and the servers share, creates/s follow the
CPU time every process spends per create, and that share is what the rates measure once
nothing else runs):

* the **minimal-work ceiling** (``benchmarks/minimal_server.py``): an aiohttp + uvloop +
  orjson endpoint that parses the posted object, sets uid, resourceVersion and timestamp,
  group-commits it to SQLite (WAL, ``synchronous=FULL``) and answers 201. It serves TLS with
  the server's own certificate when ``setpoint serve`` is measured with TLS, plain HTTP
  otherwise. ``API / minimal-work`` is the ratio the project's target is stated in. Both
  servers run side by side, and ``--rounds R`` measures R rounds of N creates through each,
  back to back, taking turns to go first, every phase started once ``setpoint serve``'s
  processes are quiet; the table gives medians, and the range of the rounds' shares (on
  two shared cores they swing by ten points or more between rounds);
* the same N writes straight into the storage backend in this process (no HTTP, no
  registry): what storage alone allows.

With ``--storage etcd`` the benchmark starts a single-member etcd in a temporary directory
(``etcd`` on the PATH, or ``$SETPOINT_TEST_ETCD``), or uses the cluster at
``--etcd-endpoints`` (then under a fresh ``--etcd-prefix``, deleted at the end). The storage
ceiling is then measured twice with the client library the backend uses (aetcd), in the same
run: plain etcd puts (``aetcd.Client.put``), and the backend's create transactions
(``EtcdBackend.create``: ``create_revision == 0 → put``), which is what every API create is.

``--controllers-mode inline`` runs the built-in controllers in the server's event loop instead
of the child process ``setpoint serve`` uses by default (``benchmarks/controllers.py`` compares
the two side by side). ``--profile DIR`` runs each server under ``py-spy record`` (the ``bench``
extra: ``pip install -e '.[bench]'``) and prints the functions the server spent its samples
in (self and cumulative), writing the raw stacks to ``DIR``; its timings are then those of a
profiled server.

The load generator runs on uvloop; the watchers are raw connections that look for the
event's resourceVersion without decoding the JSON, so that the client's own cost per event
stays small beside the server's.

    python benchmarks/api.py [--n 10000] [--concurrency 16] [--rounds 1] [--watchers 1,100]
                             [--storage sqlite] [--security secure|plain|both]
                             [--controllers-mode process|inline] [--profile DIR]
    python benchmarks/api.py --storage etcd [--etcd-endpoints http://127.0.0.1:2379]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import os
import resource
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import typing
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.conftest import ServeProcess, start_serve  # noqa: E402
from tests.integration.storage import etcd_server  # noqa: E402

from setpoint.storage import StorageConfig, create_backend  # noqa: E402

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "items.bench.example.com"},
    "spec": {"group": "bench.example.com", "scope": "Namespaced",
             "names": {"plural": "items", "singular": "item", "kind": "Item"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "size": {"type": "integer", "minimum": 0},
                                       "owner": {"type": "string"},
                                       "tags": {"type": "array",
                                                "items": {"type": "string"}}}},
                                   "status": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}
PATH = "/apis/bench.example.com/v1/namespaces/default/items"


def item(i: int) -> dict[str, Any]:
    return {"apiVersion": "bench.example.com/v1", "kind": "Item",
            "metadata": {"name": f"item-{i:06d}", "labels": {"bench": "yes"}},
            "spec": {"size": i, "owner": "benchmark", "tags": ["a", "b", "c"]}}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def create_all(session: aiohttp.ClientSession, n: int, concurrency: int,
                     first: int = 0) -> tuple[float, list[float]]:
    """``n`` creates (``item(first)`` on) with ``concurrency`` clients: seconds, latencies."""
    latencies: list[float] = []
    counter = iter(range(first, first + n))

    async def worker() -> None:
        for i in counter:
            body = orjson.dumps(item(i))
            t0 = time.perf_counter()
            async with session.post(PATH, data=body,
                                    headers={"Content-Type": "application/json"}) as r:
                await r.read()
                if r.status != 201:
                    raise RuntimeError(f"create failed: {r.status}")
            latencies.append(time.perf_counter() - t0)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


async def list_times(session: aiohttp.ClientSession, n: int, repeat: int = 5) -> list[float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        async with session.get(PATH) as r:
            body = await r.read()
        times.append(time.perf_counter() - t0)
        count = len(orjson.loads(body)["items"])
        if count != n:
            raise RuntimeError(f"listed {count} of {n}")
    return times


#: what precedes an event's resourceVersion in its JSON (the object's is the first one)
RV_MARK = b'"resourceVersion":"'


class RawWatch(asyncio.Protocol):
    """One watch connection that stamps each event's arrival, keyed by its resourceVersion,
    without decoding its JSON (the chunked framing's lines carry no resourceVersion)."""

    def __init__(self, request: bytes, received: dict[str, list[float]],
                 on_ready: Callable[[], None]) -> None:
        self._request = request
        self._received = received
        self._on_ready = on_ready
        self._buffer = b""
        self._headers = False
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        # uvloop's transports are not asyncio.WriteTransport subclasses, but write alike
        typing.cast(asyncio.WriteTransport, transport).write(self._request)

    def data_received(self, data: bytes) -> None:
        stamp = time.perf_counter()
        buffer = self._buffer + data
        if not self._headers:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self._buffer = buffer
                return
            if not buffer.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"watch refused: {buffer[:200]!r}")
            self._headers = True
            self._on_ready()
            buffer = buffer[end + 4:]
        *lines, self._buffer = buffer.split(b"\n")
        for line in lines:
            at = line.find(RV_MARK)
            if at >= 0:
                start = at + len(RV_MARK)
                rv = line[start:line.index(b'"', start)].decode()
                self._received.setdefault(rv, []).append(stamp)


@dataclasses.dataclass
class Delivery:
    watchers: int
    delays: list[float]
    from_request: list[float]  # from the update's request being sent
    cpu_seconds: float  # the server's, over the updates
    updates: int


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, to the nanosecond where Linux tells it.

    The sum of its threads' run times (``/proc/PID/task/*/schedstat``, in nanoseconds): the
    process's own counters (``/proc/PID/stat``) are in clock ticks of 10 ms, too coarse for
    a few hundred updates seen by one watcher. A thread that ended takes its time with it,
    so a difference over an interval is exact only for threads alive at both ends (a
    server's threads live as long as it does); without schedstat, the ticks."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                total += int((task / "schedstat").read_text().split()[0])
    except FileNotFoundError:
        total = 0
    if total:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def watch_delivery(session: aiohttp.ClientSession, url: str,
                         ssl_context: ssl.SSLContext | None, pid: int, watchers: int,
                         updates: int) -> Delivery:
    """``watchers`` watches of one object; ``updates`` updates of it, one at a time; the
    delay from each update's answer to each watcher's receipt of its event."""
    _, body = await get_json(session, PATH + "?limit=1")
    rv = body["metadata"]["resourceVersion"]
    address = urllib.parse.urlsplit(url)
    host, port = address.hostname or "127.0.0.1", address.port or 443
    request = (f"GET {PATH}?watch=true&resourceVersion={rv}"
               "&fieldSelector=metadata.name%3Ditem-000000 HTTP/1.1\r\n"
               f"Host: {host}:{port}\r\nAccept: application/json\r\n"
               "User-Agent: setpoint-benchmark\r\n\r\n").encode()
    received: dict[str, list[float]] = {}
    ready = 0
    all_ready = asyncio.Event()

    def on_ready() -> None:
        nonlocal ready
        ready += 1
        if ready == watchers:
            all_ready.set()

    loop = asyncio.get_running_loop()
    connections: list[asyncio.BaseTransport] = []
    try:
        for _ in range(watchers):
            transport, _protocol = await loop.create_connection(
                lambda: RawWatch(request, received, on_ready), host, port,
                ssl=ssl_context, server_hostname=host if ssl_context else None)
            connections.append(transport)
        await asyncio.wait_for(all_ready.wait(), 60)
        await asyncio.sleep(0.2)
        delays: list[float] = []
        from_request: list[float] = []
        cpu_before = cpu_seconds(pid)
        for u in range(updates):
            patch = orjson.dumps({"spec": {"size": 1_000_000 + watchers * updates + u}})
            sent = time.perf_counter()
            async with session.patch(PATH + "/item-000000", data=patch, headers={
                    "Content-Type": "application/merge-patch+json"}) as r:
                obj = orjson.loads(await r.read())
            acked = time.perf_counter()
            key = obj["metadata"]["resourceVersion"]
            deadline = acked + 5
            while len(received.get(key, ())) < watchers and time.perf_counter() < deadline:  # noqa: ASYNC110 - polling keeps the receive path free of extra wake-ups
                await asyncio.sleep(0.0005)
            got = received.get(key, ())
            if len(got) < watchers:
                raise RuntimeError(f"{len(got)} of {watchers} watchers got the event")
            delays.extend(max(0.0, t - acked) for t in got)
            from_request.extend(t - sent for t in got)
        cpu = cpu_seconds(pid) - cpu_before
    finally:
        for connection in connections:
            connection.close()
    return Delivery(watchers, delays, from_request, cpu, updates)


async def get_json(session: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with session.get(path) as r:
        return r.status, orjson.loads(await r.read())


def start_minimal(tmp: Path, cert: tuple[Path, Path] | None
                  ) -> tuple[subprocess.Popen[bytes], str]:
    """``benchmarks/minimal_server.py`` on a free port (TLS with ``cert`` when given): the
    process and its URL."""
    tmp.mkdir(parents=True, exist_ok=True)
    port_file = tmp / "port"
    command = [sys.executable, str(ROOT / "benchmarks" / "minimal_server.py"),
               "--db", str(tmp / "minimal.db"), "--port-file", str(port_file)]
    if cert is not None:
        command += ["--cert", str(cert[0]), "--key", str(cert[1])]
    process = subprocess.Popen(command)
    deadline = time.monotonic() + 20
    while not (port_file.exists() and port_file.read_text()):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("the minimal-work server did not start")
        time.sleep(0.02)
    scheme = "https" if cert is not None else "http"
    return process, f"{scheme}://127.0.0.1:{port_file.read_text()}"


@contextlib.asynccontextmanager
async def minimal_server(args: argparse.Namespace, tmp: Path,
                         ssl_context: ssl.SSLContext | None, cert: tuple[Path, Path] | None
                         ) -> AsyncIterator[tuple[aiohttp.ClientSession, int]]:
    """``benchmarks/minimal_server.py`` running, the minimal-work ceiling: a session to it
    and its PID."""
    process, url = start_minimal(tmp, cert)
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + 4, ssl=ssl_context or False)
        async with aiohttp.ClientSession(base_url=url, connector=connector) as s:
            yield s, process.pid
    finally:
        process.terminate()
        process.wait(timeout=15)


async def raw_ceiling(storage: str, n: int, concurrency: int,
                      etcd: tuple[list[str], str] = ([], "")) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        if storage == "etcd":
            endpoints, prefix = etcd
            config = StorageConfig(kind="etcd", endpoints=tuple(endpoints),
                                   prefix=prefix + "/ceiling")
        elif storage == "sqlite":
            config = StorageConfig(kind="sqlite", path=Path(tmp) / "raw.db")
        else:
            config = StorageConfig(kind="memory")
        backend = create_backend(config)
        await backend.start()
        try:
            counter = iter(range(n))

            async def worker() -> None:
                for i in counter:
                    await backend.create(f"/registry/bench/items/default/item-{i:06d}",
                                         orjson.dumps(item(i)))

            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return time.perf_counter() - started
        finally:
            await backend.close()


async def raw_etcd_puts(endpoint: str, prefix: str, n: int, concurrency: int) -> float:
    """N plain puts of the same values with aetcd's own client: etcd's ceiling for writes."""
    import aetcd  # type: ignore[import-untyped]

    address = urllib.parse.urlsplit(endpoint)
    async with aetcd.Client(host=address.hostname or "127.0.0.1",
                            port=address.port or 2379) as client:
        counter = iter(range(n))

        async def worker() -> None:
            for i in counter:
                await client.put(f"{prefix}/puts/item-{i:06d}".encode(),
                                 orjson.dumps(item(i)))

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        await client.delete_prefix(f"{prefix}/".encode())
        return seconds


@contextlib.contextmanager
def etcd_for(args: argparse.Namespace, tmp: Path) -> Iterator[tuple[list[str], str, str]]:
    """``(endpoints, prefix, version)``: the given cluster under a fresh prefix, or a
    single-member etcd started here (with no prefix)."""
    if args.etcd_endpoints:
        endpoints = [e.strip() for e in args.etcd_endpoints.split(",") if e.strip()]
        yield endpoints, f"/setpoint-bench-{os.getpid()}", "external"
        return
    with etcd_server.running(tmp / "etcd") as server:
        version = server.status()["version"]
        yield [server.endpoint], "", version


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if args.storage != "etcd":
            await measure(args, Path(tmp))
            return
        with etcd_for(args, Path(tmp)) as (endpoints, prefix, version):
            await measure(args, Path(tmp), (endpoints, prefix), version)


@dataclasses.dataclass
class Round:
    """N creates through the API and N through the minimal-work server, back to back."""

    seconds: float
    cpu: float  # the server's CPU seconds over its creates
    controllers_cpu: float  # its child processes' (the built-in controllers, as a process)
    minimal_seconds: float
    minimal_cpu: float  # the minimal-work server's
    client_cpu: float  # the load generator's CPU seconds over the API's creates
    minimal_client_cpu: float  # and over the minimal-work server's

    @property
    def share(self) -> float:
        """The API's creates/s as a share of the minimal-work server's, this round."""
        return self.minimal_seconds / self.seconds

    @property
    def cpu_share(self) -> float:
        """The share the CPU time alone allows: every process's CPU per create (load
        generator, server, the controllers' process), minimal over API. On a machine whose
        cores the load generator and the server share, creates/s follow it."""
        return (self.minimal_client_cpu + self.minimal_cpu) / \
            (self.client_cpu + self.cpu + self.controllers_cpu)


@dataclasses.dataclass
class Figures:
    rounds: list[Round]
    latencies: list[float]
    minimal_latencies: list[float]
    lists: list[float]
    deliveries: list[Delivery]
    rss: float

    def median(self, measure: Callable[[Round], float]) -> float:
        return statistics.median(measure(r) for r in self.rounds)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid:
            found.append(int(stat.parent.name))
    return found


def children_cpu(pid: int) -> float:
    """CPU seconds of ``pid``'s child processes (the built-in controllers' process)."""
    total = 0.0
    for child in children(pid):
        with contextlib.suppress(OSError):
            total += cpu_seconds(child)
    return total


async def settle(pid: int, *, window: float = 0.5, quiet: float = 0.05,
                 limit: float = 60.0) -> float:
    """Wait until the server and its children (the controllers' process, the node agent)
    have finished starting: until, over ``window`` seconds, all of them together spent less
    than ``quiet`` of a core. Returns the seconds waited (at most ``limit``).

    Without it the creates are measured while the controllers' process still starts (imports,
    discovery, the first lists, the new CRD's informers), and that work is counted as theirs
    and competes with the server for the machine's cores."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    before = cpu_seconds(pid) + children_cpu(pid)
    while loop.time() - start < limit:
        await asyncio.sleep(window)
        now = cpu_seconds(pid) + children_cpu(pid)
        if now - before < quiet * window:
            break
        before = now
    return loop.time() - start


def serve_pid(server: ServeProcess, profiled: bool) -> int:
    """The ``setpoint serve`` process: the child of ``py-spy record`` when profiled."""
    if not profiled:
        return server.process.pid
    found = children(server.process.pid)
    if not found:
        raise RuntimeError("py-spy's child process not found")
    return found[0]


def stop(server: ServeProcess, pid: int) -> None:
    """Stop the server; under py-spy, stop the server itself so that py-spy writes."""
    if pid == server.process.pid:
        server.stop()
        return
    os.kill(pid, signal.SIGTERM)
    server.process.wait(timeout=60)


async def measure_api(args: argparse.Namespace, data: Path, secure: bool,
                      etcd: tuple[list[str], str]) -> Figures:
    """The API figures of one ``setpoint serve``: with TLS, client certificates and RBAC
    (``secure``, its default), or with ``--insecure-plain-http``; then the minimal-work
    ceiling, served the same way."""
    endpoints, prefix = etcd
    profile = Path(args.profile) / f"{'secure' if secure else 'plain'}.txt" \
        if args.profile else None
    py_spy = str(Path(sys.executable).parent / "py-spy")
    launcher = [py_spy, "record", "--format", "raw", "-r", "200", "-o", str(profile), "--"] \
        if profile is not None else []
    if profile is not None:
        profile.parent.mkdir(parents=True, exist_ok=True)
    server = start_serve(
        data, storage=args.storage, etcd_endpoints=endpoints, launcher=launcher, timeout=60,
        extra_args=[*(["--etcd-prefix", prefix] if prefix else []),
                    "--controllers-mode", args.controllers_mode,
                    *([] if secure else ["--insecure-plain-http"])])
    pid = serve_pid(server, profile is not None)
    ssl_context = server.ssl_context()
    watcher_counts = [int(w) for w in str(args.watchers).split(",") if w.strip()]
    try:
        connector = aiohttp.TCPConnector(limit=args.concurrency + 4, ssl=ssl_context or False)
        async with aiohttp.ClientSession(base_url=server.url, connector=connector) as s:
            async with s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                              data=orjson.dumps(CRD),
                              headers={"Content-Type": "application/json"}) as r:
                assert r.status == 201, await r.text()
            for _ in range(200):
                status, _ = await get_json(s, PATH + "?limit=1")
                if status == 200:
                    break
                await asyncio.sleep(0.02)
            waited = await settle(pid)
            print(f"  ({'TLS+RBAC' if secure else 'plain HTTP'}: the server's processes "
                  f"settled {waited:.1f} s after the CRD was served)", file=sys.stderr)
            cert = (data / "pki" / "apiserver.crt", data / "pki" / "apiserver.key") \
                if secure else None
            rounds: list[Round] = []
            latencies: list[float] = []
            minimal_latencies: list[float] = []
            async with minimal_server(args, data / "minimal", ssl_context, cert) as (m, mpid):
                for number in range(args.rounds):
                    api_first = number % 2 == 0  # taking turns, so that drift evens out
                    if not api_first:
                        minimal = await minimal_creates(m, mpid, args, number, pid)
                    await settle(pid)
                    cpu, controllers_cpu = cpu_seconds(pid), children_cpu(pid)
                    client_cpu = time.process_time()
                    seconds, lat = await create_all(s, args.n, args.concurrency,
                                                    first=number * args.n)
                    client_cpu = time.process_time() - client_cpu
                    cpu = cpu_seconds(pid) - cpu
                    # the controllers see the creates a little later: let them catch up
                    await settle(pid)
                    controllers_cpu = children_cpu(pid) - controllers_cpu
                    latencies += lat
                    if api_first:
                        minimal = await minimal_creates(m, mpid, args, number, pid)
                    minimal_latencies += minimal[1]
                    rounds.append(Round(seconds, cpu, controllers_cpu, minimal[0], minimal[2],
                                        client_cpu, minimal[3]))
            lists = await list_times(s, args.n * args.rounds)
            deliveries = [await watch_delivery(s, server.url, ssl_context, pid, count,
                                               args.updates) for count in watcher_counts]
        rss = peak_rss_mb(pid)
    finally:
        stop(server, pid)
    if profile is not None:
        print_profile(profile, secure)
    return Figures(rounds, latencies, minimal_latencies, lists, deliveries, rss)


async def minimal_creates(session: aiohttp.ClientSession, minimal_pid: int,
                          args: argparse.Namespace, number: int, serve_pid: int
                          ) -> tuple[float, list[float], float, float]:
    """Round ``number``'s N creates through the minimal-work server, once ``setpoint
    serve``'s processes are quiet: seconds, latencies, its CPU seconds, the load
    generator's."""
    await settle(serve_pid)
    cpu = cpu_seconds(minimal_pid)
    client_cpu = time.process_time()
    seconds, latencies = await create_all(session, args.n, args.concurrency,
                                          first=number * args.n)
    client_cpu = time.process_time() - client_cpu
    return seconds, latencies, cpu_seconds(minimal_pid) - cpu, client_cpu


def print_profile(path: Path, secure: bool, top: int = 30) -> None:
    """The functions py-spy found the server in: by own samples, and setpoint's by
    samples under them (lines folded into functions)."""
    own: collections.Counter[str] = collections.Counter()
    under: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [_function(f) for f in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            if "setpoint/" in frame:
                under[frame] += count
    print(f"\nprofile of the {'TLS+RBAC' if secure else 'plain HTTP'} server: {total} samples "
          f"(raw stacks in {path})")
    print("  own %   function")
    for frame, count in own.most_common(top):
        print(f"  {count / total * 100:5.1f}   {frame}")
    print("  under % setpoint function")
    for frame, count in under.most_common(top):
        print(f"  {count / total * 100:5.1f}   {frame}")


def _function(frame: str) -> str:
    """``name (path:line)`` as ``name (path)``, the path from ``site-packages/`` or
    ``src/`` on."""
    name, _, where = frame.partition(" (")
    path = where.rsplit(":", 1)[0]
    for anchor in ("site-packages/", "src/", "lib/python"):
        if anchor in path:
            path = path[path.index(anchor) + len(anchor):]
            break
    return f"{name} ({path})"


async def measure(args: argparse.Namespace, tmp: Path,
                  etcd: tuple[list[str], str] = ([], ""), etcd_version: str = "") -> None:
    endpoints, prefix = etcd
    modes = {"secure": [True], "plain": [False], "both": [True, False]}[args.security]
    figures = {}
    for secure in modes:
        mode_etcd = (endpoints, f"{prefix}/{'tls' if secure else 'plain'}") if endpoints \
            else etcd
        figures[secure] = await measure_api(args, tmp / ("secure" if secure else "plain"),
                                            secure, mode_etcd)
    raw_seconds = await raw_ceiling(args.storage, args.n, args.concurrency, etcd)
    put_seconds = await raw_etcd_puts(endpoints[0], prefix or "/bench-puts", args.n,
                                      args.concurrency) if endpoints else 0.0

    ceiling = f"{args.n / raw_seconds:,.0f} raw {args.storage} writes/s"
    if endpoints:
        ceiling = (f"{args.n / raw_seconds:,.0f} EtcdBackend creates/s, "
                   f"{args.n / put_seconds:,.0f} aetcd puts/s")

    names = [f"creates/s (API, concurrency {args.concurrency})",
             "create latency p50 / p99 (ms)",
             "minimal-work ceiling creates/s (same run)",
             "  its latency p50 / p99 (ms)",
             "API / minimal-work ceiling" + (" (rounds' range)" if args.rounds > 1 else ""),
             "server CPU per create: API / minimal (µs)",
             "minimal / API server CPU per create",
             "  controllers' process CPU per create (µs)",
             "load generator CPU per create: API / minimal (µs)",
             "share the CPU time allows (all processes)",
             f"list {args.n * args.rounds:,} (ms, best / median)"]
    first = next(iter(figures.values()))
    for d in first.deliveries:
        names += [f"watch delivery p50 / p99 (ms, {d.watchers:,} watchers)",
                  "  from the update's request p50 / p99 (ms)",
                  "  server CPU per update / per delivery (µs)"]
    names += ["server peak RSS (MiB)", "API / storage ceiling"]

    def rows(f: Figures) -> list[str]:
        shares = sorted(r.share * 100 for r in f.rounds)
        spread = f" ({shares[0]:.0f}-{shares[-1]:.0f})" if len(shares) > 1 else ""
        seconds = f.median(lambda r: r.seconds)
        cells = [f"{args.n / seconds:,.0f}",
                 f"{pct(f.latencies, 50) * 1e3:.1f} / {pct(f.latencies, 99) * 1e3:.1f}",
                 f"{args.n / f.median(lambda r: r.minimal_seconds):,.0f}",
                 f"{pct(f.minimal_latencies, 50) * 1e3:.1f} / "
                 f"{pct(f.minimal_latencies, 99) * 1e3:.1f}",
                 f"{statistics.median(shares):.0f} %{spread}",
                 f"{f.median(lambda r: r.cpu) / args.n * 1e6:.0f} / "
                 f"{f.median(lambda r: r.minimal_cpu) / args.n * 1e6:.0f}",
                 f"{f.median(lambda r: r.minimal_cpu / r.cpu) * 100:.0f} %",
                 f"{f.median(lambda r: r.controllers_cpu) / args.n * 1e6:.0f}",
                 f"{f.median(lambda r: r.client_cpu) / args.n * 1e6:.0f} / "
                 f"{f.median(lambda r: r.minimal_client_cpu) / args.n * 1e6:.0f}",
                 f"{f.median(lambda r: r.cpu_share) * 100:.0f} %",
                 f"{min(f.lists) * 1e3:.0f} / {statistics.median(f.lists) * 1e3:.0f}"]
        for d in f.deliveries:
            per_update = d.cpu_seconds / max(d.updates, 1) * 1e6
            per_delivery = d.cpu_seconds / max(len(d.delays), 1) * 1e6
            cells += [f"{pct(d.delays, 50) * 1e3:.1f} / {pct(d.delays, 99) * 1e3:.1f}",
                      f"{pct(d.from_request, 50) * 1e3:.1f} / "
                      f"{pct(d.from_request, 99) * 1e3:.1f}",
                      f"{per_update:,.0f} / {per_delivery:,.1f}"]
        cells += [f"{f.rss:.0f}", f"{raw_seconds / seconds * 100:.0f} %"]
        return cells

    columns = {secure: rows(f) for secure, f in figures.items()}
    width = max(len(n) for n in names)
    print(f"setpoint API benchmark: storage={args.storage} n={args.n} "
          f"concurrency={args.concurrency} rounds={args.rounds} watchers={args.watchers} "
          f"updates={args.updates} "
          f"controllers={args.controllers_mode}"
          + (" profiled" if args.profile else "")
          + (f" etcd={etcd_version}" if etcd_version else ""))
    header = "".join(f"  {('TLS+RBAC' if secure else 'plain HTTP'):>14}" for secure in columns)
    print(f"{'measure':<{width}}{header}  storage ceiling (same run)")
    for i, name in enumerate(names):
        cells = "".join(f"  {columns[secure][i]:>14}" for secure in columns)
        print(f"{name:<{width}}{cells}  {ceiling if i == 0 else ''}")
    if len(figures) == 2:
        cost = figures[True].median(lambda r: r.seconds) / \
            figures[False].median(lambda r: r.seconds)
        print(f"TLS, authentication and RBAC: creates take {cost:.2f}x the time of plain HTTP "
              "(same run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of N creates through the API and N through the "
                        "minimal-work server, taking turns (medians and the range of the "
                        "share are printed)")
    parser.add_argument("--watchers", default="1,100",
                        help="watcher counts measured one after the other (the first is the "
                        "baseline), comma-separated")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--storage", choices=("sqlite", "memory", "etcd"), default="sqlite")
    parser.add_argument("--controllers-mode", choices=("process", "inline"), default="process")
    parser.add_argument("--security", choices=("secure", "plain", "both"), default="both",
                        help="measure setpoint serve as it starts (TLS, client certificates, "
                        "RBAC), with --insecure-plain-http, or both side by side (default)")
    parser.add_argument("--etcd-endpoints", default="",
                        help="with --storage etcd: use this cluster (comma-separated client "
                        "URLs) under a fresh prefix instead of starting an etcd")
    parser.add_argument("--profile", default="",
                        help="a directory: run the servers under py-spy record and print "
                        "where their time went")
    args = parser.parse_args()
    # 1,000 watchers and the client's own connections need more than 1,024 descriptors
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(run(args))


if __name__ == "__main__":
    main()
