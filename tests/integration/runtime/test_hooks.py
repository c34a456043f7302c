"""An operator's validate, mutate and convert hooks as Python functions: Hooks serves them
on one HTTPS server with its own CA, registers the webhook configurations and the CRD's
conversion itself, and the API server calls them: a denial with the function's message, a
label added by JSONPatch, warnings passed through, a failing or slow hook following its
failurePolicy, and the configurations removed (the conversion left) when it stops."""

from __future__ import annotations

import asyncio
import base64
import ssl
import threading
from typing import Any

import aiohttp
import orjson
import pytest

from setpoint.apimachinery import errors
from setpoint.client import Client
from setpoint.runtime import AdmissionRequest, Denied, HookConfig, Hooks, Manager, Verdict
from setpoint.runtime.hooks import MUTATING, VALIDATING
from tests.integration.runtime.conftest import BOOK, book, eventually, install_books, running
from tests.integration.runtime.test_conversion_functions import (
    GADGET_V1,
    GADGET_V2,
    GROUP,
    convert,
    install,
)


def library_hooks(**options: Any) -> Hooks:
    hooks = Hooks("library", **options)

    @hooks.validate(BOOK)
    def no_untitled(req: AdmissionRequest) -> Verdict | None:
        assert req.object is not None
        title = req.object["spec"].get("title", "")
        if title == "":
            return Verdict.deny(f"book {req.name} needs a title")
        if req.operation == "UPDATE" and req.old_object is not None and \
                req.old_object["spec"].get("title") != title:
            raise Denied("a book's title is fixed", code=422)
        if title.isupper():
            return Verdict.allow(warnings=[f"{req.user_info.get('username')} shouts"])
        return None

    @hooks.mutate(BOOK)
    async def shelve(req: AdmissionRequest) -> dict[str, Any] | None:
        obj = req.object
        assert obj is not None
        obj["metadata"].setdefault("labels", {})["shelf"] = "new"
        obj["spec"].setdefault("pages", 1)
        return obj
    return hooks


async def test_validate_and_mutate_as_functions(client: Client) -> None:
    await install_books(client)
    async with library_hooks().serving(client) as hooks:
        made = await client.create({"apiVersion": BOOK[0], "kind": "Book",
                                    "metadata": {"name": "a", "namespace": "default"},
                                    "spec": {"title": "Dune"}})
        assert made["metadata"]["labels"] == {"shelf": "new"}
        assert made["spec"] == {"title": "Dune", "pages": 1}
        with pytest.raises(errors.ApiError) as denied:
            await client.create(book("b", title=""))
        assert denied.value.status_code == 400
        assert denied.value.message == (
            'admission webhook "no-untitled.library.hooks.setpoint" denied the request: '
            "book b needs a title")
        made["spec"]["title"] = "Emma"
        with pytest.raises(errors.ApiError) as fixed:
            await client.update(made)
        assert fixed.value.status_code == 422
        assert "a book's title is fixed" in fixed.value.message
        configured = await client.get(VALIDATING, "library-hooks")
        webhook = configured["webhooks"][0]
        assert webhook["clientConfig"]["url"] == hooks.url("/validate/no-untitled")
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["timeoutSeconds"] == 10
        assert webhook["rules"][0]["resources"] == ["books"]
    # stopped: the configurations are gone, writes go through unchecked
    with pytest.raises(errors.NotFound):
        await client.get(VALIDATING, "library-hooks")
    with pytest.raises(errors.NotFound):
        await client.get(MUTATING, "library-hooks")
    untitled = await client.create(book("c", title=""))
    assert "labels" not in untitled["metadata"]


async def test_warnings_are_passed_through(client: Client,
                                          http: aiohttp.ClientSession) -> None:
    await install_books(client)
    async with library_hooks().serving(client):
        async with http.post("/apis/example.com/v1/namespaces/default/books",
                             json=book("loud", title="DUNE")) as resp:
            assert resp.status == 201, await resp.text()
            warning = resp.headers.get("Warning", "")
        assert "shouts" in warning, warning


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
async def test_a_hook_that_raises_follows_its_failure_policy(client: Client,
                                                             policy: str) -> None:
    await install_books(client)
    hooks = Hooks("broken")

    @hooks.validate(BOOK, failure_policy=policy)  # type: ignore[arg-type]
    def crash(req: AdmissionRequest) -> None:
        raise KeyError("shelf")

    async with hooks.serving(client):
        if policy == "Ignore":
            assert (await client.create(book("a")))["metadata"]["name"] == "a"
        else:
            with pytest.raises(errors.InternalError) as failed:
                await client.create(book("a"))
            assert 'failed calling webhook "crash.broken.hooks.setpoint"' in \
                failed.value.message
            assert "KeyError: 'shelf'" in failed.value.message


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
@pytest.mark.parametrize("blocking", [True, False])
async def test_a_slow_hook_times_out_by_its_policy(client: Client, policy: str,
                                                   blocking: bool) -> None:
    await install_books(client)
    hooks = Hooks("slow")
    release = threading.Event()

    def wait_in_thread(req: AdmissionRequest) -> None:
        release.wait(10)  # in a thread: the server answers others meanwhile

    async def wait_in_loop(req: AdmissionRequest) -> None:
        await asyncio.Event().wait()  # never: cancelled a second after timeoutSeconds

    hooks.validate(BOOK, failure_policy=policy, timeout_seconds=1,  # type: ignore[arg-type]
                   name="wait")(wait_in_thread if blocking else wait_in_loop)

    try:
        async with hooks.serving(client):
            if policy == "Ignore":
                assert (await client.create(book("a")))["metadata"]["name"] == "a"
            else:
                with pytest.raises(errors.ApiError) as failed:
                    await client.create(book("a"))
                assert "slow.hooks.setpoint" in failed.value.message
    finally:
        release.set()


