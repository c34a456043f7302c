#!/usr/bin/env python3
"""A toy peer-to-peer node: an HTTP service that keeps a peer list and a chain of blocks.

Standard library only, one file, so that it runs from a ConfigMap on a stock ``python``
image (as the BitcoinNetwork operator ships it) or from the image the Dockerfile beside it
builds. Nothing here is Bitcoin: the "chain" is a list of blocks, each naming the hash of the
one before, with a toy proof of work (the hash starts with ``DIFFICULTY`` zeros), so that
nodes have something to agree on.

API (JSON bodies of at most ``MAX_BODY`` bytes; answers are JSON):

- ``GET /healthz``: 200 once serving (the readiness probe).
- ``GET /status``: name, version, peers (name -> ``host:port``), chain height and tip.
- ``GET /peers``; ``PUT /peers/NAME`` with ``{"address": "host:port"}`` adds or moves a
  peer; ``DELETE /peers/NAME`` removes one; ``DELETE /peers`` removes them all (a node
  being detached from its network).
- ``GET /chain``: every block. ``POST /mine`` with ``{"data": "..."}`` mines a block on the
  tip and announces it to the peers. ``POST /blocks`` with a block (and ``"from"``, the
  sender's address): appended if it extends the tip; if it is further ahead, the sender's
  chain is fetched and adopted when it is longer and valid.

Every ``SYNC_INTERVAL`` seconds the node also pulls each peer's chain and adopts the longest
valid one, so a node that joins late, or missed an announcement, catches up.

Invariants: at most ``MAX_PEERS`` peers and ``MAX_BLOCKS`` blocks; a peer name is a DNS
label, an address ``host:port``; a chain is adopted only if every block links to the one
before, carries its own correct hash and the proof of work, and starts at the shared genesis
block. Bad input gets a 4xx answer, never takes the node down. Not guaranteed: anything a
real ledger needs (signatures, forks resolved by work, persistence: a restarted node starts
from the genesis block and catches up from its peers).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import signal
import string
import sys
import threading
import urllib.error
import urllib.request
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 64 * 1024
MAX_CHAIN_BYTES = 8 * 1024 * 1024
MAX_DISCARD = 1024 * 1024
MAX_PEERS = 256
MAX_BLOCKS = 10_000
MAX_DATA = 1024
DIFFICULTY = 2
SYNC_INTERVAL = 5.0
PEER_TIMEOUT = 2.0
_LABEL_CHARS = set(string.ascii_lowercase + string.digits + "-")


def block_hash(index: int, prev: str, data: str, nonce: int) -> str:
    payload = json.dumps([index, prev, data, nonce], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def make_block(index: int, prev: str, data: str) -> dict[str, Any]:
    """A block on ``prev`` whose hash meets the proof of work."""
    nonce = 0
    while True:
        digest = block_hash(index, prev, data, nonce)
        if digest.startswith("0" * DIFFICULTY):
            return {"index": index, "prev": prev, "data": data, "nonce": nonce,
                    "hash": digest}
        nonce += 1


GENESIS = make_block(0, "0" * 64, "genesis")


def valid_block(block: Any, prev: dict[str, Any]) -> bool:
    """Whether ``block`` is well formed and follows ``prev``."""
    if not isinstance(block, dict):
        return False
    index, data, nonce = block.get("index"), block.get("data"), block.get("nonce")
    if not (isinstance(index, int) and isinstance(data, str) and isinstance(nonce, int)):
        return False
    if len(data) > MAX_DATA or index != prev["index"] + 1 or block.get("prev") != prev["hash"]:
        return False
    digest = block_hash(index, prev["hash"], data, nonce)
    return block.get("hash") == digest and digest.startswith("0" * DIFFICULTY)


def valid_chain(blocks: Any) -> bool:
    if not isinstance(blocks, list) or not blocks or len(blocks) > MAX_BLOCKS:
        return False
    if blocks[0] != GENESIS:
        return False
    return all(valid_block(b, a) for a, b in itertools.pairwise(blocks))


def valid_name(name: str) -> bool:
    return (0 < len(name) <= 63 and set(name) <= _LABEL_CHARS
            and name[0] != "-" and name[-1] != "-")


def valid_address(address: Any) -> bool:
    if not isinstance(address, str) or len(address) > 255 or ":" not in address:
        return False
    host, _, port = address.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536 and not any(
        c in host for c in "/?#@ \t\r\n")


class Node:
    """The node's state: its peers and its chain, under one lock."""

    def __init__(self, name: str, version: str, address: str) -> None:
        self.name = name
        self.version = version
        self.address = address
        self.peers: dict[str, str] = {}
        self.chain: list[dict[str, Any]] = [GENESIS]
        self.lock = threading.Lock()

    def status(self) -> dict[str, Any]:
        with self.lock:
            return {"name": self.name, "version": self.version, "address": self.address,
                    "peers": dict(self.peers), "height": len(self.chain) - 1,
                    "tip": self.chain[-1]["hash"]}

    def adopt(self, blocks: Any) -> bool:
        """Take ``blocks`` if it is a longer valid chain than ours."""
        if not valid_chain(blocks):
            return False
        with self.lock:
            if len(blocks) <= len(self.chain):
                return False
            self.chain = list(blocks)
            return True

    def append(self, block: Any) -> str:
        """``appended``, ``known`` (we have it or a longer chain), ``ahead`` (it is
        further on than our tip: fetch the sender's chain) or ``invalid``."""
        with self.lock:
            tip = self.chain[-1]
            if isinstance(block, dict) and isinstance(block.get("index"), int):
                if block["index"] <= tip["index"]:
                    return "known"
                if block["index"] > tip["index"] + 1:
                    return "ahead"
            if not valid_block(block, tip) or len(self.chain) >= MAX_BLOCKS:
                return "invalid"
            self.chain.append(block)
            return "appended"

    def mine(self, data: str) -> dict[str, Any]:
        with self.lock:
            tip = self.chain[-1]
        block = make_block(tip["index"] + 1, tip["hash"], data)
        if self.append(block) != "appended":  # someone else extended the tip meanwhile
            return self.mine(data)
        return block


