"""The Website operator, with the harness's pytest fixtures: the page is published, follows
the spec, and comes back when its ConfigMap is deleted."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from setpoint.testing import ControlPlane, load_operator

pytest_plugins = ["setpoint.testing.pytest_plugin"]

HERE = Path(__file__).parent
WEBSITE = ("web.example.com/v1", "Website")
CONFIGMAP = ("v1", "ConfigMap")

operator = load_operator(HERE / "operator.py")


def test_render_escapes_everything() -> None:
    page = operator.render({"title": "<Tom & Jerry>", "paragraphs": ["a < b"],
                            "links": [{"text": "x", "href": 'https://e.com/?a="1"&b'}]})
    assert "<title>&lt;Tom &amp; Jerry&gt;</title>" in page
    assert "<p>a &lt; b</p>" in page
    assert '<a href="https://e.com/?a=&quot;1&quot;&amp;b">x</a>' in page


def page_of(cm: dict[str, Any]) -> str:
    return str((cm.get("data") or {}).get("index.html", ""))


async def test_the_page_is_published_updated_and_restored(
        setpoint_control_plane: ControlPlane) -> None:
    cp = setpoint_control_plane
    await cp.apply(HERE / "crd.yaml")
    await cp.run_operator(operator)
    website = await cp.apply(HERE / "website.yaml")
    uid = website[0]["metadata"]["uid"]

    cm = await cp.wait_for(CONFIGMAP, "hello-site")
    assert "<h1>Hello, setpoint</h1>" in page_of(cm)
    owner = cm["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Website", "hello", uid, True)
    published = await cp.wait_for(WEBSITE, "hello",
                                  lambda w: "contentHash" in (w.get("status") or {}))
    assert published["status"]["contentHash"] == operator.content_hash(page_of(cm))
    assert published["status"]["configMap"] == "hello-site"

    # a spec change re-renders the page
    await cp.apply({"apiVersion": "web.example.com/v1", "kind": "Website",
                    "metadata": {"name": "hello"}, "spec": {"title": "Goodbye"}})
    cm = await cp.wait_for(CONFIGMAP, "hello-site", lambda c: "Goodbye" in page_of(c))
    assert "<h1>Hello, setpoint</h1>" not in page_of(cm)

    # an edit by hand is undone
    await cp.client.patch(CONFIGMAP, "hello-site", {"data": {"index.html": "defaced"}})
    await cp.wait_for(CONFIGMAP, "hello-site", lambda c: "Goodbye" in page_of(c))

    # a deleted ConfigMap is re-created (the owner watch reconciles the Website)
    gone_uid = cm["metadata"]["uid"]
    started = time.perf_counter()
    await cp.client.delete(CONFIGMAP, "hello-site")
    restored = await cp.wait_for(CONFIGMAP, "hello-site",
                                 lambda c: c["metadata"]["uid"] != gone_uid)
    print(f"\nConfigMap re-created {1000 * (time.perf_counter() - started):.0f} ms after "
          "its deletion")
    assert "Goodbye" in page_of(restored)


async def test_a_configmap_without_a_controller_is_adopted(
        setpoint_control_plane: ControlPlane) -> None:
    cp = setpoint_control_plane
    await cp.apply(HERE / "crd.yaml")
    await cp.apply({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "mine-site"}, "data": {"index.html": "old"}})
    await cp.run_operator(operator)
    await cp.apply({"apiVersion": "web.example.com/v1", "kind": "Website",
                    "metadata": {"name": "mine"}, "spec": {"title": "Adopted"}})
    cm = await cp.wait_for(CONFIGMAP, "mine-site", lambda c: "Adopted" in page_of(c))
    assert cm["metadata"]["ownerReferences"][0]["name"] == "mine"
