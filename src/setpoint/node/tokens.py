"""The projected ServiceAccount tokens a node agent holds for its pods.

As the kubelet's token manager does, a token is asked for once and used until it has lived
80 % of the validity it was issued for; only then is a new one requested. The agent looks at a
pod's inputs again every resync (so that ConfigMap and Secret changes reach its volumes);
without this, every resync of every pod would sign a new token in the API server.

Invariants: a token is keyed by everything its request named (namespace, ServiceAccount,
audience, validity, and the pod it is bound to, by uid), so a pod replaced under the same
name never gets its predecessor's token; :meth:`forget` drops a pod's tokens when it goes;
at most ``capacity`` tokens are kept (the oldest go first). Non-guarantees: a token revoked
in the server before 80 % of its life is not noticed (the kubelet does not either).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["TokenCache", "TokenKey"]

#: the share of a token's validity after which a new one is asked for (the kubelet's)
REFRESH_AT = 0.8


@dataclass(frozen=True, slots=True)
class TokenKey:
    namespace: str
    service_account: str
    audience: str
    seconds: int
    pod_uid: str


class TokenCache:
    """Tokens by request, fetched through ``fetch`` when missing or due for renewal."""

    def __init__(self, now: Callable[[], float], *, capacity: int = 100_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._now = now
        self._capacity = capacity
        self._tokens: OrderedDict[TokenKey, tuple[str, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._tokens)

    async def get(self, key: TokenKey, fetch: Callable[[], Awaitable[str | None]]
                  ) -> str | None:
        """The token for ``key``: the one held while it is younger than 80 % of its
        validity, else a new one from ``fetch`` (None when the server gave none)."""
        held = self._tokens.get(key)
        now = self._now()
        if held is not None and now < held[1]:
            return held[0]
        token = await fetch()
        if token is None:
            self._tokens.pop(key, None)
            return None
        self._tokens[key] = (token, now + REFRESH_AT * key.seconds)
        self._tokens.move_to_end(key)
        while len(self._tokens) > self._capacity:
            self._tokens.popitem(last=False)
        return token

    def forget(self, pod_uid: str) -> None:
        """Drop the tokens of a pod that is gone."""
        for key in [k for k in self._tokens if k.pod_uid == pod_uid]:
            del self._tokens[key]
