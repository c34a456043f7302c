"""What decoding a protobuf request body costs, beside decoding the same object sent as JSON.

Objects: bodies the real kubectl sends (``tests/unit/apimachinery/kubectl-protobuf-bodies.json``:
a ConfigMap, a ServiceAccount, a RoleBinding, a Deployment) and, written by the test encoder as
client-go writes them, a Pod of three containers (probes, env, ports, resources, volumes) and
a CustomResourceDefinition with a realistic 40-field schema (``benchmarks/schema.py``'s).

For each, best of several rounds, in microseconds per object:

* ``protobuf.decode`` of the body (what the server does for
  ``application/vnd.kubernetes.protobuf``);
* ``decoding.decode_json`` of the same object's JSON (what it does for ``application/json``).

Also printed: loading the decoder's tables (once per process, on the first protobuf body), and
with ``--http``, sequential creates of ConfigMaps through an in-process server (memory storage)
sent either way, rounds alternating, so the decode can be set against the whole write.

    python benchmarks/protobuf.py [--rounds 5] [--http 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.schema import SCHEMA  # noqa: E402
from tests.protobuf_encoder import Encoder  # noqa: E402

from setpoint.apimachinery import decoding, protobuf  # noqa: E402
from setpoint.apimachinery.prototables import Tables  # noqa: E402

BODIES = ROOT / "tests/unit/apimachinery/kubectl-protobuf-bodies.json"
FROM_KUBECTL = ("configmap-from-literal", "serviceaccount", "rolebinding", "deployment")


def container(i: int) -> dict[str, Any]:
    return {"name": f"c{i}", "image": f"registry.example.com/app-{i}:1.2.3",
            "command": ["/bin/app"], "args": ["--port=8080", f"--id={i}"],
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "production"},
                    {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                               "fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                          "requests": {"cpu": "100m", "memory": "64Mi"}},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                              "periodSeconds": 10},
            "readinessProbe": {"tcpSocket": {"port": "http"}, "initialDelaySeconds": 2},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}


POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-7d4b9c-x2x9z", "namespace": "default",
                    "labels": {"app": "web", "pod-template-hash": "7d4b9c"},
                    "annotations": {"example.com/owner": "team-a"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                         "name": "web-7d4b9c", "uid": "0c1d2e3f",
                                         "controller": True, "blockOwnerDeletion": True}]},
       "spec": {"volumes": [{"name": "config", "configMap": {"name": "web-config"}}],
                "containers": [container(i) for i in range(3)], "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                "serviceAccountName": "web", "nodeName": "node-1",
                "securityContext": {"runAsNonRoot": True},
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]},
       "status": {}}

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "things.bench.example.com"},
       "spec": {"group": "bench.example.com", "scope": "Namespaced",
                "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": SCHEMA}}]},
       "status": {"acceptedNames": {"plural": "", "kind": ""}}}


def best_per_call(rounds: int, calls: int, run: Callable[[], Any]) -> float:
    """Microseconds per call, best of ``rounds`` rounds of ``calls`` calls."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append(time.perf_counter() - start)
    return min(times) / calls * 1e6


def samples() -> list[tuple[str, bytes]]:
    captured = {c["name"]: bytes.fromhex(c["body"])
                for c in json.loads(BODIES.read_text())["bodies"]}
    out = [(f"{name} (kubectl)", captured[name]) for name in FROM_KUBECTL]
    encoder = Encoder()
    out.append(("pod, 3 containers", encoder.body(POD)))
    out.append(("CRD, 40-field schema", encoder.body(CRD)))
    return out


def measure_decoding(rounds: int) -> None:
    start = time.perf_counter()
    Tables.load()
    load_ms = (time.perf_counter() - start) * 1e3
    print(f"loading the tables (once per process): {load_ms:.1f} ms")
    print()
    print(f"{'object':<33} {'protobuf B':>10} {'JSON B':>8} {'protobuf µs':>12} "
          f"{'JSON µs':>8} {'ratio':>6}")
    for name, body in samples():
        obj = protobuf.decode(body)
        raw_json = orjson.dumps(obj)
        assert decoding.decode_json(raw_json) == obj
        calls = max(50, 200_000 // len(body))
        pb = best_per_call(rounds, calls, lambda body=body: protobuf.decode(body))
        js = best_per_call(rounds, calls, lambda raw=raw_json: decoding.decode_json(raw))
        print(f"{name:<33} {len(body):>10} {len(raw_json):>8} {pb:>12.1f} {js:>8.1f} "
              f"{pb / js:>5.1f}x")


async def measure_creates(creates: int, rounds: int) -> None:
    import aiohttp

    from setpoint.server.server import Server, ServerConfig
    from setpoint.storage import StorageConfig

    path = "/api/v1/namespaces/default/configmaps"
    types = {"json": "application/json", "protobuf": "application/vnd.kubernetes.protobuf"}
    encoder = Encoder()

    def body(kind: str, name: str) -> bytes:
        obj = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "labels": {"app": "bench"}},
               "data": {"key": "value", "other": "x" * 64}}
        return orjson.dumps(obj) if kind == "json" else encoder.body(obj)

    with tempfile.TemporaryDirectory() as tmp:
        config = ServerConfig(port=0, storage=StorageConfig(kind="memory"),
                              kubeconfig_path=Path(tmp) / "kubeconfig")
        async with Server(config) as server, \
                aiohttp.ClientSession(base_url=server.url) as http:
            times: dict[str, list[float]] = {kind: [] for kind in types}
            # a warm-up round, then rounds alternating between the two, each kind's best kept
            for round_ in range(rounds + 1):
                for kind, content_type in types.items():
                    bodies = [body(kind, f"{kind}-{round_}-{i}") for i in range(creates)]
                    start = time.perf_counter()
                    for raw in bodies:
                        async with http.post(path, data=raw,
                                             headers={"Content-Type": content_type}) as r:
                            assert r.status == 201, await r.text()
                            await r.read()
                    if round_:
                        times[kind].append((time.perf_counter() - start) / creates * 1e6)
    print()
    print(f"sequential ConfigMap creates through an in-process server (memory storage), "
          f"{creates} per round, best of {rounds}:")
    for kind, measured in times.items():
        print(f"  {kind:<9} {min(measured):8.0f} µs per create")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--http", type=int, default=0, metavar="CREATES",
                        help="also time this many creates each way through a server")
    args = parser.parse_args()
    measure_decoding(args.rounds)
    if args.http:
        asyncio.run(measure_creates(args.http, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
