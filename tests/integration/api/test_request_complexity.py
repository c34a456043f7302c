"""Requests whose work could grow faster than what a client sends, over HTTP.

Each is answered (with its result, or with a 4xx Status naming a limit) and the server keeps
serving others; the unit tests beside each module count the work itself.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from typing import Any

import aiohttp
import orjson

from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def configmap(name: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}}


async def test_a_selector_of_hundreds_of_terms_lists_and_watches_what_it_selects(
        http: aiohttp.ClientSession) -> None:
    # a LIST evaluated a selector term by term for every object: 1,000 terms over 2,000
    # objects held the event loop for 1.3 s (now 0.04 s: the terms are folded per key)
    for i in range(50):
        status, body, _ = await request(http, "POST", CONFIGMAPS, configmap(
            f"c{i}", labels={"app": f"a{i}", "tier": "web" if i % 2 else "db"}))
        assert status == 201, body
    # as many terms as a request line of 8 KiB holds
    labels = ",".join([f"app!=a{i}" for i in range(10)] + [f"k{i}!=v" for i in range(600)]
                      + ["tier=web"])
    fields = ",".join(f"metadata.name!=c{i}" for i in range(20, 120))
    query = urllib.parse.urlencode({"labelSelector": labels, "fieldSelector": fields},
                                   safe="!=,")
    status, listed, _ = await request(http, "GET", f"{CONFIGMAPS}?{query}")
    assert status == 200, listed
    names = sorted(item["metadata"]["name"] for item in listed["items"])
    assert names == sorted(f"c{i}" for i in range(11, 20, 2))
    # a watch with the same selectors sees a new object that matches, and only that one
    rv = listed["metadata"]["resourceVersion"]
    async with http.get(f"{CONFIGMAPS}?watch=true&resourceVersion={rv}&{query}") as response:
        assert response.status == 200
        for name, tier in (("c7", "db"), ("c13", "web")):
            status, body, _ = await request(http, "PUT", f"{CONFIGMAPS}/{name}", configmap(
                name, labels={"app": "moved", "tier": tier}))
            assert status == 200, body
        status, body, _ = await request(http, "POST", CONFIGMAPS, configmap(
            "new", labels={"app": "b", "tier": "web"}))
        assert status == 201, body
        async with asyncio.timeout(10):
            event = orjson.loads(await response.content.readline())
    # c7 is not web, c13 was already selected: the first event is c13's modification
    assert (event["type"], event["object"]["metadata"]["name"]) == ("MODIFIED", "c13")
