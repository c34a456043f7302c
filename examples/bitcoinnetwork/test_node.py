"""The node program on its own: real HTTP servers on loopback ports, peered by hand, a block
mined on one reaching the others, a late node catching up, and hostile requests answered
with a 4xx while the node keeps serving."""

from __future__ import annotations

import http.client
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from setpoint.testing import eventually_blocking

HERE = Path(__file__).parent


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bitcoinnetwork_node", HERE / "node.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


node = _load()


class Running:
    def __init__(self, name: str, sync_interval: float = 0.2) -> None:
        self.server = node.NodeServer(("127.0.0.1", 0), node.Node(name, "v1", ""))
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.server.node.address = self.address
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                         daemon=True),
                        threading.Thread(target=node.sync_forever, daemon=True,
                                         args=(self.server.node, self.stop, sync_interval))]
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        for t in self.threads:
            t.join(timeout=5)

    def request(self, method: str, path: str, body: Any = None,
                raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any]:
        host, port = self.address.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        try:
            data = raw if raw is not None else (None if body is None
                                                else json.dumps(body).encode())
            conn.request(method, path, body=data, headers=headers or {})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()


@pytest.fixture
def nodes() -> Iterator[list[Running]]:
    started = [Running(f"n-{i}") for i in range(3)]
    yield started
    for n in started:
        n.close()


def peer_all(nodes: list[Running]) -> None:
    for a in nodes:
        for b in nodes:
            if a is not b:
                name = b.server.node.name
                assert a.request("PUT", f"/peers/{name}", {"address": b.address})[0] == 201


def test_peers_are_added_moved_and_removed(nodes: list[Running]) -> None:
    a, b, _c = nodes
    assert a.request("GET", "/healthz") == (200, {"ok": True})
    assert a.request("PUT", "/peers/n-1", {"address": b.address})[0] == 201
    assert a.request("PUT", "/peers/n-1", {"address": "127.0.0.9:1"})[0] == 200  # moved
    assert a.request("GET", "/peers")[1] == {"peers": {"n-1": "127.0.0.9:1"}}
    assert a.request("DELETE", "/peers/n-1")[0] == 200
    assert a.request("DELETE", "/peers/n-1")[0] == 404
    assert a.request("PUT", "/peers/n-0", {"address": b.address})[0] == 422  # itself
    peer_all(nodes)
    assert a.request("GET", "/status")[1]["peers"] == {"n-1": b.address,
                                                       "n-2": nodes[2].address}
    assert a.request("DELETE", "/peers") == (200, {"peers": {}})
    assert a.request("GET", "/peers")[1] == {"peers": {}}


def test_a_mined_block_reaches_every_peer_and_a_late_node_catches_up(
        nodes: list[Running]) -> None:
    peer_all(nodes)
    code, block = nodes[0].request("POST", "/mine", {"data": "hello"})
    assert code == 201
    assert block["index"] == 1
    assert block["hash"].startswith("0" * node.DIFFICULTY)

    def tips() -> set[str]:
        found = {n.request("GET", "/status")[1]["tip"] for n in nodes}
        assert found == {block["hash"]}
        return found

    eventually_blocking(tips, retry_on=(AssertionError,))
    late = Running("n-9")
    try:
        assert late.request("GET", "/status")[1]["height"] == 0
        late.request("PUT", "/peers/n-0", {"address": nodes[0].address})

        def caught_up() -> bool:
            assert late.request("GET", "/status")[1]["tip"] == block["hash"]
            return True

        eventually_blocking(caught_up, retry_on=(AssertionError,))
    finally:
        late.close()


def test_a_tampered_chain_is_refused() -> None:
    chain = [node.GENESIS]
    for i in range(3):
        chain.append(node.make_block(i + 1, chain[-1]["hash"], f"b{i}"))
    assert node.valid_chain(chain)
    n = node.Node("x", "v1", "")
    forged = [dict(b) for b in chain]
    forged[2]["data"] = "forged"
    assert not node.valid_chain(forged)
    assert not n.adopt(forged)
    assert n.adopt(chain)
    assert not n.adopt(chain[:2])  # shorter: kept ours
    assert n.status()["height"] == 3


@pytest.mark.parametrize(("method", "path", "raw", "code"), [
    ("PUT", "/peers/n-1", b"not json", 400),
    ("PUT", "/peers/n-1", b"[1, 2]", 400),
    ("PUT", "/peers/n-1", b'{"address": "nohost"}', 400),
    ("PUT", "/peers/n-1", b'{"address": "a/b:80"}', 400),
    ("PUT", "/peers/Bad_Name", b'{"address": "127.0.0.1:1"}', 400),
    ("POST", "/mine", b'{"data": 5}', 400),
    ("POST", "/blocks", b'{"index": 1, "prev": "x", "data": "", "nonce": 0}', 422),
    ("GET", "/nowhere", None, 404),
    ("PATCH", "/peers", None, 501),
    ("POST", "/peers", b"{}", 405),
])
def test_bad_requests_get_a_4xx(nodes: list[Running], method: str, path: str,
                                raw: bytes | None, code: int) -> None:
    a = nodes[0]
    host, port = a.address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request(method, path, body=raw)
    assert conn.getresponse().status == code
    conn.close()
    assert a.request("GET", "/healthz")[0] == 200


def test_an_oversized_body_is_refused_unread(nodes: list[Running]) -> None:
    a = nodes[0]
    code, answer = a.request("POST", "/mine", raw=b"x" * (node.MAX_BODY + 1))
    assert code == 400
    assert "at most" in answer["error"]
    host, port = a.address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.putrequest("PUT", "/peers/n-1")
    conn.putheader("Content-Length", str(10**12))  # announced, never sent
    conn.endheaders()
    assert conn.getresponse().status == 400
    conn.close()
    assert a.request("GET", "/healthz")[0] == 200


def test_the_peer_list_is_bounded(nodes: list[Running]) -> None:
    a = nodes[0]
    a.server.node.peers.update({f"p-{i}": "127.0.0.1:1"
                                for i in range(node.MAX_PEERS)})
    assert a.request("PUT", "/peers/one-more", {"address": "127.0.0.1:2"})[0] == 422
    assert a.request("PUT", "/peers/p-0", {"address": "127.0.0.1:2"})[0] == 200  # a move


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(max_size=80), body=st.one_of(
    st.binary(max_size=200),
    st.dictionaries(st.text(max_size=10), st.one_of(
        st.none(), st.integers(), st.text(max_size=300), st.lists(st.integers(), max_size=3)),
        max_size=4).map(lambda d: json.dumps(d).encode())))
def test_any_peer_request_gets_an_answer_below_500(nodes: list[Running], name: str,
                                                    body: bytes) -> None:
    a = nodes[0]
    quoted = "".join(c if c.isalnum() or c in "-_.~" else f"%{ord(c):02X}"
                     for c in name.encode("ascii", "replace").decode())
    for method in ("PUT", "DELETE"):
        host, port = a.address.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=5)
        conn.request(method, f"/peers/{quoted}", body=body)
        assert conn.getresponse().status < 500
        conn.close()
    assert len(a.server.node.peers) <= node.MAX_PEERS
    assert all(node.valid_name(p) for p in a.server.node.peers)