def fetch_json(url: str, *, body: Any = None, method: str = "GET",
               limit: int = MAX_CHAIN_BYTES) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=PEER_TIMEOUT) as response:
        raw = response.read(limit + 1)
    if len(raw) > limit:
        raise ValueError("answer too large")
    return json.loads(raw)


def pull_chain(node: Node, address: str) -> bool:
    try:
        answer = fetch_json(f"http://{address}/chain")
    except (OSError, ValueError):
        return False
    return node.adopt(answer.get("blocks") if isinstance(answer, dict) else None)


def announce(node: Node, block: dict[str, Any]) -> None:
    for address in list(node.status()["peers"].values()):
        try:
            fetch_json(f"http://{address}/blocks", body={**block, "from": node.address},
                       method="POST", limit=MAX_BODY)
        except (OSError, ValueError):
            pass  # the peer catches up at its next sync


def discard(handler: BaseHTTPRequestHandler, length: int) -> None:
    """Read and drop a body too large to take, if it is small enough to read (closing with
    unread data would reset the connection before the client reads the answer); close the
    connection after the answer either way."""
    handler.close_connection = True
    if 0 < length <= MAX_DISCARD:
        while length > 0:
            chunk = handler.rfile.read(min(length, 65536))
            if not chunk:
                break
            length -= len(chunk)


