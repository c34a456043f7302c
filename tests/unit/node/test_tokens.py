"""Projected tokens are asked for once and used until 80 % of their validity, per pod."""

from __future__ import annotations

from setpoint.node.tokens import TokenCache, TokenKey


class Server:
    """Counts the TokenRequests it answers; each token names its number."""

    def __init__(self) -> None:
        self.issued = 0

    async def fetch(self) -> str | None:
        self.issued += 1
        return f"token-{self.issued}"


def key(uid: str = "pod-a", seconds: int = 3600, audience: str = "") -> TokenKey:
    return TokenKey("default", "default", audience, seconds, uid)


async def test_a_token_is_reused_until_eighty_percent_of_its_validity() -> None:
    now = [1000.0]
    cache, server = TokenCache(lambda: now[0]), Server()
    assert await cache.get(key(), server.fetch) == "token-1"
    now[0] += 0.8 * 3600 - 1
    assert await cache.get(key(), server.fetch) == "token-1"  # every resync in between
    assert server.issued == 1
    now[0] += 1
    assert await cache.get(key(), server.fetch) == "token-2"
    assert server.issued == 2


async def test_each_request_and_each_pod_has_its_own_token() -> None:
    cache, server = TokenCache(lambda: 0.0), Server()
    first = await cache.get(key(), server.fetch)
    assert await cache.get(key(audience="vault"), server.fetch) != first
    assert await cache.get(key(seconds=600), server.fetch) != first
    # a pod replaced under the same name has another uid: never its predecessor's token
    assert await cache.get(key(uid="pod-a2"), server.fetch) != first
    assert server.issued == 4


async def test_a_pod_gone_takes_its_tokens_and_the_cache_is_bounded() -> None:
    cache, server = TokenCache(lambda: 0.0, capacity=2), Server()
    await cache.get(key("a"), server.fetch)
    await cache.get(key("b"), server.fetch)
    cache.forget("a")
    assert len(cache) == 1
    await cache.get(key("c"), server.fetch)
    await cache.get(key("d"), server.fetch)  # over capacity: the oldest ("b") goes
    assert len(cache) == 2
    await cache.get(key("b"), server.fetch)
    assert server.issued == 5


async def test_no_token_from_the_server_is_not_kept() -> None:
    cache = TokenCache(lambda: 0.0)
    calls = 0

    async def none() -> str | None:
        nonlocal calls
        calls += 1
        return None

    assert await cache.get(key(), none) is None
    assert await cache.get(key(), none) is None
    assert calls == 2
