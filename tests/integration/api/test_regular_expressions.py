"""Regular expressions from users run on RE2: OpenAPI ``pattern``, CEL ``matches``, and the
server's own name and key patterns (where ``$`` is the end of the text, as in Go)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp

from tests.integration.api.helpers import request

# 24,000 RE2 instructions that no DFA can run: about 2 ns per instruction per byte of text
SLOW = "[^a]{1000}[^a]{1000}[^a]{1000}a"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "patterns.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "patterns", "singular": "pattern", "kind": "Pattern"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
            "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object",
                "properties": {
                    "backtrack": {"type": "string", "maxLength": 200_000,
                                  "pattern": "^(a+)+$"},
                    "greek": {"type": "string", "pattern": "^\\p{Greek}+$"},
                    "cel": {"type": "string", "maxLength": 200_000},
                    "slow": {"type": "string", "maxLength": 200_000, "pattern": SLOW},
                    "pat": {"type": "string", "maxLength": 64},
                },
                "x-kubernetes-validations": [
                    {"rule": "!has(self.cel) || self.cel.matches('^(a|aa)+$')",
                     "message": "cel must be a's"},
                    {"rule": "!has(self.pat) || self.cel.matches(self.pat)",
                     "message": "cel must match pat"}],
            }}}}}],
    },
}
PATTERNS = "/apis/example.com/v1/namespaces/default/patterns"


def pattern_object(name: str, **spec: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Pattern", "metadata": {"name": name},
            "spec": spec}


async def install(http: aiohttp.ClientSession) -> None:
    status, body, _ = await request(http, "POST", CRDS, CRD)
    assert status == 201, body
    for _ in range(200):
        status, _, _ = await request(http, "GET", PATTERNS)
        if status == 200:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("patterns were not served")


async def test_a_backtracking_openapi_pattern_is_evaluated_in_linear_time(
        http: aiohttp.ClientSession) -> None:
    await install(http)
    # ^(a+)+$ against a's and a '!': 2^n ways for a backtracking matcher (n=27 took 5 s)
    for length in (27, 100_000):
        status, body, _ = await request(
            http, "POST", PATTERNS, pattern_object(f"bt{length}", backtrack="a" * length + "!"))
        assert status == 422, body
        assert "should match '^(a+)+$'" in body["message"]
    status, _, _ = await request(http, "POST", PATTERNS,
                                 pattern_object("ok", backtrack="a" * 100_000))
    assert status == 201


async def test_a_backtracking_cel_matches_is_evaluated_in_linear_time(
        http: aiohttp.ClientSession) -> None:
    await install(http)
    status, body, _ = await request(http, "POST", PATTERNS,
                                    pattern_object("cel", cel="a" * 100_000 + "!"))
    assert status == 422, body
    assert "cel must be a's" in body["message"]


async def test_matching_work_beyond_the_budget_is_refused_not_done(
        http: aiohttp.ClientSession) -> None:
    """Linear is not enough: 24,000 instructions x 100 KB would hold the server for seconds.
    The work is charged before it is done, and an object whose patterns would cost more than
    the budget is refused."""
    await install(http)
    status, body, _ = await request(http, "POST", PATTERNS,
                                    pattern_object("slow", slow="b" * 100_000))
    assert status == 422, body
    assert "would take too long" in body["message"]
    status, body, _ = await request(http, "POST", PATTERNS,
                                    pattern_object("short", slow="b" * 100))
    assert status == 422, body
    assert f"should match '{SLOW}'" in body["message"]
    assert "too long" not in body["message"]
    # a pattern the object itself supplies, to CEL
    status, body, _ = await request(http, "POST", PATTERNS,
                                    pattern_object("dyn", cel="a" * 100_000, pat=SLOW))
    assert status == 422, body
    assert "cost" in body["message"]
    status, body, _ = await request(http, "POST", PATTERNS,
                                    pattern_object("dyn-ok", cel="aa", pat="^a+$"))
    assert status == 201, body


async def test_patterns_python_could_not_run_are_validated_now(
        http: aiohttp.ClientSession) -> None:
    await install(http)
    status, body, _ = await request(http, "POST", PATTERNS, pattern_object("latin", greek="abc"))
    assert status == 422, body
    assert "should match '^\\p{Greek}+$'" in body["message"]
    status, body, _ = await request(http, "POST", PATTERNS, pattern_object("greek", greek="λόγος"))
    assert status == 201, body


async def test_patterns_go_or_re2_cannot_compile_are_refused_at_crd_time(
        http: aiohttp.ClientSession) -> None:
    for i, (pattern, reason) in enumerate((
            ("(?=a)", "invalid or unsupported Perl syntax: `(?=`"),
            ("\\C", "invalid escape sequence: `\\C`"),
            ("\\pL{1000}", "pattern too large - compile failed"))):
        crd = copy.deepcopy(CRD)
        crd["metadata"]["name"] = f"bad{i}s.example.com"
        crd["spec"]["names"] = {"plural": f"bad{i}s", "kind": f"Bad{i}"}
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"]["greek"]["pattern"] = pattern
        status, body, _ = await request(http, "POST", CRDS, crd)
        assert status == 422, body
        assert "must be a valid regular expression, but isn't: error parsing regexp: " + \
            reason in body["message"]


async def test_a_final_newline_does_not_satisfy_a_dollar(http: aiohttp.ClientSession) -> None:
    """Go's $ is the end of the text; Python's re also matched before a final newline, so
    a ConfigMap key or a CRD's plural name could end in one."""
    status, body, _ = await request(http, "POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nl"},
        "data": {"key\n": "v"}})
    assert status == 422, body
    assert "a valid config key must consist of" in body["message"]
    crd = copy.deepcopy(CRD)
    crd["spec"]["names"]["plural"] = "patterns\n"
    status, body, _ = await request(http, "POST", CRDS, crd)
    assert status == 422, body
    assert "spec.names.plural" in body["message"]
