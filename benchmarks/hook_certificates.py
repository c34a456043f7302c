"""How long an operator's hooks wait for their serving certificate: a CA of their own made in
memory, against one the control plane issues through a CertificateSigningRequest (create,
approve, the csrsigning controller signs, read, delete), in the same run, side by side; and
how long a control plane without the serving signer takes to say so (the ClusterTrustBundle
list that finds none; before it, the hooks waited the 30 s timeout).

One secured in-process control plane (``setpoint.testing.control_plane(secure=True)``, the
csrsigning and root-CA controllers in the same event loop), an administrator's client.

    python benchmarks/hook_certificates.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from setpoint.pki import certs  # noqa: E402
from setpoint.runtime import hookcerts  # noqa: E402
from setpoint.testing import control_plane  # noqa: E402

CONTROLLERS = ("csrsigning", "root-ca-cert-publisher", "namespace", "serviceaccount")
HOSTS = ("127.0.0.1", "localhost")


def _row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))]
    return (f"| {name} | {statistics.median(ordered) * 1000:.1f} | {p90 * 1000:.1f} | "
            f"{len(ordered)} |")


async def main(rounds: int) -> None:
    log = logging.getLogger("benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        async with control_plane(tmp, controllers=CONTROLLERS, secure=True) as cp:
            own: list[float] = []
            cluster: list[float] = []
            config = hookcerts.CertificateConfig(poll_interval=0.01)
            # the signer publishes its ClusterTrustBundle once the controllers run
            await cp.wait_for(("certificates.k8s.io/v1beta1", "ClusterTrustBundle"),
                              "setpoint.dev:serving:cluster-ca")
            for i in range(rounds):
                started = time.perf_counter()
                now = dt.datetime.now(dt.UTC)
                ca = certs.new_ca("bench-ca", now=now)
                certs.issue(ca, common_name="bench", usage="server", now=now, hosts=HOSTS)
                own.append(time.perf_counter() - started)
                started = time.perf_counter()
                issued = await hookcerts.cluster_certificate(
                    cp.client, name=f"bench-{i}", hosts=HOSTS, config=config, log=log)
                cluster.append(time.perf_counter() - started)
                assert issued is not None, "the control plane issued no certificate"
        async with control_plane(Path(tmp) / "unsigned", controllers=CONTROLLERS[2:],
                                 secure=True) as cp:
            absent: list[float] = []
            for i in range(rounds):
                started = time.perf_counter()
                refused = await hookcerts.cluster_certificate(
                    cp.client, name=f"bench-{i}", hosts=HOSTS, config=config, log=log)
                absent.append(time.perf_counter() - started)
                assert refused is None, "a control plane without the signer issued one"
    print("| serving certificate | median ms | p90 ms | rounds |")
    print("|---|---|---|---|")
    print(_row("own CA, made in memory", own))
    print(_row("issued by the control plane (CSR)", cluster))
    print(_row("no signer: fall back (no ClusterTrustBundle)", absent))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args().rounds))
