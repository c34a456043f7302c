"""The Book operator on the in-process control plane: catalogue, status, printer columns,
repair of a hand-edited catalogue, and withdrawal through the finalizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from setpoint.testing import control_plane, load_operator

HERE = Path(__file__).parent
BOOK = ("library.example.com/v1", "Book")
CONFIGMAP = ("v1", "ConfigMap")
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def catalogued(book: dict[str, Any]) -> bool:
    return (book.get("status") or {}).get("phase") == "Catalogued"


async def catalogue_entry(cp: Any, name: str) -> str | None:
    cm = await cp.client.get(CONFIGMAP, "library-catalogue")
    return (cm.get("data") or {}).get(name)


async def test_books_are_catalogued_and_withdrawn() -> None:
    operator = load_operator(HERE / "operator.py")
    async with control_plane() as cp:
        await cp.apply(HERE / "crd.yaml")
        await cp.run_operator(operator)
        await cp.apply(HERE / "books.yaml")

        dune = await cp.wait_for(BOOK, "dune", catalogued)
        assert dune["metadata"]["finalizers"] == ["library.example.com/catalogue"]
        ready = dune["status"]["conditions"][0]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True",
                                                                    "Catalogued")
        assert ready["observedGeneration"] == dune["metadata"]["generation"]
        await cp.wait_for(BOOK, "moby-dick", catalogued)
        assert await catalogue_entry(cp, "dune") == "Dune by Frank Herbert, 412 pages"

        # kubectl get books: the printer columns show the operator's status
        books = await cp.client.resolve(BOOK)
        table = await cp.client.request("GET", books.path(namespace="default"), accept=TABLE)
        columns = [c["name"] for c in table["columnDefinitions"]]
        assert columns == ["Name", "Title", "Author", "Phase", "Ready", "Age"]
        rows = {row["cells"][0]: row["cells"] for row in table["rows"]}
        assert rows["dune"][1:5] == ["Dune", "Frank Herbert", "Catalogued", "True"]

        # a changed spec changes the entry
        await cp.apply({"apiVersion": "library.example.com/v1", "kind": "Book",
                        "metadata": {"name": "dune"}, "spec": {"pages": 896}})
        await cp.eventually(lambda: _entry_is(cp, "dune", "Dune by Frank Herbert, 896 pages"))

        # an entry removed by hand comes back (the operator watches the catalogue)
        await cp.client.patch(CONFIGMAP, "library-catalogue", {"data": {"moby-dick": None}})
        await cp.eventually(lambda: _entry_is(cp, "moby-dick",
                                              "Moby-Dick by Herman Melville, 635 pages"))

        # deleting a book withdraws it first
        await cp.client.delete(BOOK, "dune")
        await cp.wait_deleted(BOOK, "dune")
        assert await catalogue_entry(cp, "dune") is None
        assert await catalogue_entry(cp, "moby-dick") is not None
        events = (await cp.client.list(("v1", "Event"), namespace="default"))["items"]
        reasons = {(e["involvedObject"]["name"], e["reason"]) for e in events}
        assert {("dune", "Catalogued"), ("dune", "Withdrawn")} <= reasons


async def _entry_is(cp: Any, name: str, line: str) -> bool:
    return await catalogue_entry(cp, name) == line
