"""Fixtures for the runtime against a real in-process server: a client, the Book CRD, and a
check that every test stops everything it started."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from setpoint.client import Client, NoMatchError, ResourceRef, load_kubeconfig
from setpoint.server.server import Server
from setpoint.testing.waiting import eventually as eventually  # the suite's one wait

BOOK = ("example.com/v1", "Book")

BOOK_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "books.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "books", "singular": "book", "kind": "Book"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "title": {"type": "string"}, "pages": {"type": "integer"}}},
                    "status": {"type": "object",
                               "x-kubernetes-preserve-unknown-fields": True}}}}}],
    },
}


def book(name: str, title: str = "Dune", namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Book",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"title": title, "pages": 100}}


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fails a test that leaves a task running (the server fixture's own tasks excepted)."""
    before = asyncio.all_tasks()
    yield
    for _ in range(5):
        await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before
              if t is not asyncio.current_task() and not t.done()]
    assert not leaked, f"tasks left running: {leaked}"


def make_client(server: Server, **overrides: Any) -> Client:
    assert server.config.kubeconfig_path is not None
    return Client(load_kubeconfig(server.config.kubeconfig_path, request_timeout=10,
                                  **overrides))


@pytest.fixture
async def client(server: Server) -> AsyncIterator[Client]:
    async with make_client(server) as c:
        yield c


async def install_books(client: Client) -> ResourceRef:
    await client.create(BOOK_CRD)
    async with asyncio.timeout(5):
        while True:
            try:
                return await client.discovery.resolve(*BOOK)
            except NoMatchError:
                await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(manager: Any) -> AsyncIterator[asyncio.Task[None]]:
    """Run a manager in a task for the block; stop it gracefully (bounded) afterwards."""
    async with asyncio.TaskGroup() as group:
        task = group.create_task(manager.run())
        try:
            async with asyncio.timeout(10):
                while not manager.ready:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.01)
            yield task
        finally:
            manager.stop()
            async with asyncio.timeout(15):
                await asyncio.wait({task})