async def test_convert_is_served_from_the_same_server(client: Client) -> None:
    await install(client)
    hooks = Hooks("gadgets")
    hooks.convert(f"gadgets.{GROUP}")(convert)
    async with hooks.serving(client):
        crd = await client.get(("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                               f"gadgets.{GROUP}")
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == \
            hooks.url(f"/convert/gadgets.{GROUP}")

        async def created() -> dict[str, Any] | None:
            try:
                return await client.create({
                    "apiVersion": f"{GROUP}/v1", "kind": "Gadget",
                    "metadata": {"name": "g", "namespace": "default"},
                    "spec": {"size": "3"}})
            except errors.ApiError:
                return None  # until the server serves the CRD anew
        await eventually(created, what="a v1 gadget created through the function")
        assert (await client.get(GADGET_V2, "g", namespace="default"))["spec"] == {
            "replicas": 3}
        assert (await client.get(GADGET_V1, "g", namespace="default"))["spec"] == {
            "size": "3"}
    crd = await client.get(("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                           f"gadgets.{GROUP}")
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"  # left, as documented


async def test_hooks_run_as_a_managers_runnable(client: Client) -> None:
    await install_books(client)
    manager = Manager(client, [], runnables=[library_hooks()])
    async with running(manager):
        async def registered() -> bool:
            try:
                await client.get(MUTATING, "library-hooks")
            except errors.NotFound:
                return False
            return True
        await eventually(registered, what="the hooks registered")
        made = await client.create(book("a"))
        assert made["metadata"]["labels"] == {"shelf": "new"}
    with pytest.raises(errors.NotFound):
        await client.get(MUTATING, "library-hooks")


@pytest.mark.parametrize("body", [b"not json", b"{}", b'{"apiVersion": "x", "request": {}}',
                                  orjson.dumps({"apiVersion": "admission.k8s.io/v1",
                                                "request": {"uid": 5}})])
async def test_what_is_not_a_review_is_refused(body: bytes) -> None:
    hooks = library_hooks()
    await hooks.start()
    try:
        context = ssl.create_default_context(
            cadata=base64.b64decode(hooks.ca_bundle).decode())
        async with aiohttp.ClientSession() as http, http.post(
                hooks.url("/validate/no-untitled"), data=body, ssl=context) as resp:
            assert resp.status == 400
    finally:
        await hooks.stop()


def test_declarations_are_checked() -> None:
    hooks = Hooks("x")
    with pytest.raises(ValueError, match="timeoutSeconds"):
        hooks.validate(BOOK, timeout_seconds=31)
    with pytest.raises(ValueError, match="failurePolicy"):
        hooks.mutate(BOOK, failure_policy="Maybe")  # type: ignore[arg-type]
    hooks.validate(BOOK)(lambda req: None)
    with pytest.raises(ValueError, match="already registered"):
        hooks.validate(BOOK, name="<lambda>")(lambda req: None)
    with pytest.raises(ValueError, match="lowercase"):
        Hooks("Not A Name")


async def test_a_restarted_operator_replaces_its_stale_configuration(client: Client) -> None:
    await install_books(client)
    first = library_hooks()
    await first.start()
    await first.register(client)
    await first.stop()  # gone without unregistering, as a killed process would be
    async with library_hooks().serving(client) as second:
        configured = await client.get(VALIDATING, "library-hooks")
        assert configured["webhooks"][0]["clientConfig"]["url"] == \
            second.url("/validate/no-untitled")
        assert configured["webhooks"][0]["clientConfig"]["caBundle"] == second.ca_bundle
        made = await client.create(book("a"))
        assert made["metadata"]["labels"] == {"shelf": "new"}


async def test_behind_a_service_the_configurations_name_its_url(client: Client) -> None:
    await install_books(client)
    hooks = library_hooks(config=HookConfig(
        host="0.0.0.0", port=9443, url="https://library-hooks.shop.svc:443",
        hosts=("library-hooks.shop.svc",)))
    validating, mutating = await hooks.configurations(client, ca_bundle="Q0E=")
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    assert validating["webhooks"][0]["clientConfig"] == {
        "url": "https://library-hooks.shop.svc:443/validate/no-untitled", "caBundle": "Q0E="}
    assert mutating["webhooks"][0]["clientConfig"]["url"] == \
        "https://library-hooks.shop.svc:443/mutate/shelve"
    assert mutating["webhooks"][0]["reinvocationPolicy"] == "Never"
    with pytest.raises(ValueError, match="https"):
        HookConfig(url="http://library-hooks.shop.svc")


async def test_a_body_beyond_the_bound_is_refused() -> None:
    hooks = library_hooks(config=HookConfig(max_body_bytes=1024))
    async with hooks:
        context = ssl.create_default_context(
            cadata=base64.b64decode(hooks.ca_bundle).decode())
        body = orjson.dumps({"apiVersion": "admission.k8s.io/v1",
                             "request": {"uid": "u", "object": {"pad": "x" * 2048}}})
        async with aiohttp.ClientSession() as http, http.post(
                hooks.url("/validate/no-untitled"), data=body, ssl=context) as resp:
            assert resp.status == 413
