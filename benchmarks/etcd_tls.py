"""What TLS with client certificates costs the etcd backend, beside plain etcd, in one run.

Two single-member etcds started here (``etcd`` on the PATH, or ``$SETPOINT_TEST_ETCD``): one
plain, one serving clients over TLS with ``--client-cert-auth`` (certificates made with
``setpoint.pki``). Against each, through ``EtcdBackend`` (what every API request does):
N creates (compare-and-swap transactions) with C concurrent tasks, then N linearizable gets,
then the time from ``start()`` to the first answer (a new channel: TCP, and for TLS the
handshake). Each phase runs ``--rounds`` times, alternating plain and TLS, best and median
reported, so that other load on the machine hits both alike.

    python benchmarks/etcd_tls.py [--n 5000] [--concurrency 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.integration.storage import etcd_server  # noqa: E402

from setpoint.storage import Backend, StorageConfig, create_backend  # noqa: E402

VALUE = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"k":"' + \
    b"v" * 200 + b'"}}'


async def concurrently(n: int, concurrency: int, call: Callable[[int], Awaitable[object]]
                       ) -> float:
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await call(i)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def one_round(config: StorageConfig, round_: int, n: int, concurrency: int
                    ) -> tuple[float, float, float]:
    """(creates/s, gets/s, seconds from start() to the first answer)."""
    backend: Backend = create_backend(config)
    started = time.perf_counter()
    await backend.start()  # connects and asks etcd for its version and revision
    first = time.perf_counter() - started
    try:
        prefix = f"/registry/bench/r{round_}/"
        created = await concurrently(n, concurrency,
                                     lambda i: backend.create(f"{prefix}{i:06d}", VALUE))
        read = await concurrently(n, concurrency, lambda i: backend.get(f"{prefix}{i:06d}"))
    finally:
        await backend.close()
    return n / created, n / read, first


def row(name: str, values: list[float], unit: str, best: float) -> str:
    return (f"  {name:<5} best {best:>9,.1f} {unit}   "
            f"median {statistics.median(values):>9,.1f} {unit}")


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        pki = etcd_server.EtcdPKI.create(Path(tmp) / "pki")
        ca_file, cert_file, key_file = pki.client_files()
        with etcd_server.running(Path(tmp) / "plain") as plain, \
                etcd_server.running(Path(tmp) / "tls", pki=pki) as secure:
            configs = {
                "plain": StorageConfig(kind="etcd", endpoints=(plain.endpoint,)),
                "tls": StorageConfig(kind="etcd", endpoints=(secure.endpoint,),
                                     ca_file=ca_file, cert_file=cert_file, key_file=key_file),
            }
            results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in configs}
            for round_ in range(args.rounds):
                for name, config in configs.items():
                    results[name].append(await one_round(config, round_, args.n,
                                                         args.concurrency))
            version = plain.status()["version"]
    print(f"etcd {version}, {args.n} operations, concurrency {args.concurrency}, "
          f"{args.rounds} rounds (ECDSA P-256 certificates, TLS 1.3)")
    for title, index, unit, scale in (("creates", 0, "/s", 1.0), ("gets", 1, "/s", 1.0),
                                      ("start to first answer", 2, "ms", 1e3)):
        print(title)
        for name, values in results.items():
            column = [r[index] * scale for r in values]
            # throughput: the highest is best; a start: the shortest
            print(row(name, column, unit, min(column) if index == 2 else max(column)))
        plain_median = statistics.median(r[index] for r in results["plain"])
        tls_median = statistics.median(r[index] for r in results["tls"])
        print(f"  tls/plain (median) {tls_median / plain_median:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if etcd_server.BINARY is None:
        sys.exit(etcd_server.MISSING)
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