class Handler(BaseHTTPRequestHandler):
    server: NodeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per request would drown the pod's log

    def answer(self, code: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def fail(self, code: HTTPStatus, message: str) -> None:
        self.answer(code, {"error": message})

    def body(self) -> Any:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            discard(self, length)
            raise ValueError(f"the body must be at most {MAX_BODY} bytes")
        raw = self.rfile.read(length) if length else b"{}"
        value = json.loads(raw)
        if not isinstance(value, dict):
            raise ValueError("the body must be a JSON object")
        return value

    def route(self, method: str) -> None:
        node = self.server.node
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            body = self.body() if method in ("PUT", "POST") else None
        except ValueError as e:
            return self.fail(HTTPStatus.BAD_REQUEST, str(e))
        if (method, path) == ("GET", "/healthz"):
            return self.answer(200, {"ok": True})
        if (method, path) == ("GET", "/status"):
            return self.answer(200, node.status())
        if (method, path) == ("GET", "/peers"):
            return self.answer(200, {"peers": node.status()["peers"]})
        if (method, path) == ("DELETE", "/peers"):
            with node.lock:
                node.peers.clear()
            return self.answer(200, {"peers": {}})
        if path.startswith("/peers/") and method in ("PUT", "DELETE"):
            return self.peer(method, path.removeprefix("/peers/"), body)
        if (method, path) == ("GET", "/chain"):
            with node.lock:
                return self.answer(200, {"blocks": list(node.chain)})
        if (method, path) == ("POST", "/mine"):
            data = body.get("data", "") if body else ""
            if not isinstance(data, str) or len(data) > MAX_DATA:
                return self.fail(HTTPStatus.BAD_REQUEST,
                                 f"data must be a string of at most {MAX_DATA} characters")
            block = node.mine(data)
            threading.Thread(target=announce, args=(node, block), daemon=True).start()
            return self.answer(201, block)
        if (method, path) == ("POST", "/blocks"):
            return self.receive(body or {})
        known = {"/healthz", "/status", "/peers", "/chain", "/mine", "/blocks"}
        if path in known or path.startswith("/peers/"):
            return self.fail(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} {path} is not allowed")
        return self.fail(HTTPStatus.NOT_FOUND, f"no such path: {path}")

    def peer(self, method: str, name: str, body: Any) -> None:
        node = self.server.node
        if not valid_name(name):
            return self.fail(HTTPStatus.BAD_REQUEST, f"invalid peer name {name[:64]!r}")
        if method == "DELETE":
            with node.lock:
                gone = node.peers.pop(name, None)
            if gone is None:
                return self.fail(HTTPStatus.NOT_FOUND, f"no peer {name}")
            return self.answer(200, {"removed": name})
        address = (body or {}).get("address")
        if not valid_address(address):
            return self.fail(HTTPStatus.BAD_REQUEST, "address must be host:port")
        if name == node.name:
            return self.fail(HTTPStatus.UNPROCESSABLE_ENTITY, "a node is not its own peer")
        with node.lock:
            if name not in node.peers and len(node.peers) >= MAX_PEERS:
                return self.fail(HTTPStatus.UNPROCESSABLE_ENTITY,
                                 f"at most {MAX_PEERS} peers")
            created = name not in node.peers
            node.peers[name] = str(address)
        # a new peer may be ahead of us: catch up now rather than at the next sync
        threading.Thread(target=pull_chain, args=(node, address), daemon=True).start()
        return self.answer(201 if created else 200, {"name": name, "address": address})

    def receive(self, body: dict[str, Any]) -> None:
        node = self.server.node
        sender = body.pop("from", None)
        outcome = node.append(body)
        if outcome == "ahead" and valid_address(sender):
            outcome = "adopted" if pull_chain(node, sender) else "ignored"
        if outcome == "invalid":
            return self.fail(HTTPStatus.UNPROCESSABLE_ENTITY, "the block does not fit")
        if outcome == "appended":
            threading.Thread(target=announce, args=(node, body), daemon=True).start()
        return self.answer(200, {"outcome": outcome})

    def do_GET(self) -> None:
        self.route("GET")

    def do_PUT(self) -> None:
        self.route("PUT")

    def do_POST(self) -> None:
        self.route("POST")

    def do_DELETE(self) -> None:
        self.route("DELETE")


class NodeServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], node: Node) -> None:
        super().__init__(address, Handler)
        self.node = node

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that went away
            super().handle_error(request, client_address)


def sync_forever(node: Node, stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        for address in list(node.status()["peers"].values()):
            pull_chain(node, address)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--host", default=os.environ.get("POD_IP") or "0.0.0.0")
    parser.add_argument("--port", type=int, default=8333)
    parser.add_argument("--name", default=os.environ.get("POD_NAME") or "node")
    parser.add_argument("--version", default="v1")
    parser.add_argument("--sync-interval", type=float, default=SYNC_INTERVAL)
    args = parser.parse_args(argv)
    server = NodeServer((args.host, args.port), Node(args.name, args.version,
                                                    f"{args.host}:{args.port}"))
    stop = threading.Event()
    threading.Thread(target=sync_forever, args=(server.node, stop, args.sync_interval),
                     daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"node {args.name} ({args.version}) serving on {args.host}:{args.port}", flush=True)
    try:
        server.serve_forever()
    finally:
        stop.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
