"""The UI in a real browser against hostile objects and hostile links.

Every string the UI shows was written by some user: annotations, ConfigMap data, a custom
resource's printer column, condition messages, Event messages, field managers, a pod's image
and command, ownerReferences. These tests
write markup, ``javascript:`` URLs, ``</textarea>`` and bidirectional overrides into all of
them, wait until the page shows the object (a positive signal: the payload's text is on
screen), and then check that nothing became markup: no script ran (the payloads would set
``window.pwned`` and the title), no element the payload names exists, every link stays inside
the UI. Links to names the browser would resolve as dot segments (``..``) are refused instead
of reaching another object; the page's Trusted Types policy makes the HTML sinks refuse
strings; a token that cannot be a token is refused at the sign-in form; a table that read
only part of a larger kind does not grow past that part as the kind changes.

Skipped, with the reason, when selenium, chromium or chromedriver is not installed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from setpoint.testing.waiting import eventually_blocking
from tests.integration.ui.browser import chromium, until
from tests.integration.ui.browser import sign_in as browser_sign_in
from tests.integration.ui.cluster import ADMIN_TOKEN, WIDGETS_CRD, UiCluster, start

pytestmark = pytest.mark.slow

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402

IMG = "<img src=x id=injected-img onerror=\"window.pwned='img';document.title='pwned'\">"
SCRIPT = "<script id=injected-script>window.pwned='script';document.title='pwned'</script>"
TEXTAREA = "</textarea><img src=x id=injected-textarea onerror=\"window.pwned='textarea'\">"
JS_URL = "javascript:window.pwned='url'"
RLO = "\u202e"
BIDI = f"invoice{RLO}fdp.exe"  # shown as "invoiceexe.pdf" if the override is obeyed
PAYLOAD = f"{IMG} {SCRIPT} {JS_URL}"

NOTES_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "notes.example.com"},
    "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "notes", "singular": "note", "kind": "Note"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "additionalPrinterColumns": [
                {"name": "Text", "type": "string", "jsonPath": ".spec.text",
                 "description": PAYLOAD},
                {"name": "Link", "type": "string", "jsonPath": ".spec.link"}],
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}

#: what the page holds that a payload would have made: run in the page after it rendered
INERT = """
const attributes = (e) => [...e.attributes].map((a) => a.name);
return {
  pwned: window.pwned === undefined ? null : String(window.pwned),
  title: document.title,
  injected: document.querySelectorAll(
    "#injected-img, #injected-script, #injected-textarea, img, iframe, object, embed").length,
  scripts: [...document.scripts].map((s) => s.getAttribute("src")),
  handlers: [...document.querySelectorAll("*")].filter(
    (e) => attributes(e).some((name) => name.startsWith("on"))).length,
  links: [...document.querySelectorAll("a[href]")].map((a) => a.getAttribute("href"))
    .filter((href) => !href.startsWith("#")),
  overrides: document.body.innerText.includes("\\u202e"),
};
"""


def assert_inert(driver: Any) -> None:
    found = driver.execute_script(INERT)
    assert found == {"pwned": None, "title": "setpoint", "injected": 0, "scripts": ["app.js"],
                     "handlers": 0, "links": [], "overrides": False}, found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiCluster]:
    c = start(tmp_path_factory.mktemp("ui-hostile") / "serve")
    try:
        for crd in (WIDGETS_CRD, NOTES_CRD):
            c.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        for path in ("/apis/example.com/v1/widgets", "/apis/example.com/v1/notes"):
            eventually_blocking(lambda path=path: c.call("GET", path)[0] == 200,
                                what=f"{path} is served")
        yield c
    finally:
        c.serve.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def sign_in(driver: Any, cluster: UiCluster) -> None:
    browser_sign_in(driver, cluster.url, ADMIN_TOKEN)
    until(driver, lambda d: d.find_element(By.ID, "who").text == "alice", "alice is signed in")


def test_a_printer_column_of_markup_is_shown_as_text(cluster: UiCluster, browser: Any) -> None:
    cluster.ok("POST", "/apis/example.com/v1/namespaces/default/notes", {
        "apiVersion": "example.com/v1", "kind": "Note", "metadata": {"name": "xss-note"},
        "spec": {"text": f"{PAYLOAD} {BIDI}", "link": JS_URL}})
    sign_in(browser, cluster)
    browser.get(cluster.url + "/ui/#/r/example.com/v1/notes?ns=default")
    cells = until(browser, lambda d: [td.text for td in d.find_elements(
        By.CSS_SELECTOR, "#table tr[data-name=xss-note] td")], "the row shows")
    assert f"{PAYLOAD} invoice\\u202efdp.exe" in cells
    assert JS_URL in cells
    assert_inert(browser)


def test_an_object_full_of_markup_is_shown_and_edited_as_text(
        cluster: UiCluster, browser: Any) -> None:
    hostile = {"note": PAYLOAD, "file": BIDI, "textarea": TEXTAREA}
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "xss-config", "annotations": hostile},
        "data": hostile})
    sign_in(browser, cluster)
    browser.get(cluster.url + "/ui/#/o/core/v1/configmaps/default/xss-config")
    text = until(browser, lambda d: d.find_element(By.ID, "object-json").text,
                 "the object's JSON shows")
    # the override is written as its JSON escape: the same JSON, nothing reordered
    assert '"file": "invoice\\u202efdp.exe"' in text
    assert json.dumps(IMG)[1:-1] in text
    assert_inert(browser)
    # the editor holds the object as text: "</textarea>" does not close it, and what it would
    # save is the object, overrides included, unchanged
    browser.find_element(By.ID, "edit").click()
    editor = until(browser, lambda d: d.find_element(By.ID, "editor"), "the editor opens")
    edited = json.loads(editor.get_property("value"))
    assert edited["data"] == hostile
    assert edited["metadata"]["annotations"] == hostile
    assert_inert(browser)
    # saved with one key more, the rest of the text as the editor showed it
    browser.execute_script(
        "const e = document.getElementById('editor');"
        "e.value = e.value.replace('\"data\": {', '\"data\": {\"saved\": \"1\", ');")
    browser.find_element(By.ID, "save").click()
    saved = eventually_blocking(
        lambda: (got := cluster.ok("GET", "/api/v1/namespaces/default/configmaps/xss-config"))
        ["data"].get("saved") == "1" and got, what="the edit is saved")
    assert saved["data"] == {**hostile, "saved": "1"}
    assert saved["metadata"]["annotations"] == hostile
    assert_inert(browser)


def test_conditions_events_and_owners_full_of_markup_are_shown_as_text(
        cluster: UiCluster, browser: Any) -> None:
    widget = cluster.ok("POST", "/apis/example.com/v1/namespaces/default/widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "xss-widget"},
        "spec": {"size": 1}})
    cluster.ok("PATCH", "/apis/example.com/v1/namespaces/default/widgets/xss-widget/status",
               {"status": {"conditions": [{
                   "type": "Ready", "status": "False", "reason": "Broken",
                   "message": f"{PAYLOAD} {BIDI}",
                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
               content_type="application/merge-patch+json")
    cluster.ok("POST", "/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "xss-widget.1"},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Widget",
                           "name": "xss-widget", "namespace": "default",
                           "uid": widget["metadata"]["uid"]},
        "reason": "Hostile", "message": f"{TEXTAREA} {BIDI}", "type": "Warning",
        "source": {"component": SCRIPT}, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"})
    # a child that names its owner with markup as its manager and as an annotation
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps?fieldManager=%3Cb%3Ex%3C%2Fb%3E", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "xss-child", "annotations": {"a": PAYLOAD},
                     "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget",
                                          "name": "xss-widget",
                                          "uid": widget["metadata"]["uid"]}]}})
    sign_in(browser, cluster)
    browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/default/xss-widget")
    until(browser, lambda d: IMG in d.find_element(By.ID, "health-message").text,
          "the health message shows")
    until(browser, lambda d: "Hostile: </textarea>" in d.find_element(
        By.CSS_SELECTOR, "#timeline tr[data-what=event]").text, "the event shows")
    until(browser, lambda d: d.find_element(
        By.CSS_SELECTOR, "#tree li[data-name=xss-child]"), "the child shows in the tree")
    conditions = browser.find_element(By.ID, "conditions").text
    assert "invoice\\u202efdp.exe" in conditions
    assert SCRIPT in browser.find_element(By.ID, "timeline").text
    assert_inert(browser)
    browser.get(cluster.url + "/ui/#/o/core/v1/configmaps/default/xss-child")
    until(browser, lambda d: d.find_element(
        By.CSS_SELECTOR, "#tree li[data-name=xss-widget]"), "the owner shows in the tree")
    until(browser, lambda d: "write Update" in d.find_element(By.ID, "timeline").text
          and "<b>x</b>" in d.find_element(By.ID, "timeline").text,
          "the write of the manager named with markup shows")
    assert_inert(browser)


def test_a_link_to_a_dot_segment_name_reaches_no_other_object(
        cluster: UiCluster, browser: Any) -> None:
    # the browser resolves ".." before sending a request: configmaps/.. would be the namespace
    # itself, shown as a ConfigMap with a Delete button that deletes the namespace
    cluster.ok("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "precious"}})
    sign_in(browser, cluster)
    for link, refused in [
            ("#/o/core/v1/configmaps/precious/..", 'not a valid name: ".."'),
            ("#/o/core/v1/configmaps/precious/.", 'not a valid name: "."'),
            ("#/o/core/v1/configmaps/../precious", 'not a valid namespace: ".."'),
            ("#/r/core/v1/configmaps?ns=..", 'not a valid namespace: ".."'),
            ("#/o/core/v1/configmaps/precious/%E0%A4%A", "a malformed escape in the link")]:
        # from a page that shows an object, so that a stale view would be noticed
        browser.get(cluster.url + "/ui/#/o/core/v1/namespaces/-/precious")
        until(browser, lambda d: d.find_element(By.ID, "object-json"), "a namespace shows")
        browser.get(cluster.url + "/ui/" + link)
        until(browser, lambda d, refused=refused: refused in d.find_element(By.ID, "error").text,
              f"{link} is refused")
        assert not browser.find_elements(By.ID, "object-json"), link
        assert not browser.find_elements(By.ID, "delete"), link
    # an ownerReference is data too: an owner named ".." is not read (the finalizer keeps
    # the object readable once the garbage collector finds its owner absent)
    cluster.ok("POST", "/api/v1/namespaces/precious/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dotted-owner", "finalizers": ["example.com/hold"],
                     "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "..",
            "uid": "00000000-0000-0000-0000-000000000001"}]}})
    browser.get(cluster.url + "/ui/#/o/core/v1/configmaps/precious/dotted-owner")
    until(browser, lambda d: 'cannot read: not a valid name: ".."' in d.find_element(
        By.ID, "tree").text, "the owner is not read")
    assert "Namespace" not in browser.find_element(By.ID, "tree").text
    assert cluster.call("GET", "/api/v1/namespaces/precious")[0] == 200
    cluster.ok("PATCH", "/api/v1/namespaces/precious/configmaps/dotted-owner",
               {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")


def test_html_sinks_refuse_strings_under_the_pages_trusted_types_policy(
        cluster: UiCluster, browser: Any) -> None:
    sign_in(browser, cluster)
    got = browser.execute_script("""
        const tries = {
          innerHTML: () => { document.getElementById("who").innerHTML = "<i id=tt>x</i>"; },
          insertAdjacentHTML: () => document.body.insertAdjacentHTML("beforeend", "<i id=tt>x</i>"),
          handler: () => document.body.setAttribute("onclick", "window.pwned = 1"),
          policy: () => trustedTypes.createPolicy("p", { createHTML: (s) => s }),
        };
        const out = {};
        for (const [name, attempt] of Object.entries(tries)) {
          try { attempt(); out[name] = "accepted"; } catch (e) { out[name] = e.name; }
        }
        out.made = document.querySelectorAll("#tt").length;
        return out;
    """)
    assert got == {"innerHTML": "TypeError", "insertAdjacentHTML": "TypeError",
                   "handler": "TypeError", "policy": "TypeError", "made": 0}, got


def test_the_token_stays_in_the_tab_and_a_bad_one_is_refused_cleanly(
        cluster: UiCluster, browser: Any) -> None:
    browser.get(cluster.url + "/ui/")
    browser.execute_script("sessionStorage.clear()")
    for bad, message in [("not a token ü", "That is not a bearer token"),
                         ("wrong-token-0123456789", "The server refused that token (401")]:
        browser.get(cluster.url + "/ui/#/")
        field = until(browser, lambda d: d.find_element(By.ID, "token"), "the sign-in form")
        field.send_keys(bad)
        browser.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
        until(browser, lambda d, message=message: message in d.find_element(By.ID, "main").text,
              f"{bad!r} is refused")
        assert browser.execute_script("return sessionStorage.length") == 0
        assert browser.find_element(By.ID, "error").text == ""
    # a sign-in link whose fragment is not a token: refused, and gone from the address bar
    browser.get(cluster.url + "/ui/#token=%E0%A4%A")
    until(browser, lambda d: "holds no usable token" in d.find_element(By.ID, "main").text,
          "the link is refused")
    assert browser.current_url == cluster.url + "/ui/#/"
    sign_in(browser, cluster)
    stored = browser.execute_script(
        "return [sessionStorage.getItem('setpoint.token'), localStorage.length, document.cookie]")
    assert stored == [ADMIN_TOKEN, 0, ""]
    assert ADMIN_TOKEN not in browser.current_url
    browser.find_element(By.ID, "signout").click()
    until(browser, lambda d: d.find_element(By.ID, "token"), "the sign-in form is back")
    assert browser.execute_script("return sessionStorage.length") == 0


def test_a_partial_table_keeps_to_the_range_it_read(cluster: UiCluster, browser: Any) -> None:
    # a kind larger than the table's limit: changes to objects past the last row read stay
    # out (they would grow the table, row by row, to every object of the kind)
    cluster.ok("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "large"}})
    base = "/apis/example.com/v1/namespaces/large/widgets"
    for name in ("w1", "w2", "w3", "w4"):
        cluster.ok("POST", base, {"apiVersion": "example.com/v1", "kind": "Widget",
                                  "metadata": {"name": name}, "spec": {"size": 1}})
    sign_in(browser, cluster)
    browser.get(cluster.url + "/ui/#/r/example.com/v1/widgets?ns=large&limit=2")
    until(browser, lambda d: d.find_element(By.ID, "table-status").text.startswith(
        "2 objects, live (only the first 2 were read"), "the table is partial")
    for name in ("w3", "w4"):
        cluster.ok("PATCH", f"{base}/{name}", {"spec": {"size": 2}},
                   content_type="application/merge-patch+json")
    cluster.ok("PATCH", f"{base}/w2", {"spec": {"size": 5}},
               content_type="application/merge-patch+json")
    # created among the rows read: it joins them, after the changes above were applied
    cluster.ok("POST", base, {"apiVersion": "example.com/v1", "kind": "Widget",
                              "metadata": {"name": "w0"}, "spec": {"size": 1}})
    until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#table tr[data-name=w0]"),
          "the new object in the range shows")
    names = [tr.get_attribute("data-name")
             for tr in browser.find_elements(By.CSS_SELECTOR, "#table tbody tr")]
    assert names == ["w0", "w1", "w2"]
    assert "5" in [td.text for td in browser.find_elements(
        By.CSS_SELECTOR, "#table tr[data-name=w2] td")]


def test_a_pod_and_an_owner_named_with_markup_are_shown_as_text(
        cluster: UiCluster, browser: Any) -> None:
    # an image and a command are the user's text too, and so is an ownerReference's name
    image = "registry.example/<img src=x id=injected-img onerror=window.pwned=1>:1"
    cluster.ok("POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "xss-pod"},
        "spec": {"containers": [{"name": "c", "image": image,
                                 "command": ["sh", "-c", f"echo '{SCRIPT}' {BIDI}"]}]}})
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "markup-owner", "finalizers": ["example.com/hold"],
                     "ownerReferences": [{
                         "apiVersion": "v1", "kind": "Pod", "name": IMG,
                         "uid": "00000000-0000-0000-0000-000000000002"}]}})
    sign_in(browser, cluster)
    browser.get(cluster.url + "/ui/#/o/core/v1/pods/default/xss-pod")
    text = until(browser, lambda d: d.find_element(By.ID, "object-json").text,
                 "the pod's JSON shows")
    assert json.dumps(image)[1:-1] in text
    assert "\\u202efdp.exe" in text
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#tree li.self"),
          "the pod's tree shows")
    assert_inert(browser)
    browser.get(cluster.url + "/ui/#/o/core/v1/configmaps/default/markup-owner")
    until(browser, lambda d: f"Pod {IMG}" in d.find_element(By.ID, "tree").text,
          "the owner's name shows in the tree")
    assert_inert(browser)
    cluster.ok("PATCH", "/api/v1/namespaces/default/configmaps/markup-owner",
               {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
