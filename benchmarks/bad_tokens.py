"""What a rejected credential costs the server: CPU per request, by the credential's shape.

One ``setpoint serve`` process (secure, as it starts by default). For each shape, C
keep-alive TLS connections without a client certificate send N requests for ``/version``
between them with that ``Authorization`` header; the server's CPU (user + system, every
thread, from ``/proc/<pid>/stat``) over the phase, divided by N, is printed beside the
same run's baselines: no credentials at all (anonymous, 200) and a valid ServiceAccount
token (200). A shape whose cost grew with the token's content would stand out of the
rejected rows; a signature check (the ``signed by another key`` rows) is the most a
rejected token should cost.

    python benchmarks/bad_tokens.py [--n 2000] [--connections 8]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ssl
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.api import cpu_seconds  # noqa: E402
from tests.conftest import start_serve  # noqa: E402
from tests.integration.api.rawhttp import Connection  # noqa: E402

from setpoint.auth import jwt  # noqa: E402
from setpoint.pki import certs  # noqa: E402


def b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def shapes(valid: str) -> dict[str, bytes | None]:
    other = jwt.Signer(certs.new_key())
    es256 = b64(b'{"alg":"ES256"}')
    far = int(time.time()) + 3600
    big_payload = b64(orjson.dumps({"exp": far, "pad": "x" * 5500}))
    return {
        "no credentials (baseline)": None,
        "valid token (baseline)": valid.encode(),
        "empty": b"",
        "8 KB garbage": b"x" * 8000,
        "8 KB nested header": b64(b"[" * 6000) + b".e30.AA",
        "alg none": b64(b'{"alg":"none"}') + b"." + b64(b'{"sub":"x"}') + b".",
        "undecodable bytes": es256 + b".\xff\xfe." + b"A" * 86,
        "signed by another key": other.sign({"exp": far}).encode(),
        "another key, 8 KB payload": es256 + b"." + big_payload + b"." +
                                     other.sign({"exp": far}).split(".")[2].encode(),
        "Basic": None,
    }


async def phase(url: str, context: ssl.SSLContext, header: bytes | None, basic: bool,
                n: int, connections: int) -> Counter[int]:
    codes: Counter[int] = Counter()
    head = b"GET /version HTTP/1.1\r\nHost: setpoint\r\n"
    if basic:
        head += b"Authorization: Basic YWRtaW46YWRtaW4=\r\n"
    elif header is not None:
        head += b"Authorization: Bearer " + header + b"\r\n"
    head += b"\r\n"

    async def one(count: int) -> None:
        connection = await Connection.open(url, context)
        try:
            for _ in range(count):
                await connection.send(head)
                codes[(await connection.read_response()).status] += 1
        finally:
            await connection.close()

    async with asyncio.TaskGroup() as tg:
        for i in range(connections):
            tg.create_task(one(n // connections + (1 if i < n % connections else 0)))
    return codes


def valid_token(serve_url: str, context: ssl.SSLContext) -> str:
    def call(path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(serve_url + path, data=orjson.dumps(body),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=context, timeout=30) as r:
            result: dict[str, object] = orjson.loads(r.read())
            return result
    call("/api/v1/namespaces/default/serviceaccounts",
         {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bench"}})
    answer = call("/api/v1/namespaces/default/serviceaccounts/bench/token",
                  {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {}})
    status = answer["status"]
    assert isinstance(status, dict)
    return str(status["token"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        serve = start_serve(Path(tmp) / "data", storage="sqlite")
        try:
            admin = serve.ssl_context()
            assert admin is not None
            anonymous = ssl.create_default_context(
                cafile=str(Path(tmp) / "data" / "pki" / "ca.crt"))
            url = serve.url.replace("127.0.0.1", "localhost")
            token = valid_token(serve.url, admin)
            pid = serve.process.pid
            print(f"server pid {pid}; {args.n} requests per shape over {args.connections} "
                  "keep-alive connections\n")
            print(f"{'credential':<28} {'codes':<16} {'server CPU us/request':>22}")
            for name, header in shapes(token).items():
                before = cpu_seconds(pid)
                codes = asyncio.run(phase(url, anonymous, header, name == "Basic", args.n,
                                          args.connections))
                spent = cpu_seconds(pid) - before
                shown = ",".join(f"{k}x{v}" for k, v in sorted(codes.items()))
                print(f"{name:<28} {shown:<16} {spent / args.n * 1e6:>22.0f}")
        finally:
            with contextlib.suppress(Exception):
                serve.stop()


if __name__ == "__main__":
    main()
