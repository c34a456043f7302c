"""resourceVersion values where a client sends them: canonical unsigned decimals only."""

from __future__ import annotations

import base64
import urllib.parse
from typing import Any

import aiohttp
import orjson
import pytest

from tests.integration.api.helpers import request

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
NOT_REVISIONS = [" 1", "1 ", "+1", "-1", "1_0", "0x1", "1.0", "\u0661"]


async def create(http: aiohttp.ClientSession, name: str) -> dict[str, Any]:
    status, body, _ = await request(http, "POST", CONFIGMAPS, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"a": "1"}})
    assert status == 201, body
    return body  # type: ignore[no-any-return]


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


@pytest.mark.parametrize("rv", NOT_REVISIONS)
async def test_the_query_parameter_must_be_a_decimal_revision(
        http: aiohttp.ClientSession, rv: str) -> None:
    await create(http, "q")
    for path in (f"{CONFIGMAPS}/q?resourceVersion={q(rv)}",
                 f"{CONFIGMAPS}?resourceVersion={q(rv)}",
                 f"{CONFIGMAPS}?resourceVersion={q(rv)}&resourceVersionMatch=Exact",
                 f"{CONFIGMAPS}?watch=true&resourceVersion={q(rv)}"):
        status, body, _ = await request(http, "GET", path)
        assert status == 400, (path, body)
        assert body["reason"] == "BadRequest"
        assert body["message"] == (
            f"resourceVersion: Invalid value: {orjson.dumps(rv).decode()}: "
            f"strconv.ParseUint: parsing {orjson.dumps(rv).decode()}: invalid syntax")


async def test_leading_zeros_name_the_same_revision_as_go_parses_them(
        http: aiohttp.ClientSession) -> None:
    created = await create(http, "zeros")
    rv = created["metadata"]["resourceVersion"]
    status, got, _ = await request(http, "GET", f"{CONFIGMAPS}/zeros?resourceVersion=00{rv}")
    assert status == 200, got
    status, body, _ = await request(http, "GET", f"{CONFIGMAPS}?resourceVersion=1" + "0" * 30)
    assert status == 400
    assert "value out of range" in body["message"]


@pytest.mark.parametrize("rv", NOT_REVISIONS)
async def test_an_update_or_patch_naming_no_revision_is_a_422(
        http: aiohttp.ClientSession, rv: str) -> None:
    created = await create(http, "u")
    current = created["metadata"]["resourceVersion"]
    odd = rv.replace("1", current)  # " 1" -> " <current>", "+1" -> "+<current>"
    body = {**created, "metadata": {**created["metadata"], "resourceVersion": odd},
            "data": {"a": "2"}}
    status, answer, _ = await request(http, "PUT", f"{CONFIGMAPS}/u", body)
    assert status == 422, answer
    assert answer["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    assert "strconv.ParseUint" in answer["message"]
    status, answer, _ = await request(
        http, "PATCH", f"{CONFIGMAPS}/u", {"metadata": {"resourceVersion": odd}},
        content_type="application/merge-patch+json")
    assert status == 422, answer
    status, got, _ = await request(http, "GET", f"{CONFIGMAPS}/u")
    assert got["metadata"]["resourceVersion"] == current
    assert got["data"] == {"a": "1"}


async def test_an_update_compares_revisions_as_numbers(http: aiohttp.ClientSession) -> None:
    created = await create(http, "n")
    current = created["metadata"]["resourceVersion"]
    body = {**created, "metadata": {**created["metadata"], "resourceVersion": "0" + current},
            "data": {"a": "2"}}
    status, answer, _ = await request(http, "PUT", f"{CONFIGMAPS}/n", body)
    assert status == 200, answer
    assert answer["data"] == {"a": "2"}


async def test_delete_preconditions_compare_the_exact_text(
        http: aiohttp.ClientSession) -> None:
    created = await create(http, "d")
    current = created["metadata"]["resourceVersion"]
    for odd in (" " + current, "+" + current, "0" + current):
        status, answer, _ = await request(http, "DELETE", f"{CONFIGMAPS}/d", {
            "apiVersion": "v1", "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": odd}})
        assert status == 409, answer
        assert "Precondition failed" in answer["message"]
    status, _, _ = await request(http, "DELETE", f"{CONFIGMAPS}/d", {
        "apiVersion": "v1", "kind": "DeleteOptions",
        "preconditions": {"resourceVersion": current}})
    assert status == 200


@pytest.mark.parametrize("revision", ["+1", " 1", 1.5, True, 0, -3, None])
async def test_a_continue_token_holds_the_integer_this_server_wrote(
        http: aiohttp.ClientSession, revision: Any) -> None:
    for name in ("c1", "c2"):
        await create(http, name)
    status, page, _ = await request(http, "GET", f"{CONFIGMAPS}?limit=1")
    assert status == 200
    token = page["metadata"]["continue"]
    data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    status, _, _ = await request(http, "GET", f"{CONFIGMAPS}?limit=1&continue={token}")
    assert status == 200
    forged = base64.urlsafe_b64encode(orjson.dumps({**data, "rv": revision})).decode()
    status, answer, _ = await request(http, "GET",
                                      f"{CONFIGMAPS}?limit=1&continue={q(forged)}")
    assert status == 400, answer
    assert answer["message"].startswith("continue key is not valid")
