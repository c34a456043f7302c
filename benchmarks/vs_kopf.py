"""The same operator written with kopf and with ``setpoint.runtime``, side by side.

The operator: for every ``Thing`` of its namespace, set ``status.phase`` to ``Ready`` (through
the status subresource) unless it already is. Written idiomatically in both: a kopf
``on.create`` handler that sets ``patch.status``; a setpoint controller that reads the
object from its cache and patches the status. Neither reacts to a change of status alone:
kopf's handlers see only the object's essence (status left out), and the setpoint controller
filters updates with ``generation_changed`` (controller-runtime's idiom for a controller that
writes its own status), so the echo of its own status write is dropped before it queues.

One ``setpoint serve`` process (a fresh data directory, port 0) serves every trial. For each
N and each operator, in a namespace of its own: N things are created first, then the
operator starts as a process of its own (uvloop for both; kopf through ``kopf.run``, setpoint
through the runner ``setpoint run`` uses); the benchmark watches the
namespace and stops the clock when every thing is ``Ready``. Each trial runs ``--repeat``
times, the operators taking turns to go first; the table shows medians. Reported per
operator:

* seconds from starting the operator process until all N are reconciled, and how much of
  that passed before the first one was (interpreter start, imports, login, discovery,
  the first list);
* reconciled objects per second after the first;
* the operator's CPU seconds (user + system) and peak RSS, read from ``/proc`` at the
  moment the last object was reconciled; the CPU seconds already spent when the first was
  (start, imports, login, the first list), and the CPU per object after the first (the
  runtime's cost per reconcile, robust on a shared machine);
* the server's CPU seconds over the same interval (what the operator's requests cost it).

    python benchmarks/vs_kopf.py [--n 500,2000] [--workers 16] [--repeat 3] [--storage sqlite]
                                 [--profile DIR]

``--profile DIR`` samples each operator process with py-spy (``DIR/OPERATOR-N-TRIAL.txt``,
raw folded stacks); the CPU figures are then those of profiled processes.

``--external`` runs the other pair instead: an operator of something *outside* the cluster,
the queue operator of ``examples/queue-operator`` (a ``Queue`` object is a queue in a fake
queue service that counts the calls it receives), written idiomatically in both: kopf
``on.create``/``on.update``/``on.delete`` handlers and a ``kopf.timer`` per object for the
drift check; setpoint's example operator (a budget, a poll cadence, a finalizer). N Queues
are created first, then the operator starts; reported: seconds until the service holds all
N queues, the service's calls per object until then, the most calls it received in any
one second, and the calls per object over ``--settle`` more seconds (the polls; both poll
every ``--poll`` seconds). setpoint's budget is ``--rate`` calls/s (burst ``--rate``/4);
kopf has no budget.

    python benchmarks/vs_kopf.py --external [--n 200,1000] [--rate 200] [--poll 30]

The last column says how many times better setpoint did (kopf's figure over setpoint's,
or the other way round for a rate).

Both operators start from byte-compiled modules: kopf's were compiled when pip installed it,
and the benchmark compiles setpoint's (``src/setpoint``, what an install would have done)
before the first trial, as a checkout run with ``PYTHONDONTWRITEBYTECODE`` may have none;
otherwise each setpoint start would compile its sources again, about 0.1 s of CPU counted
against it.

``--workers`` is the setpoint controller's concurrency (its default is 2); kopf handles
every object in a task of its own, without a limit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

# aiohttp and yaml are imported where the benchmark itself uses them: the operators run this
# file as their process, and what it imports at the top counts in their CPU and RSS
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

if TYPE_CHECKING:
    import aiohttp
    from tests.conftest import ServeProcess

GROUP = "bench.example.com"
PLURAL = "things"
THING = (f"{GROUP}/v1", "Thing")
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "thing", "kind": "Thing"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "properties": {
                                   "spec": {"type": "object", "properties": {
                                       "size": {"type": "integer"}}},
                                   "status": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True,
                                              "properties": {
                                                  "phase": {"type": "string"}}}}}}}]},
}
OPERATORS = ("kopf", "setpoint")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- the two operators (each runs in a process of its own) --------------------------------------


def run_kopf(namespace: str) -> None:
    import kopf

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        return kopf.login_with_kubeconfig(**kwargs)

    @kopf.on.create(GROUP, "v1", PLURAL, registry=registry)
    def ready(patch: Any, **_: Any) -> None:
        patch.status["phase"] = "Ready"

    kopf.run(loop=_new_loop(), registry=registry, standalone=True, namespaces=[namespace])


def run_setpoint(namespace: str, kubeconfig: str, workers: int) -> None:
    from setpoint.client import Client, load_kubeconfig
    from setpoint.runtime import Context, Manager, Registry, Request, Result, generation_changed

    registry = Registry()

    @registry.controller(for_=THING, workers=workers, namespace=namespace,
                         predicates=[generation_changed])
    async def reconcile(request: Request, ctx: Context) -> Result:
        thing = ctx.get(request)
        if thing is not None and (thing.get("status") or {}).get("phase") != "Ready":
            await ctx.client.patch_status(THING, request.name, {"status": {"phase": "Ready"}},
                                          namespace=request.namespace)
        return Result.done()

    async def main() -> None:
        async with Client(load_kubeconfig(kubeconfig)) as client:
            await Manager(client, registry).run()

    # the runner ``setpoint run`` uses (uvloop, the collector set for a long-running process)
    from setpoint.process import eventloop

    with contextlib.suppress(KeyboardInterrupt):
        eventloop.run(main())


QUEUE_EXAMPLE = ROOT / "examples" / "queue-operator"


def run_kopf_external(namespace: str, service: str, poll: float) -> None:
    import aiohttp as http_client
    import kopf

    registry = kopf.OperatorRegistry()
    base = service.rstrip("/")

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        return kopf.login_with_kubeconfig(**kwargs)

    async def put(name: str, spec: Any) -> dict[str, Any]:
        async with http_client.ClientSession() as session, session.put(
                f"{base}/queues/{namespace}-{name}",
                json={"visibilityTimeout": spec.get("visibilityTimeout", 30)}) as response:
            if response.status == 429 or response.status >= 500:
                raise kopf.TemporaryError(f"{response.status}", delay=5)
            body: dict[str, Any] = await response.json()
            return {"url": body["url"]}

    @kopf.on.create("messaging.example.com", "v1", "queues", registry=registry)
    async def create(name: str, spec: Any, **_: Any) -> dict[str, Any]:
        return await put(name, spec)

    @kopf.on.update("messaging.example.com", "v1", "queues", field="spec", registry=registry)
    async def update(name: str, spec: Any, **_: Any) -> dict[str, Any]:
        return await put(name, spec)

    # initial_delay: the first drift check one interval after the start, as setpoint's
    # poll cadence does (kopf's default runs a timer at once, one more call per object)
    @kopf.timer("messaging.example.com", "v1", "queues", interval=poll, initial_delay=poll,
                registry=registry)
    async def drift(name: str, spec: Any, **_: Any) -> None:
        await put(name, spec)

    @kopf.on.delete("messaging.example.com", "v1", "queues", registry=registry)
    async def delete(name: str, **_: Any) -> None:
        async with http_client.ClientSession() as session, session.delete(
                f"{base}/queues/{namespace}-{name}"):
            pass

    kopf.run(loop=_new_loop(), registry=registry, standalone=True, namespaces=[namespace])


def run_setpoint_external(namespace: str, kubeconfig: str, workers: int, service: str,
                          poll: float, rate: float) -> None:
    # the operator file is loaded as `setpoint run` loads it (setpoint.testing would import
    # the whole server, about a second of CPU counted against the operator)
    from setpoint.cli.run import load_target
    from setpoint.client import Client, load_kubeconfig
    from setpoint.runtime import BudgetConfig, Manager

    example = load_target(QUEUE_EXAMPLE / "operator.py", add_to_path=False)
    registry = example.build(service, poll=poll)
    for controller in registry:
        controller.with_options(workers=workers, namespace=namespace)
    budget = BudgetConfig(rate=rate, burst=max(1, int(rate / 4)), concurrency=workers)

    async def main() -> None:
        async with Client(load_kubeconfig(kubeconfig)) as client:
            await Manager(client, registry, budgets={example.TARGET: budget}).run()

    # the runner ``setpoint run`` uses (uvloop, the collector set for a long-running process)
    from setpoint.process import eventloop

    with contextlib.suppress(KeyboardInterrupt):
        eventloop.run(main())


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.new_event_loop()
    loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def _start_serve(data: Path, *, storage: str) -> ServeProcess:
    # imported here, not at the top: the operators run this file as their process, and the
    # test fixtures import the whole server, which would count in the operators' CPU and RSS
    from tests.conftest import start_serve

    return start_serve(data, storage=storage)


# --- measuring ------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def call(http: aiohttp.ClientSession, method: str, path: str, body: Any = None,
               content_type: str = "application/json") -> Any:
    data = orjson.dumps(body) if body is not None else None
    async with http.request(method, path, data=data,
                            headers={"Content-Type": content_type}) as response:
        payload = await response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {payload[:300]!r}")
        return orjson.loads(payload)


async def install_crd(http: aiohttp.ClientSession) -> None:
    await call(http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    async with asyncio.timeout(10):
        while True:
            async with http.get(f"/apis/{GROUP}/v1/{PLURAL}") as response:
                if response.status == 200:
                    return
            await asyncio.sleep(0.02)


async def populate(http: aiohttp.ClientSession, namespace: str, n: int,
                   concurrency: int = 16) -> None:
    await call(http, "POST", "/api/v1/namespaces",
               {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}"
    counter = iter(range(n))

    async def create() -> None:
        for i in counter:
            await call(http, "POST", path, {
                "apiVersion": f"{GROUP}/v1", "kind": "Thing",
                "metadata": {"name": f"thing-{i:05d}"}, "spec": {"size": i}})

    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(create())


async def wait_all_ready(http: aiohttp.ClientSession, namespace: str, n: int,
                         started: float, timeout: float,
                         on_first: Callable[[], None] = lambda: None) -> tuple[float, float]:
    """Seconds (since ``started``) until the first and until the last thing is Ready;
    ``on_first`` is called when the first is seen."""
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}"
    listed = await call(http, "GET", path)
    ready = {i["metadata"]["name"] for i in listed["items"]
             if (i.get("status") or {}).get("phase") == "Ready"}
    first = time.perf_counter() - started if ready else None
    if ready:
        on_first()
    rv = listed["metadata"]["resourceVersion"]
    async with asyncio.timeout(timeout):
        while len(ready) < n:
            watch = f"{path}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true"
            import aiohttp

            async with http.get(watch, timeout=aiohttp.ClientTimeout(total=None)) as response:
                async for line in response.content:
                    event = orjson.loads(line)
                    obj = event["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if event["type"] in ("ADDED", "MODIFIED") and \
                            (obj.get("status") or {}).get("phase") == "Ready":
                        ready.add(obj["metadata"]["name"])
                        if first is None:
                            first = time.perf_counter() - started
                            on_first()
                        if len(ready) == n:
                            break
    last = time.perf_counter() - started
    return (first if first is not None else last), last


async def trial(server: ServeProcess, http: aiohttp.ClientSession, operator: str, n: int,
                args: argparse.Namespace, attempt: int) -> dict[str, float]:
    namespace = f"{operator}-{n}-{attempt}"
    await populate(http, namespace, n)
    env = {**os.environ, "KUBECONFIG": str(server.kubeconfig)}
    command = [sys.executable, __file__, "--child", operator, "--namespace", namespace,
               "--kubeconfig", str(server.kubeconfig), "--workers", str(args.workers)]
    server_cpu = cpu_seconds(server.process.pid)
    started = time.perf_counter()
    child = await asyncio.create_subprocess_exec(*command, env=env,
                                                 stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.PIPE)
    profiler = await _profile(child.pid, args, f"{operator}-{n}-{attempt}")
    at_first: list[float] = []
    try:
        first, last = await wait_all_ready(
            http, namespace, n, started, args.timeout,
            on_first=lambda: at_first.append(cpu_seconds(child.pid)))
        cpu = cpu_seconds(child.pid)
        result = {"seconds": last, "first": first,
                  "per_second": (n - 1) / (last - first) if last > first else float("nan"),
                  "cpu": cpu, "cpu_first": at_first[0],
                  "cpu_per_object": (cpu - at_first[0]) / (n - 1) * 1e6,
                  "rss": peak_rss_mib(child.pid),
                  "server_cpu": cpu_seconds(server.process.pid) - server_cpu}
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(15):
                _, errors = await child.communicate()
        except TimeoutError:
            child.kill()
            _, errors = await child.communicate()
        if profiler is not None:
            await profiler.wait()  # it ends with the process it sampled
    if child.returncode not in (0, -signal.SIGTERM) and b"Traceback" in errors:
        print(errors.decode()[-2000:], file=sys.stderr)
    return result


async def _profile(pid: int, args: argparse.Namespace, name: str
                   ) -> asyncio.subprocess.Process | None:
    """``--profile DIR``: py-spy (beside this Python) samples the operator process into
    ``DIR/NAME.txt`` (raw folded stacks) until it ends; the CPU figures are then a profiled
    process's."""
    if not args.profile:
        return None
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once per trial, before it
    py_spy = str(Path(sys.executable).parent / "py-spy")
    return await asyncio.create_subprocess_exec(
        py_spy, "record", "--format", "raw", "-r", "200", "-o", str(out / f"{name}.txt"),
        "--pid", str(pid), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.n.split(",")]
    runs: dict[tuple[int, str], list[dict[str, float]]] = {}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        server = _start_serve(Path(tmp) / "data", storage=args.storage)
        try:
            # as the admin, over TLS with its client certificate (serve is secure by default)
            async with server.session() as http:
                await install_crd(http)
                for n in sizes:
                    for attempt in range(args.repeat):
                        order = OPERATORS if attempt % 2 == 0 else OPERATORS[::-1]
                        for operator in order:
                            runs.setdefault((n, operator), []).append(
                                await trial(server, http, operator, n, args, attempt))
                            await asyncio.sleep(1)
        finally:
            server.stop()
    results = {key: {measure: statistics.median(r[measure] for r in trials)
                     for measure in trials[0]} for key, trials in runs.items()}
    report(sizes, results, args, load)


