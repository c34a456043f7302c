"""The one seam objects pass through between the storage version and the version a request
names: :class:`Conversion`, one per store.

Every read (get, list, watch), every write's answer and every write's stored form goes
through it; it converts, then applies the requested version's defaults (defaulting on read),
so field selectors, selectable fields and encoding all see the object as the request's
version serves it. Two strategies, as a CRD's ``spec.conversion.strategy`` says:

* ``None`` (every built-in kind, most CRDs): only ``apiVersion`` changes; it runs
  synchronously under the ``async`` calls (no task, no await that suspends; a list yields to
  the event loop every :data:`TURN` objects);
* ``Webhook``: :class:`WebhookConverter` sends the objects that are not in the wanted version
  to the CRD's conversion webhook in a ConversionReview (a list's objects batched, at most
  :attr:`ConversionConfig.max_objects_per_review` objects and
  :attr:`ConversionConfig.max_review_bytes` of them per review), checks the answer as
  Kubernetes does (:mod:`setpoint.admission.conversionreview`), prunes what the target
  version's schema does not know, and fails the request with Kubernetes'
  ``Internal error occurred: conversion webhook for G/V, Kind=K failed: ...``.

Watch events are converted once per (object revision, version) and the result shared by every
watcher (:meth:`Conversion.shared_output`): concurrent watchers wait for the one call in
flight; the last :attr:`ConversionConfig.max_shared` results are kept.

Bounds: a review takes at most :attr:`ConversionConfig.timeout` seconds, including its wait
for one of the :attr:`ConversionConfig.max_concurrent_reviews` slots of its CRD; a failing or
slow webhook fails the requests that need it and no other.

The objects admission policies and admission webhooks see in another version than the
request's (``matchPolicy: Equivalent``), a mutating webhook's patch of such an object, and a
policy's params of a webhook-converted kind all go through the webhook too
(:meth:`Conversion.convert_owned`, :meth:`Conversion.output`).

Non-guarantees: a conversion webhook is trusted to be deterministic (a shared result is
reused while the object's resourceVersion is the same).
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from setpoint.admission import conversionreview as cr
from setpoint.apimachinery import errors
from setpoint.apimachinery.jsoncopy import deep_copy
from setpoint.registry import webhooks
from setpoint.registry.strategy import Strategy

Obj = dict[str, Any]

#: objects converted between two turns of the event loop
TURN: Final = 1000


@dataclass(frozen=True, slots=True)
class ConversionConfig:
    #: seconds a conversion review may take, waiting for a slot included (Kubernetes: 30)
    timeout: float = 30.0
    #: reviews in flight at once, per CRD
    max_concurrent_reviews: int = 16
    #: objects sent in one review (a longer list is sent in several)
    max_objects_per_review: int = 500
    #: encoded objects' bytes sent in one review (one larger object goes alone)
    max_review_bytes: int = 1024 * 1024
    #: watch events' converted objects kept for the next watcher, per store
    max_shared: int = 4096

    def __post_init__(self) -> None:
        if not 0 < self.timeout <= 300:
            raise ValueError("timeout must be in (0, 300] seconds")
        if not 1 <= self.max_concurrent_reviews <= 1024:
            raise ValueError("max_concurrent_reviews must be in [1, 1024]")
        if not 1 <= self.max_objects_per_review <= 100_000:
            raise ValueError("max_objects_per_review must be in [1, 100000]")
        if not 1024 <= self.max_review_bytes <= 1024 ** 3:
            raise ValueError("max_review_bytes must be in [1Ki, 1Gi]")
        if not 0 <= self.max_shared <= 1_000_000:
            raise ValueError("max_shared must be in [0, 1000000]")


class WebhookConverter:
    """Calls one CRD's conversion webhook (``spec.conversion.webhook``)."""

    def __init__(self, strategy: Strategy, webhook: Obj,
                 admission: webhooks.WebhookAdmission,
                 config: ConversionConfig | None = None) -> None:
        info = strategy.info
        self.info = info
        self._strategy = strategy
        self._versions = {v.name: v for v in info.versions}
        self.config = config or ConversionConfig()
        self._client_config = webhook.get("clientConfig") or {}
        listed = webhook.get("conversionReviewVersions")
        self._review_version = cr.choose_version(listed if isinstance(listed, list) else [])
        self._admission = admission
        self._slots = asyncio.Semaphore(self.config.max_concurrent_reviews)
        self._pool = f"conversion/{info.resource}.{info.group}"

    def _gvk(self, api_version: Any) -> str:
        return f"{api_version!s}, Kind={self.info.kind}"

    async def convert(self, objs: Sequence[Obj], api_version: str) -> list[Obj]:
        """``objs`` in ``api_version``: those already in it as they are (shared), the others
        converted by the webhook (new objects, the caller's). ``objs`` are not changed."""
        todo = [i for i, o in enumerate(objs) if o.get("apiVersion") != api_version]
        out = list(objs)
        chunk: list[int] = []
        encoded: list[bytes] = []
        size = 0
        for i in todo:
            data = orjson.dumps(objs[i])
            if chunk and (len(chunk) >= self.config.max_objects_per_review
                          or size + len(data) > self.config.max_review_bytes):
                await self._convert_chunk(objs, chunk, encoded, api_version, out)
                chunk, encoded, size = [], [], 0
            chunk.append(i)
            encoded.append(data)
            size += len(data)
        if chunk:
            await self._convert_chunk(objs, chunk, encoded, api_version, out)
        return out

    async def _convert_chunk(self, objs: Sequence[Obj], chunk: list[int],
                             encoded: list[bytes], api_version: str, out: list[Obj]) -> None:
        converted = await self._review([objs[i] for i in chunk], encoded, api_version)
        for i, obj in zip(chunk, converted, strict=True):
            out[i] = obj

    async def _review(self, objs: list[Obj], encoded: list[bytes],
                      api_version: str) -> list[Obj]:
        gvk = self._gvk(objs[0].get("apiVersion"))

        def failed(reason: str) -> errors.ApiError:
            return webhooks.internal_error(f"conversion webhook for {gvk} failed: {reason}")

        if self._review_version is None:
            raise failed("no supported conversionReviewVersions (setpoint speaks "
                         + ", ".join(cr.SUPPORTED) + ")")
        seconds = self.config.timeout
        try:
            target = self._admission.target(self._client_config, f"{seconds:g}", self._pool)
        except webhooks.CallFailed as e:
            raise failed(str(e)) from None
        uid = str(uuid.uuid4())
        body = cr.review_of_encoded(self._review_version, uid, api_version, encoded)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        try:
            async with asyncio.timeout_at(deadline):
                await self._slots.acquire()
        except TimeoutError:
            raise failed(f'Post "{target.url}": context deadline exceeded') from None
        try:
            answer = await self._admission.transport.post(
                target, body, max(deadline - loop.time(), 0.001))
        except webhooks.CallFailed as e:
            raise failed(str(e)) from None
        finally:
            self._slots.release()
        try:
            items = cr.parse_response(answer, self._review_version, uid)
        except cr.InvalidResponse as e:
            raise failed(str(e)) from None
        if len(items) != len(objs):
            raise webhooks.internal_error(f"conversion webhook for {gvk} returned "
                                          f"{len(items)} objects, expected {len(objs)}")
        out = []
        schema_version = self._versions.get(api_version.rpartition("/")[2])
        for index, (original, item) in enumerate(zip(objs, items, strict=True)):
            try:
                converted = cr.check_converted(original, item, api_version, index)
            except cr.InvalidResponse as e:
                raise webhooks.internal_error(f"conversion webhook for {gvk} {e}") from None
            if schema_version is not None:
                # what the webhook added that the version does not know goes, as in
                # Kubernetes (the CRD's schemas are structural: pruning is defined)
                self._strategy.prune(converted, schema_version)
            out.append(converted)
        return out


