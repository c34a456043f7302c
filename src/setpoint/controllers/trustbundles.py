"""The signing controller's ClusterTrustBundles: each signer it runs publishes its CA.

:class:`TrustBundlePublisher` (runnable ``csrsigning-trust-bundles``, acting as the
``csrsigning`` controller's identity, which holds ``attest`` for its signers only) keeps one
ClusterTrustBundle per signer of :data:`~setpoint.controllers.csrsigning.SIGNERS`, named
``<signer with '/' as ':'>:cluster-ca``, whose ``spec.trustBundle`` is the cluster CA's PEM.
A workload that asks one of these signers for a certificate finds the CA that verifies it by
listing ClusterTrustBundles with ``fieldSelector=spec.signerName=<signer>`` (Kubernetes'
KEP-3257), and knows the signer runs when the bundle is there.

It writes every bundle when it starts, then watches ClusterTrustBundles: one of its bundles
deleted is created again, one edited (another trustBundle) is written back; the watch ends
every :attr:`PublisherConfig.resync` seconds and everything is written again if needed (a
watch event lost on a reconnect is repaired then). A new CA (a restart with another signing
CA) is published when the publisher starts.

Invariants: a bundle is written only when it differs from the CA (no write per resync);
failures (the API missing, a conflict, a dropped connection) are logged and retried after
:attr:`PublisherConfig.retry`, never end the manager.

Non-guarantees: bundles of signers it no longer runs are not deleted; labels and
annotations others add are kept, but an edited trustBundle is overwritten.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Final

from setpoint import runtime
from setpoint.apimachinery import errors
from setpoint.controllers.csrsigning import SIGNERS

CTB: Final = ("certificates.k8s.io/v1beta1", "ClusterTrustBundle")
NAME: Final = "csrsigning-trust-bundles"
#: the name of a signer's bundle after the ``<signer>:`` prefix
BUNDLE_SUFFIX: Final = "cluster-ca"

Obj = dict[str, Any]


def bundle_name(signer: str) -> str:
    return signer.replace("/", ":") + ":" + BUNDLE_SUFFIX


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    #: seconds between full rewrites (the watch's timeoutSeconds)
    resync: int = 300
    #: seconds to wait after a failure
    retry: float = 5.0

    def __post_init__(self) -> None:
        if not 1 <= self.resync <= 3600:
            raise ValueError("resync must be between 1 and 3600 seconds")
        if not 0 < self.retry <= 600:
            raise ValueError("retry must be positive and at most 600 seconds")


class TrustBundlePublisher:
    """The runnable (see the module docstring)."""

    name = NAME

    def __init__(self, ca_pem: str, signers: tuple[str, ...] = SIGNERS,
                 config: PublisherConfig | None = None) -> None:
        self._ca_pem = ca_pem
        self._by_name = {bundle_name(s): s for s in signers}
        self._config = config or PublisherConfig()

    def body(self, signer: str) -> Obj:
        return {"apiVersion": CTB[0], "kind": CTB[1],
                "metadata": {"name": bundle_name(signer),
                             "labels": {"app.kubernetes.io/managed-by": "setpoint"}},
                "spec": {"signerName": signer, "trustBundle": self._ca_pem}}

    async def ensure(self, ctx: runtime.RunnableContext, signer: str) -> None:
        """Create or rewrite ``signer``'s bundle if it is missing or differs."""
        client, name = ctx.client, bundle_name(signer)
        try:
            current = await client.get(CTB, name)
        except errors.NotFound:
            try:
                await client.create(self.body(signer))
                ctx.logger.info("published ClusterTrustBundle %s", name)
            except errors.AlreadyExists:
                pass  # raced with another writer; the watch brings it back here
            return
        if (current.get("spec") or {}).get("trustBundle") == self._ca_pem:
            return
        current["spec"] = {**(current.get("spec") or {}), "trustBundle": self._ca_pem}
        await client.update(current)
        ctx.logger.info("rewrote ClusterTrustBundle %s", name)

    def _needs_repair(self, event_type: str, obj: Obj) -> bool:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if name not in self._by_name:
            return False
        return event_type == "DELETED" or \
            (obj.get("spec") or {}).get("trustBundle") != self._ca_pem

    async def _watch(self, ctx: runtime.RunnableContext) -> None:
        """Return when one of the bundles needs a write, or the watch ends."""
        async with ctx.client.watch(CTB, timeout_seconds=self._config.resync) as events:
            async for event in events:
                if self._needs_repair(event.type, event.object):
                    return

    async def _round(self, ctx: runtime.RunnableContext) -> None:
        for signer in self._by_name.values():
            await self.ensure(ctx, signer)
        watcher = asyncio.ensure_future(self._watch(ctx))
        stopper = asyncio.ensure_future(ctx.stopping.wait())
        try:
            await asyncio.wait({watcher, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (watcher, stopper):
                task.cancel()
            await asyncio.gather(watcher, stopper, return_exceptions=True)
        failure = watcher.exception() if watcher.done() and not watcher.cancelled() else None
        if failure is not None:
            raise failure

    async def run(self, ctx: runtime.RunnableContext) -> None:
        while not ctx.stopping.is_set():
            try:
                await self._round(ctx)
            except (errors.ApiError, OSError, TimeoutError) as e:
                ctx.logger.warning("publishing ClusterTrustBundles: %s: %s; retrying in %gs",
                                   type(e).__name__, e, self._config.retry)
                if await ctx.sleep(self._config.retry):
                    return
