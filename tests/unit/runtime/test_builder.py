"""Declaring controllers: the builder, resolution, the registry and its decorator."""

from __future__ import annotations

from typing import Any

import pytest

import setpoint.runtime as runtime
from setpoint.client import NoMatchError, ResourceRef
from setpoint.runtime import builder, handlers, ratelimit, registry
from setpoint.runtime import predicates as p
from setpoint.runtime.clock import FakeAsyncClock
from setpoint.runtime.reconcile import FuncReconciler, Request, Result

BOOK = ResourceRef(group="example.com", version="v1", resource="books", kind="Book",
                   namespaced=True)
CM = ResourceRef(group="", version="v1", resource="configmaps", kind="ConfigMap",
                 namespaced=True, short_names=("cm",), singular="configmap")
NS = ResourceRef(group="", version="v1", resource="namespaces", kind="Namespace",
                 namespaced=False)


class FakeDiscovery:
    async def resolve(self, resource: Any) -> ResourceRef:
        for ref in (BOOK, CM, NS):
            if resource in (ref, (ref.api_version, ref.kind), ref.resource,
                            f"{ref.resource}.{ref.group}"):
                return ref
        raise NoMatchError(f"no {resource!r}")


async def reconcile_book(request: Request, ctx: Any) -> Result:
    return Result.done()


async def test_resolve_builds_handlers_and_predicates() -> None:
    def by_namespace(obj: Any) -> list[Request]:
        return [Request("lib", obj["metadata"]["name"])]

    c = (builder.Controller(for_="books.example.com", reconcile=reconcile_book,
                            predicates=[p.generation_changed])
         .owns(("v1", "ConfigMap"), metadata_only=True)
         .watches("namespaces", by_namespace)
         .with_predicates(p.has_label("team"))
         .with_options(workers=5, namespace="lib"))
    resolved = await c.resolve(FakeDiscovery())  # type: ignore[arg-type]
    assert resolved.name == "book"
    assert resolved.ref == BOOK
    primary, owned, watched = resolved.watches
    assert (primary.role, primary.ref, primary.namespace) == ("for", BOOK, "lib")
    assert isinstance(primary.handler, handlers.EnqueueSelf)
    assert owned.handler == handlers.EnqueueOwner(group="example.com", kind="Book")
    assert owned.metadata_only
    assert (watched.ref, watched.namespace) == (NS, None)  # cluster-scoped: no namespace
    assert isinstance(watched.handler, handlers.EnqueueMapped)
    # with_predicates filters every watch; per-watch predicates only their own
    labelled = {"metadata": {"name": "x", "labels": {"team": "a"}, "generation": 1}}
    unlabelled = {"metadata": {"name": "x", "generation": 1}}
    assert primary.predicate.create(labelled)
    assert not primary.predicate.create(unlabelled)
    assert not primary.predicate.update(labelled, labelled)  # generation unchanged
    assert watched.predicate.update(labelled, labelled)
    assert resolved.aliases()[("v1", "ConfigMap")] == CM
    assert c.options.workers == 5


async def test_names_and_unknown_resources() -> None:
    c = builder.Controller(for_=("example.com/v1", "Book"), reconcile=reconcile_book)
    assert (await c.named("librarian").resolve(FakeDiscovery())).name == "librarian"  # type: ignore[arg-type]
    with pytest.raises(NoMatchError):
        await builder.Controller(for_="widgets", reconcile=reconcile_book).resolve(
            FakeDiscovery())  # type: ignore[arg-type]


def test_options_are_validated() -> None:
    c = builder.Controller(for_="books", reconcile=reconcile_book)
    with pytest.raises(ValueError, match="workers"):
        c.with_options(workers=1000)
    with pytest.raises(ValueError, match="name"):
        c.named("")
    with pytest.raises(TypeError, match="Reconciler"):
        builder.Controller(for_="books", reconcile="not callable")  # type: ignore[arg-type]
    c.with_options(workers=3)
    c.with_options(namespace="lib")
    assert (c.options.workers, c.options.namespace) == (3, "lib")  # other options kept
    limiter: ratelimit.ItemExponentialBackoff[Request] = ratelimit.ItemExponentialBackoff(1.0, 10.0)
    c.with_options(rate_limiter=limiter)  # a limiter, or a factory taking the clock
    assert c.options.rate_limiter is not None
    assert c.options.rate_limiter(FakeAsyncClock()) is limiter
    c.with_options(rate_limiter=ratelimit.default_controller_rate_limiter)
    assert isinstance(c.options.rate_limiter(FakeAsyncClock()), ratelimit.MaxOf)


async def test_a_reconciler_object_is_used_as_is() -> None:
    async def plain(request: Request) -> None:
        return None

    reconciler = FuncReconciler(plain)
    c = builder.Controller(for_="books", reconcile=reconciler)
    assert c.reconciler(None) is reconciler  # type: ignore[arg-type]
    bound = builder.Controller(for_="books", reconcile=reconcile_book).reconciler("ctx")  # type: ignore[arg-type]
    assert await bound.reconcile(Request("lib", "dune")) == Result.done()


def test_registry_decorator() -> None:
    reg = registry.Registry()

    @reg.controller(for_=("example.com/v1", "Book"), owns=[("v1", "ConfigMap")],
                    watches=[("namespaces", lambda obj: [])], workers=3, namespace="lib")
    async def reconcile(request: Request, ctx: Any) -> Result:
        return Result.done()

    [c] = reg
    assert c.reconcile is reconcile  # the function is registered, and returned unchanged
    assert [s.role for s in c.watch_specs] == ["for", "owns", "watches"]
    assert (c.options.workers, c.options.namespace) == (3, "lib")
    reg.add(c)
    assert len(reg) == 1
    with pytest.raises(TypeError):
        reg.add("books")  # type: ignore[arg-type]


def test_controllers_in_a_module() -> None:
    reg = registry.Registry()
    extra = builder.Controller(for_="configmaps", reconcile=reconcile_book)
    reg.add(builder.Controller(for_="books", reconcile=reconcile_book), extra)
    alone = builder.Controller(for_="namespaces", reconcile=reconcile_book)
    found = registry.controllers_in({"registry": reg, "alone": alone, "again": extra,
                                     "other": 42})
    assert [c.for_ for c in found] == ["books", "configmaps", "namespaces"]


def test_public_names() -> None:
    # the hook names are imported on first use (runtime._LAZY): in vars() once used
    public = sorted({name for name in vars(runtime) if not name.startswith("_")
                     and not isinstance(getattr(runtime, name), type(runtime))}
                    | set(runtime._LAZY))
    assert runtime.__all__ == sorted(runtime.__all__)
    assert public == runtime.__all__
