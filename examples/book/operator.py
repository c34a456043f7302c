"""The Book operator: a library catalogues every Book, and withdraws it before it goes.

For each ``Book`` (``library.example.com/v1``) the operator:

1. puts the finalizer ``library.example.com/catalogue`` on it, so the book cannot disappear
   before the library has withdrawn it;
2. writes the book's entry (``"Dune by Frank Herbert, 412 pages"``) under the book's name in
   the ConfigMap ``library-catalogue`` of the book's namespace (created when missing; one
   ConfigMap is shared by every book of the namespace, so garbage collection could not clean
   it up: this is what finalizers are for);
3. sets ``status.phase: Catalogued`` and a ``Ready`` condition, which ``kubectl get books``
   shows through the CRD's printer columns, and records a ``Catalogued`` Event.

When a Book is deleted, the finalizer's cleanup removes its entry from the catalogue and
records a ``Withdrawn`` Event; then the finalizer comes off and the Book goes.

Everything is level-based and idempotent: the reconcile reads the Book and the catalogue
from the caches and makes the catalogue match, however many times it runs. The operator also
watches ConfigMaps, so an entry someone removes from the catalogue by hand comes back. The
code uses only ``setpoint.runtime``, ``setpoint.client`` and the client's exceptions
(``setpoint.apimachinery.errors``), so it runs unchanged against any Kubernetes cluster::

    setpoint run examples/book/operator.py --kubeconfig .setpoint/kubeconfig
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from setpoint.apimachinery import errors
from setpoint.runtime import (
    Condition,
    Context,
    Finalizer,
    Registry,
    Request,
    Result,
    set_condition,
)

BOOK = ("library.example.com/v1", "Book")
CONFIGMAP = ("v1", "ConfigMap")
FINALIZER = "library.example.com/catalogue"
CATALOGUE = "library-catalogue"

registry = Registry()


def entry_of(book: dict[str, Any] | Any) -> str:
    """The catalogue line for a book."""
    spec = book["spec"]
    line = f"{spec['title']} by {spec['author']}"
    if spec.get("pages"):
        line += f", {spec['pages']} pages"
    return line


async def write_entry(ctx: Context, namespace: str, key: str, line: str | None) -> None:
    """Set (or, with ``None``, remove) one entry of the namespace's catalogue.

    A merge patch touches only this book's key, so books catalogued concurrently by several
    workers never overwrite each other.
    """
    patch = {"data": {key: line}}
    try:
        await ctx.client.patch(CONFIGMAP, CATALOGUE, patch, namespace=namespace)
        return
    except errors.NotFound:
        if line is None:
            return  # no catalogue, so no entry to remove
    try:
        await ctx.client.create({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CATALOGUE, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "book-operator"}},
            "data": {key: line}})
    except errors.AlreadyExists:  # another worker created it meanwhile
        await ctx.client.patch(CONFIGMAP, CATALOGUE, patch, namespace=namespace)


def books_in(catalogue: Any) -> list[Request]:
    """The books a catalogue lists: when someone edits or deletes the catalogue by hand, each
    of them is reconciled, and puts its own entry back."""
    metadata = catalogue["metadata"]
    if metadata["name"] != CATALOGUE:
        return []
    return [Request(metadata["namespace"], key) for key in catalogue.get("data") or {}]


@registry.controller(for_=BOOK, watches=[(CONFIGMAP, books_in)], workers=4)
async def reconcile(request: Request, ctx: Context) -> Result:
    book = ctx.get(request)
    if book is None:
        return Result.done()  # gone: the finalizer already withdrew it

    async def catalogue(book: Any) -> None:
        line = entry_of(book)
        entries = ctx.cache_for(CONFIGMAP).get(f"{request.namespace}/{CATALOGUE}")
        if entries is None or (entries.get("data") or {}).get(request.name) != line:
            await write_entry(ctx, request.namespace, request.name, line)
        status = book.get("status") or {}
        generation = book["metadata"].get("generation")
        ready = Condition(type="Ready", status=True, reason="Catalogued",
                          message=f"listed in ConfigMap {CATALOGUE}",
                          observed_generation=generation)
        wanted = {
            "phase": "Catalogued",
            "observedGeneration": generation,
            "catalogue": CATALOGUE,
            "conditions": set_condition(status.get("conditions") or [], ready,
                                        now=datetime.now(UTC)),
        }
        if any(status.get(k) != v for k, v in wanted.items()):
            await ctx.client.patch_status(BOOK, request.name, {"status": wanted},
                                          namespace=request.namespace)
            if status.get("phase") != "Catalogued":
                await ctx.recorder.normal(book, "Catalogued", f"catalogued as {line!r}")

    async def withdraw(book: Any) -> None:
        await write_entry(ctx, request.namespace, request.name, None)
        await ctx.recorder.normal(book, "Withdrawn",
                                  f"{book['spec']['title']} left the catalogue")

    return await Finalizer(ctx.client, FINALIZER, resource=BOOK).run(
        book, apply=catalogue, cleanup=withdraw)