def version_of(api_version: Any) -> str:
    """The version an ``apiVersion`` names (``group/v1`` or ``v1``: ``v1``); "" if it is not
    a string."""
    if not isinstance(api_version, str):
        return ""
    return api_version.rsplit("/", 1)[-1]


class Conversion:
    """Objects of one store in the version a request names (see the module doc)."""

    def __init__(self, strategy: Strategy, webhook: WebhookConverter | None = None) -> None:
        self.strategy = strategy
        self.info = strategy.info
        self.webhook = webhook
        self._shared: collections.OrderedDict[tuple[Any, ...], Obj] = collections.OrderedDict()
        self._in_flight: dict[tuple[Any, ...], asyncio.Future[Obj]] = {}

    @property
    def immediate(self) -> bool:
        """Conversion never calls out (strategy None): it never suspends."""
        return self.webhook is None

    async def output(self, stored: Obj, version: str) -> Obj:
        """A shared stored object in ``version``, defaulted; the result is shared too (it may
        be the stored object itself): neither may be changed."""
        if self.webhook is None or stored.get("apiVersion") == self.info.api_version(version):
            return self.strategy.from_storage(stored, version)
        converted = await self.webhook.convert([stored], self.info.api_version(version))
        return self.strategy.from_storage_owned(converted[0], version)

    async def outputs(self, stored: list[Obj], version: str) -> list[Obj]:
        """:meth:`output` of every object of a list: one review per
        :attr:`ConversionConfig.max_objects_per_review` objects that need the webhook."""
        from_storage = self.strategy.from_storage
        if self.webhook is None:
            out: list[Obj] = []
            for start in range(0, len(stored), TURN):
                if start:
                    await asyncio.sleep(0)
                out.extend(from_storage(o, version) for o in stored[start:start + TURN])
            return out
        api_version = self.info.api_version(version)
        converted = await self.webhook.convert(stored, api_version)
        return [from_storage(new, version) if new is old else
                self.strategy.from_storage_owned(new, version)
                for new, old in zip(converted, stored, strict=True)]

    async def output_owned(self, obj: Obj, version: str) -> Obj:
        """An object the caller owns (just written, or made by this request) in
        ``version``: converted and defaulted in place where no webhook is needed."""
        if self.webhook is not None and obj.get("apiVersion") != self.info.api_version(version):
            obj = (await self.webhook.convert([obj], self.info.api_version(version)))[0]
        return self.strategy.from_storage_owned(obj, version)

    async def convert_owned(self, obj: Obj, version: str) -> Obj:
        """An object of this resource in any of its versions (its ``apiVersion`` says
        which), in ``version``, defaulted, as a new object the caller owns (``obj`` is not
        changed): what admission hooks matching another version than the request's see
        (``matchPolicy: Equivalent``), and their patches converted back. With a webhook it is
        one review, straight from the object's version to ``version``."""
        if self.webhook is None:
            stored = self.strategy.to_storage(deep_copy(obj), version_of(obj.get("apiVersion")))
            return self.strategy.from_storage_owned(stored, version)
        converted = (await self.webhook.convert([obj], self.info.api_version(version)))[0]
        if converted is obj:
            converted = deep_copy(obj)
        return self.strategy.from_storage_owned(converted, version)

    async def to_storage(self, obj: Obj, version: str) -> Obj:
        """An object of ``version`` the caller owns, in the storage version."""
        storage = self.info.storage_version.name
        if self.webhook is None or version == storage:
            return self.strategy.to_storage(obj, version)
        converted = await self.webhook.convert([obj], self.info.api_version(storage))
        return converted[0]

    async def shared_output(self, stored: Obj, version: str) -> Obj:
        """:meth:`output` of a watch event's object, made once per (object, revision,
        version) for every watcher that asks."""
        if self.webhook is None or stored.get("apiVersion") == self.info.api_version(version):
            return self.strategy.from_storage(stored, version)
        meta = stored.get("metadata") or {}
        revision = meta.get("resourceVersion")
        if not revision:
            return await self.output(stored, version)
        key = (meta.get("namespace"), meta.get("name"), meta.get("uid"), revision, version)
        found = self._shared.get(key)
        if found is not None:
            self._shared.move_to_end(key)
            return found
        pending = self._in_flight.get(key)
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not pending.cancelled() or (task is not None and task.cancelling()):
                    raise
                return await self.output(stored, version)  # its maker was cancelled
        future: asyncio.Future[Obj] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            made = await self.output(stored, version)
        except Exception as e:
            future.set_exception(e)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        except BaseException:
            future.cancel()
            raise
        else:
            future.set_result(made)
            limit = self.webhook.config.max_shared
            if limit:
                self._shared[key] = made
                while len(self._shared) > limit:
                    self._shared.popitem(last=False)
            return made
        finally:
            del self._in_flight[key]