def _fake_queue_service() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_fakequeues",
                                                  QUEUE_EXAMPLE / "fakequeues.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FakeQueueService()


async def external_trial(server: ServeProcess, http: aiohttp.ClientSession, operator: str,
                         n: int, args: argparse.Namespace, attempt: int) -> dict[str, float]:
    namespace = f"x{operator}-{n}-{attempt}"
    service = _fake_queue_service()
    await service.start()
    try:
        await call(http, "POST", "/api/v1/namespaces",
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        path = f"/apis/messaging.example.com/v1/namespaces/{namespace}/queues"
        counter = iter(range(n))

        async def create() -> None:
            for i in counter:
                await call(http, "POST", path, {
                    "apiVersion": "messaging.example.com/v1", "kind": "Queue",
                    "metadata": {"name": f"q{i:05d}"}, "spec": {"visibilityTimeout": 30}})

        async with asyncio.TaskGroup() as group:
            for _ in range(16):
                group.create_task(create())
        command = [sys.executable, __file__, "--child", f"{operator}-external",
                   "--namespace", namespace, "--kubeconfig", str(server.kubeconfig),
                   "--workers", str(args.workers), "--service", service.url,
                   "--poll", str(args.poll), "--rate", str(args.rate)]
        env = {**os.environ, "KUBECONFIG": str(server.kubeconfig)}
        started = time.perf_counter()
        child = await asyncio.create_subprocess_exec(*command, env=env,
                                                     stdout=subprocess.DEVNULL,
                                                     stderr=subprocess.PIPE)
        try:
            async with asyncio.timeout(args.timeout):
                while True:
                    if len(service.queues) >= n:
                        break
                    await asyncio.sleep(0.01)
            converged = time.perf_counter() - started
            calls_converged = service.total
            window = service.max_in_window
            await asyncio.sleep(args.settle)
            result = {"seconds": converged, "calls": calls_converged / n,
                      "window": float(window),
                      "settle_calls": (service.total - calls_converged) / n,
                      "cpu": cpu_seconds(child.pid)}
        finally:
            child.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(15):
                    _, errors = await child.communicate()
            except TimeoutError:
                child.kill()
                _, errors = await child.communicate()
        if child.returncode not in (0, -signal.SIGTERM) and b"Traceback" in errors:
            print(errors.decode()[-2000:], file=sys.stderr)
        return result
    finally:
        await service.stop()


async def run_external(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.n.split(",")]
    runs: dict[tuple[int, str], list[dict[str, float]]] = {}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        server = _start_serve(Path(tmp) / "data", storage=args.storage)
        try:
            async with server.session() as http:
                import yaml

                for doc in yaml.safe_load_all((QUEUE_EXAMPLE / "crd.yaml").read_text()):
                    await call(http, "POST",
                               "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
                async with asyncio.timeout(10):
                    while True:
                        async with http.get("/apis/messaging.example.com/v1/queues") as r:
                            if r.status == 200:
                                break
                        await asyncio.sleep(0.02)
                for n in sizes:
                    for attempt in range(args.repeat):
                        order = OPERATORS if attempt % 2 == 0 else OPERATORS[::-1]
                        for operator in order:
                            runs.setdefault((n, operator), []).append(
                                await external_trial(server, http, operator, n, args,
                                                     attempt))
                            await asyncio.sleep(1)
        finally:
            server.stop()
    results = {key: {measure: statistics.median(r[measure] for r in trials)
                     for measure in trials[0]} for key, trials in runs.items()}
    rows = [
        ("seconds until all queues exist", "seconds", ".1f"),
        ("upstream calls per object", "calls", ".2f"),
        ("most upstream calls in 1 s", "window", ".0f"),
        (f"calls per object, next {args.settle:g} s", "settle_calls", ".2f"),
        ("operator CPU seconds", "cpu", ".1f"),
    ]
    width = max(len(label) for label, _, _ in rows)
    print(f"kopf vs setpoint.runtime, an external-resource operator (fake queue service): "
          f"one setpoint serve ({args.storage}), operators as processes (uvloop), "
          f"setpoint workers={args.workers} and budget {args.rate:g}/s, kopf unbudgeted, "
          f"poll {args.poll:g} s in both, median of {args.repeat}, Python "
          f"{sys.version.split()[0]}, load average {load:.1f} at the start")
    for n in sizes:
        kopf, mine = results[(n, "kopf")], results[(n, "setpoint")]
        print(f"\nN = {n:,}")
        print(f"{'':<{width}}  {'kopf':>9}  {'setpoint':>9}")
        for label, key, fmt in rows:
            print(f"{label:<{width}}  {kopf[key]:>9{fmt}}  {mine[key]:>9{fmt}}")


def report(sizes: list[int], results: dict[tuple[int, str], dict[str, float]],
           args: argparse.Namespace, load: float) -> None:
    # (label, measure, format, higher is better)
    rows = [
        ("seconds until all reconciled", "seconds", ".1f", False),
        ("  of which before the first", "first", ".1f", False),
        ("reconciled/s after the first", "per_second", ",.0f", True),
        ("operator CPU seconds", "cpu", ".2f", False),
        ("  of which before the first", "cpu_first", ".2f", False),
        ("  µs per object after the first", "cpu_per_object", ",.0f", False),
        ("operator peak RSS (MiB)", "rss", ".0f", False),
        ("server CPU seconds", "server_cpu", ".1f", False),
    ]
    width = max(len(label) for label, _, _, _ in rows)
    print(f"kopf vs setpoint.runtime: one setpoint serve ({args.storage}), operators as "
          f"processes (uvloop), setpoint workers={args.workers}, median of {args.repeat}, "
          f"Python {sys.version.split()[0]}, load average {load:.1f} at the start")
    for n in sizes:
        kopf, mine = results[(n, "kopf")], results[(n, "setpoint")]
        print(f"\nN = {n:,}")
        print(f"{'':<{width}}  {'kopf':>9}  {'setpoint':>9}  {'setpoint better':>15}")
        for label, key, fmt, higher in rows:
            worse, better = (kopf[key], mine[key]) if not higher else (mine[key], kopf[key])
            ratio = worse / better if better else float("nan")
            print(f"{label:<{width}}  {kopf[key]:>9{fmt}}  {mine[key]:>9{fmt}}  "
                  f"{ratio:>14.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", default="500,2000", help="comma-separated object counts")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--storage", default="sqlite", choices=("sqlite", "memory"))
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds an operator may take for one trial")
    parser.add_argument("--external", action="store_true",
                        help="the external-resource operator pair (see above)")
    parser.add_argument("--rate", type=float, default=200.0,
                        help="--external: setpoint's budget, calls per second")
    parser.add_argument("--poll", type=float, default=30.0,
                        help="--external: seconds between drift checks of one object")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="--external: seconds to keep counting after convergence")
    parser.add_argument("--profile", default="",
                        help="sample each operator process with py-spy into this directory")
    parser.add_argument("--service", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=(*OPERATORS, "kopf-external", "setpoint-external"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "kopf":
        run_kopf(args.namespace)
    elif args.child == "setpoint":
        run_setpoint(args.namespace, args.kubeconfig, args.workers)
    elif args.child == "kopf-external":
        run_kopf_external(args.namespace, args.service, args.poll)
    elif args.child == "setpoint-external":
        run_setpoint_external(args.namespace, args.kubeconfig, args.workers, args.service,
                              args.poll, args.rate)
    else:
        compile_setpoint()
        asyncio.run(run_external(args) if args.external else run(args))


def compile_setpoint() -> None:
    """Byte-compile setpoint's modules where an install would (``__pycache__`` beside
    them), so that its operator does not compile them at every start (see the module)."""
    import compileall

    if not compileall.compile_dir(ROOT / "src" / "setpoint", quiet=1):
        raise RuntimeError("setpoint's sources did not compile")


if __name__ == "__main__":
    main()
