"""Large YAML and protobuf bodies are decoded in worker threads, at most a few at once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.server import bodydecoding, negotiation
from setpoint.server.bodydecoding import BodyDecoder

BIG_YAML = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n"
            + "".join(f"  k{i}: v{i}\n" for i in range(5000))).encode()


async def test_a_large_yaml_body_is_decoded_in_a_thread_with_the_same_answer() -> None:
    decoder = BodyDecoder(threshold=1024)
    threads: list[threading.Thread] = []
    real = negotiation.decode_body

    def recording(raw: bytes, content_type: str) -> Any:
        threads.append(threading.current_thread())
        return real(raw, content_type)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(negotiation, "decode_body", recording)
        got = await decoder.decode(BIG_YAML, negotiation.YAML)
    assert got == real(BIG_YAML, negotiation.YAML)
    assert got["data"]["k4999"] == "v4999"
    assert decoder.threaded == 1
    assert threads
    assert threads[0] is not threading.main_thread()


async def test_small_bodies_and_json_of_any_size_are_decoded_at_once() -> None:
    decoder = BodyDecoder(threshold=1024)
    assert await decoder.decode(b"a: 1\n", negotiation.YAML) == {"a": 1}
    big_json = orjson.dumps({"data": {f"k{i}": "v" for i in range(5000)}})
    assert len(big_json) > 1024
    assert (await decoder.decode(big_json, "application/json"))["data"]["k1"] == "v"
    assert decoder.threaded == 0


async def test_an_invalid_large_body_is_the_same_status_from_a_thread() -> None:
    decoder = BodyDecoder(threshold=16)
    broken = b"a: [1, 2\n" + b"# padding\n" * 10
    with pytest.raises(errors.BadRequest) as threaded:
        await decoder.decode(broken, negotiation.YAML)
    with pytest.raises(errors.BadRequest) as inline:
        negotiation.decode_body(broken, negotiation.YAML)
    assert str(threaded.value) == str(inline.value)
    assert decoder.threaded == 1


class Gate:
    """A decode function that blocks until released, counting how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = self.most = self.started = 0
        self.entered = threading.Semaphore(0)

    def __call__(self, raw: bytes, content_type: str) -> Any:
        with self.lock:
            self.running += 1
            self.started += 1
            self.most = max(self.most, self.running)
        self.entered.release()
        try:
            assert self.release.wait(30), "the test never released the decode"
            return {"raw": len(raw)}
        finally:
            with self.lock:
                self.running -= 1


async def entered(gate: Gate, count: int) -> None:
    """Until ``count`` more decodes have started (a positive signal from the threads)."""
    for _ in range(count):
        assert await asyncio.to_thread(gate.entered.acquire, True, 30)


async def test_at_most_workers_decode_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate()
    monkeypatch.setattr(negotiation, "decode_body", gate)
    decoder = BodyDecoder(threshold=0, workers=2)
    tasks = [asyncio.create_task(decoder.decode(b"x" * (i + 1), negotiation.YAML))
             for i in range(5)]
    await entered(gate, 2)
    assert gate.started == 2  # the other three wait for a place, not a thread
    gate.release.set()
    results = await asyncio.gather(*tasks)
    assert sorted(r["raw"] for r in results) == [1, 2, 3, 4, 5]
    assert gate.most == 2
    assert decoder.threaded == 5


async def test_a_cancelled_decode_keeps_its_place_until_its_thread_ends(
        monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate()
    monkeypatch.setattr(negotiation, "decode_body", gate)
    decoder = BodyDecoder(threshold=0, workers=1)
    first = asyncio.create_task(decoder.decode(b"first", negotiation.YAML))
    await entered(gate, 1)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    second = asyncio.create_task(decoder.decode(b"second!", negotiation.YAML))
    await asyncio.sleep(0)  # the second asks for the place the first's thread still holds
    assert gate.started == 1
    gate.release.set()
    assert await second == {"raw": 7}
    assert gate.most == 1


def test_the_threaded_types_are_those_decoded_by_python_code() -> None:
    assert negotiation.YAML in bodydecoding.THREADED_TYPES
    assert negotiation.PROTOBUF in bodydecoding.THREADED_TYPES
    assert "application/json" not in bodydecoding.THREADED_TYPES
    with pytest.raises(ValueError, match="workers at least 1"):
        BodyDecoder(workers=0)
