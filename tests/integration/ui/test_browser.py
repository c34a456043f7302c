"""The UI in a real headless browser (Debian's chromium and chromedriver, driven by selenium)
against a ``setpoint serve`` process: sign in with a token, find a custom resource through
discovery and its Table, see why it is not ready, watch its owner tree change live, and find
that a ``view`` user's edit is refused by the API with its 403 message shown.

Skipped, with the reason, when selenium, chromium or chromedriver is not installed
(``.ci/run`` installs them)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from setpoint.testing.waiting import eventually_blocking
from tests.integration.ui.browser import chromium, snapshot, until
from tests.integration.ui.browser import sign_in as browser_sign_in
from tests.integration.ui.cluster import ADMIN_TOKEN, VIEW_TOKEN, WIDGETS_CRD, UiCluster, start

pytestmark = pytest.mark.slow

pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiCluster]:
    c = start(tmp_path_factory.mktemp("ui-browser") / "serve")
    try:
        c.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", WIDGETS_CRD)
        eventually_blocking(lambda: c.call("GET", "/apis/example.com/v1/widgets")[0] == 200,
                            what="the Widget CRD is served")
        yield c
    finally:
        c.serve.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("chromium")) as driver:
        yield driver


def sign_in(driver: Any, cluster: UiCluster, token: str) -> None:
    browser_sign_in(driver, cluster.url, token)


def create_widget(cluster: UiCluster, name: str, conditions: list[dict[str, Any]]) -> Any:
    cluster.ok("POST", "/apis/example.com/v1/namespaces/default/widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
        "spec": {"size": 3}})
    return cluster.ok("PATCH", f"/apis/example.com/v1/namespaces/default/widgets/{name}/status",
                      {"status": {"conditions": conditions}},
                      content_type="application/merge-patch+json")


def test_sign_in_list_a_custom_kind_and_see_why_an_object_is_not_ready(
        cluster: UiCluster, browser: Any) -> None:
    create_widget(cluster, "broken", [{
        "type": "Ready", "status": "False", "reason": "NoCapacity",
        "message": "no capacity left in pool blue", "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    create_widget(cluster, "fine", [{
        "type": "Ready", "status": "True", "reason": "Provisioned", "message": "all good",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "who").text == "alice", "alice is signed in")
    link = until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#kinds a[data-kind=Widget]"),
                 "discovery lists the custom kind")
    link.click()

    def row(name: str) -> Any:
        return browser.find_element(By.CSS_SELECTOR, f"#table tr[data-name={name}]")

    def cells(name: str) -> list[str]:
        return [td.text for td in row(name).find_elements(By.TAG_NAME, "td")]

    def row_health(name: str) -> str:
        return row(name).find_element(By.CSS_SELECTOR, "[data-health]") \
            .get_attribute("data-health")

    # the table is redrawn live: every read is inside until(), which reads again when an
    # element it found went stale
    until(browser, lambda d: [th.text for th in d.find_elements(
        By.CSS_SELECTOR, "#table th")][:2] == ["Name", "Size"]  # the CRD's printer column
        and "3" in cells("broken") and row_health("broken") == "not-ready"
        and row_health("fine") == "ready",
        "the table lists the widgets with their printer column and health")
    snapshot(browser, "table")

    until(browser, lambda d: d.find_element(By.ID, "notready").click() or True,
          "the not-ready filter is clicked")
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#table tr[data-name=fine]")
          and d.find_elements(By.CSS_SELECTOR, "#table tr[data-name=broken]"),
          "the not-ready filter keeps only the broken widget")

    until(browser, lambda d: row("broken").find_element(By.LINK_TEXT, "broken").click() or True,
          "the broken widget's link is clicked")
    until(browser, lambda d: health(d)[0] == "not-ready"
          and "NoCapacity" in health(d)[1] and "no capacity left in pool blue" in health(d)[1],
          "the object's health shows why it is not ready")

    def json_text(d: Any) -> str:
        return str(d.find_element(By.ID, "object-json").text)

    # managedFields are folded away from the object's text
    until(browser, lambda d: '"size": 3' in json_text(d) and "managedFields" not in json_text(d)
          and d.find_element(By.ID, "managed-fields").get_attribute("open") is None,
          "the object's JSON shows with managedFields folded")
    snapshot(browser, "not-ready")


def test_owner_tree_updates_live_when_a_child_is_deleted(
        cluster: UiCluster, browser: Any) -> None:
    owner = create_widget(cluster, "parent", [{
        "type": "Ready", "status": "True", "reason": "Ok", "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "parent",
           "uid": owner["metadata"]["uid"], "controller": True}
    for name in ("parent-config", "parent-extra"):
        cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "ownerReferences": [ref]}, "data": {"k": "v"}})
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    # up: a child's tree starts at its owner
    browser.get(cluster.url + "/ui/#/o/core/v1/configmaps/default/parent-config")
    until(browser, lambda d: d.find_element(
        By.CSS_SELECTOR, "#tree li[data-kind=Widget][data-name=parent] "
                         "li.self[data-name=parent-config]"), "the owner is above the child")
    # down, and live
    browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/default/parent")
    tree_child = "#tree li[data-name=parent] li[data-kind=ConfigMap][data-name={}]"
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, tree_child.format("parent-config"))
          and d.find_element(By.CSS_SELECTOR, tree_child.format("parent-extra")),
          "the tree shows both children")
    snapshot(browser, "owner-tree")
    status, _, _ = cluster.call("DELETE", "/api/v1/namespaces/default/configmaps/parent-config")
    assert status == 200
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR,
                                                 tree_child.format("parent-config"))
          and d.find_elements(By.CSS_SELECTOR, tree_child.format("parent-extra")),
          "the deleted child leaves the tree, the other stays")
    # and a new one appears
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "parent-new", "ownerReferences": [ref]}, "data": {"k": "v"}})
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, tree_child.format("parent-new")),
          "a new child joins the tree")


def test_a_view_user_cannot_edit_and_sees_the_apis_403(
        cluster: UiCluster, browser: Any) -> None:
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "readonly"},
        "data": {"colour": "blue"}})
    sign_in(browser, cluster, VIEW_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "who").text == "viewer", "viewer signed in")
    browser.get(cluster.url + "/ui/#/o/core/v1/configmaps/default/readonly")
    until(browser, lambda d: "blue" in d.find_element(By.ID, "object-json").text,
          "the viewer reads the object")
    browser.find_element(By.ID, "edit").click()
    editor = until(browser, lambda d: d.find_element(By.ID, "editor"), "the editor opens")
    text = editor.get_attribute("value").replace('"blue"', '"red"')
    editor.clear()
    editor.send_keys(text)
    browser.find_element(By.ID, "save").click()
    error = until(browser, lambda d: d.find_element(By.ID, "error").text, "an error shows")
    assert error.startswith("403 Forbidden: ")
    assert 'configmaps "readonly" is forbidden: User "viewer" cannot update resource ' \
           '"configmaps"' in error
    assert cluster.ok("GET", "/api/v1/namespaces/default/configmaps/readonly")["data"] == \
        {"colour": "blue"}


def test_ui_login_prints_a_url_that_signs_the_tab_in(cluster: UiCluster, browser: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "setpoint", "ui-login", "--service-account", "default/ui-reader",
         "--create", "--duration", "10m", "--kubeconfig", str(cluster.serve.kubeconfig)],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip()
    prefix = cluster.url + "/ui/#token="
    assert url.startswith(prefix)
    token = url[len(prefix):]
    browser.get(cluster.url + "/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(url)
    until(browser, lambda d: d.find_element(By.ID, "who").text ==
          "system:serviceaccount:default:ui-reader", "the service account is signed in")
    assert token not in browser.current_url
    assert browser.execute_script("return sessionStorage.getItem('setpoint.token')") == token


def test_pages_left_behind_give_their_watch_connections_back(
        cluster: UiCluster, browser: Any) -> None:
    # each object page holds several watches; browsers allow about six connections to one
    # server, so pages kept in the back-forward cache with their watches open would stall
    # the next page until those streams ended
    create_widget(cluster, "visited", [{
        "type": "Ready", "status": "True", "reason": "Ok", "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    for _ in range(4):
        browser.get("about:blank")
        browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/default/visited")
        until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#tree li.self")
              and d.find_element(By.CSS_SELECTOR, "#events h2"), "the object page is live")
    browser.get("about:blank")
    browser.get(cluster.url + "/ui/#/r/example.com/v1/widgets?ns=default")
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#table tr[data-name=visited]"),
          "the next page loads")


def test_a_table_follows_creates_status_changes_and_deletes(
        cluster: UiCluster, browser: Any) -> None:
    cluster.ok("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "livetable"}})
    base = "/apis/example.com/v1/namespaces/livetable/widgets"
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/r/example.com/v1/widgets?ns=livetable")
    until(browser, lambda d: d.find_element(By.ID, "table-status").text == "0 objects, live",
          "the empty table is live")

    def health_of(name: str) -> str | None:
        found = browser.find_elements(By.CSS_SELECTOR,
                                      f"#table tr[data-name={name}] [data-health]")
        return found[0].get_attribute("data-health") if found else None

    for name in ("b-second", "a-first"):
        cluster.ok("POST", base, {"apiVersion": "example.com/v1", "kind": "Widget",
                                  "metadata": {"name": name}, "spec": {"size": 1}})
    until(browser, lambda d: [tr.get_attribute("data-name") for tr in d.find_elements(
        By.CSS_SELECTOR, "#table tbody tr")] == ["a-first", "b-second"],
        "created rows appear in name order")
    assert health_of("a-first") == "unknown"
    cluster.ok("PATCH", f"{base}/a-first/status", {"status": {"conditions": [{
        "type": "Ready", "status": "False", "reason": "Broken", "message": "it broke",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        content_type="application/merge-patch+json")
    until(browser, lambda d: health_of("a-first") == "not-ready",
          "a status change turns the row not ready")
    cluster.ok("DELETE", f"{base}/b-second")
    until(browser, lambda d: health_of("b-second") is None
          and d.find_element(By.ID, "table-status").text == "1 object, live",
          "a deleted object's row goes")


def test_the_timeline_shows_who_wrote_what_beside_the_events(
        cluster: UiCluster, browser: Any) -> None:
    cluster.ok("POST", "/apis/example.com/v1/namespaces/default/widgets", {
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "timed"},
        "spec": {"size": 2}})
    widget = cluster.ok(
        "PATCH", "/apis/example.com/v1/namespaces/default/widgets/timed/status"
                 "?fieldManager=widget-operator",
        {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ok",
                                    "message": "ok",
                                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        content_type="application/merge-patch+json")
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/default/timed")

    def rows() -> list[str]:
        return [tr.text for tr in browser.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")]

    until(browser, lambda d: any("widget-operator" in r and "write Update status" in r
                                 and "status.conditions" in r for r in rows()),
          "the operator's status write is on the timeline")
    # the timeline is redrawn as it follows its watches: read it again when a row goes stale
    until(browser, lambda d: any("write Update" in r and "spec.size" in r for r in rows()),
          "the creator's spec write is on the timeline")
    cluster.ok("POST", "/api/v1/namespaces/default/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "timed.1"},
        "involvedObject": {"apiVersion": "example.com/v1", "kind": "Widget", "name": "timed",
                           "namespace": "default", "uid": widget["metadata"]["uid"]},
        "reason": "Provisioned", "message": "two widgets provisioned", "type": "Normal",
        "source": {"component": "widget-operator"}, "count": 1,
        "firstTimestamp": "2030-01-01T00:00:00Z", "lastTimestamp": "2030-01-01T00:00:00Z"})
    until(browser, lambda d: rows() and "Provisioned: two widgets provisioned" in rows()[0],
          "the new event arrives live, newest first")


HEALTH_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("being deleted", {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
     "terminating", "being deleted"),
    ("status older than spec", {"metadata": {"generation": 3},
                                "status": {"observedGeneration": 2, "conditions": [
                                    {"type": "Ready", "status": "False", "message": "old"}]}},
     "progressing", "observedGeneration 2 < generation 3"),
    ("Ready False", {"metadata": {"generation": 2}, "status": {"observedGeneration": 2,
                     "conditions": [{"type": "Ready", "status": "False", "reason": "Down",
                                     "message": "the pool is gone"}]}},
     "not-ready", "Ready=False: Down: the pool is gone"),
    ("Available False", {"status": {"conditions": [
        {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable"}]}},
     "not-ready", "Available=False: MinimumReplicasUnavailable"),
    ("Stalled", {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                           {"type": "Stalled", "status": "True",
                                            "message": "quota exceeded"}]}},
     "not-ready", "quota exceeded"),
    ("phase Failed", {"status": {"phase": "Failed", "message": "exit 1"}},
     "not-ready", "phase Failed: exit 1"),
    ("Ready Unknown", {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
     "progressing", "Ready=Unknown"),
    ("Reconciling", {"status": {"conditions": [{"type": "Ready", "status": "True"},
                                               {"type": "Reconciling", "status": "True"}]}},
     "progressing", "Reconciling=True"),
    ("stale Ready", {"metadata": {"generation": 4}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "observedGeneration": 3}]}},
     "progressing", "Ready describes generation 3 < 4"),
    ("Ready True", {"metadata": {"generation": 1}, "status": {"observedGeneration": 1,
                    "conditions": [{"type": "Ready", "status": "True"}]}},
     "ready", "Ready=True"),
    ("phase Succeeded", {"status": {"phase": "Succeeded"}}, "ready", "phase Succeeded"),
    ("replicas available", {"metadata": {"generation": 2}, "spec": {"replicas": 2},
                            "status": {"observedGeneration": 2, "replicas": 2,
                                       "readyReplicas": 2, "availableReplicas": 2}},
     "ready", "2 of 2 replicas available"),
    ("replicas missing", {"spec": {"replicas": 3}, "status": {"observedGeneration": 1,
                                                              "replicas": 3,
                                                              "readyReplicas": 1}},
     "progressing", "1 of 3 replicas ready"),
    ("replicas none yet", {"spec": {"replicas": 1}, "status": {"observedGeneration": 1}},
     "progressing", "0 of 1 replicas ready"),
    ("replicas with Available False", {"spec": {"replicas": 1}, "status": {
        "observedGeneration": 1, "availableReplicas": 1,
        "conditions": [{"type": "Available", "status": "False"}]}},
     "not-ready", "Available=False"),
    ("nothing to go by", {"status": {"replicas": 3}}, "unknown", "no Ready or Available"),
    ("replicas without a status generation", {"spec": {"replicas": 3}, "status": {}},
     "unknown", "no Ready or Available"),
    ("no status", {}, "unknown", "no Ready or Available"),
    ("malformed conditions", {"status": {"conditions": "yes"}}, "unknown", "no Ready"),
]


def test_the_health_rule_as_documented(cluster: UiCluster, browser: Any) -> None:
    browser.get(cluster.url + "/ui/")
    results = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "import('./health.js').then((m) => done(arguments[0].map((o) => m.health(o))),"
        " (e) => done(String(e)));", [case[1] for case in HEALTH_CASES])
    assert isinstance(results, list), results
    for (what, _, state, message), got in zip(HEALTH_CASES, results, strict=True):
        assert got["state"] == state, (what, got)
        assert message in got["message"], (what, got)


def test_a_table_says_when_it_read_only_part_of_a_kind(
        cluster: UiCluster, browser: Any) -> None:
    cluster.ok("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "partial"}})
    for name in ("p1", "p2", "p3"):
        cluster.ok("POST", "/apis/example.com/v1/namespaces/partial/widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": 1}})
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/r/example.com/v1/widgets?ns=partial&limit=2")
    until(browser, lambda d: d.find_element(By.ID, "table-status").text ==
          "2 objects, live (only the first 2 were read: narrow by namespace or labels)",
          "the table says it is partial")
    browser.get(cluster.url + "/ui/#/r/example.com/v1/widgets?ns=partial")
    until(browser, lambda d: d.find_element(By.ID, "table-status").text == "3 objects, live",
          "without a limit it reads them all")


def test_an_owner_tree_reaches_down_to_pods_with_their_readiness(
        cluster: UiCluster, browser: Any) -> None:
    owner = create_widget(cluster, "runner", [{
        "type": "Ready", "status": "True", "reason": "Ok", "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "runner",
           "uid": owner["metadata"]["uid"], "controller": True}
    for name in ("runner-a", "runner-b"):
        cluster.ok("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "ownerReferences": [ref]},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}})
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/default/runner")
    pod = "#tree li[data-name=runner] li[data-kind=Pod][data-name={}] > [data-health]"
    until(browser, lambda d: all(
        d.find_element(By.CSS_SELECTOR, pod.format(name)).get_attribute("data-health")
        == "ready" for name in ("runner-a", "runner-b")),
        "both pods show in the tree, ready (the simulated runtime runs them)")
    snapshot(browser, "pods")
    status, _, _ = cluster.call(
        "DELETE", "/api/v1/namespaces/default/pods/runner-a?gracePeriodSeconds=0")
    assert status == 200
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, pod.format("runner-a"))
          and d.find_elements(By.CSS_SELECTOR, pod.format("runner-b")),
          "the deleted pod leaves the tree, live")


def test_the_tree_watches_the_kinds_that_report_health_before_those_beside_them(
        cluster: UiCluster, browser: Any) -> None:
    # an object page follows only two of its tree's kinds: a BitcoinNetwork owns a
    # ConfigMap and a Service besides its StatefulSet and Pods, and the Pods' readiness is
    # what its tree is looked at for. ConfigMap and Lease come before Pod in the tree's
    # order, and have no status
    owner = create_widget(cluster, "mixed", [{
        "type": "Ready", "status": "True", "reason": "Ok", "message": "ok",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}])
    ref = {"apiVersion": "example.com/v1", "kind": "Widget", "name": "mixed",
           "uid": owner["metadata"]["uid"], "controller": True}
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "mixed-config", "ownerReferences": [ref]}, "data": {"k": "v"}})
    cluster.ok("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "mixed-lease", "ownerReferences": [ref]},
        "spec": {"holderIdentity": "mixed"}})
    for name in ("mixed-a", "mixed-b"):
        cluster.ok("POST", "/api/v1/namespaces/default/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "ownerReferences": [ref]},
            "spec": {"containers": [{"name": "main", "image": "busybox",
                                     "command": ["sleep", "3600"]}]}})
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/default/mixed")
    child = "#tree li[data-name=mixed] li[data-kind={}][data-name={}]"
    pod = child.format("Pod", "{}") + " > [data-health]"
    until(browser, lambda d: d.find_element(By.CSS_SELECTOR,
                                            child.format("ConfigMap", "mixed-config"))
          and d.find_element(By.CSS_SELECTOR, child.format("Lease", "mixed-lease"))
          and all(d.find_element(By.CSS_SELECTOR, pod.format(name)).get_attribute(
              "data-health") == "ready" for name in ("mixed-a", "mixed-b")),
          "the tree shows the ConfigMap, the Lease and both pods, ready")
    # nothing writes the widget: only a watch of Pods can show this
    status, _, _ = cluster.call(
        "DELETE", "/api/v1/namespaces/default/pods/mixed-a?gracePeriodSeconds=0")
    assert status == 200
    until(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, pod.format("mixed-a"))
          and d.find_elements(By.CSS_SELECTOR, pod.format("mixed-b")),
          "the deleted pod leaves the tree, live")


HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[2] / "examples"


@contextlib.contextmanager
def operator(cluster: UiCluster, target: Path, log: Path, *args: str) -> Iterator[None]:
    """``setpoint run TARGET`` against the cluster (its admin kubeconfig) for the block;
    stopped with SIGTERM afterwards, and it must have exited cleanly."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "setpoint", "run", str(target), "--kubeconfig",
             str(cluster.serve.kubeconfig), *args], stdout=out, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    output = log.read_text()
    assert code == 0, output
    assert "Traceback" not in output, output


def install(cluster: UiCluster, path: Path, namespace: str = "default") -> None:
    """Create every document of a YAML file; wait until a CRD's kind is served."""
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] == "CustomResourceDefinition":
            cluster.ok("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", doc)
            spec = doc["spec"]
            version = spec["versions"][0]["name"]
            served = f"/apis/{spec['group']}/{version}/{spec['names']['plural']}"
            eventually_blocking(lambda served=served: cluster.call("GET", served)[0] == 200,
                                what=f"{served} is served")
            continue
        group_version = doc["apiVersion"]
        plural = doc["kind"].lower() + "s"
        cluster.ok("POST", f"/apis/{group_version}/namespaces/{namespace}/{plural}", doc)


def timeline(driver: Any) -> list[tuple[str, str, str, str]]:
    """The timeline's rows, newest first: (kind of row, what, who, details)."""
    rows = []
    for tr in driver.find_elements(By.CSS_SELECTOR, "#timeline tbody tr"):
        cells = [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        rows.append((tr.get_attribute("data-what"), cells[1], cells[2], cells[3]))
    return rows


def health(driver: Any) -> tuple[str, str]:
    """The object page's health state and message."""
    return (driver.find_element(By.CSS_SELECTOR, "#health [data-health]")
            .get_attribute("data-health"), driver.find_element(By.ID, "health-message").text)


def test_an_operator_fixes_a_not_ready_object_live_and_the_timeline_shows_its_reconcile(
        cluster: UiCluster, browser: Any, tmp_path: Path) -> None:
    cluster.ok("POST", "/api/v1/namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "repair"}})
    base = "/apis/example.com/v1/namespaces/repair/widgets"
    cluster.ok("POST", base, {"apiVersion": "example.com/v1", "kind": "Widget",
                              "metadata": {"name": "stuck"}, "spec": {"size": 2}})
    cluster.ok("PATCH", f"{base}/stuck/status", {"status": {"conditions": [{
        "type": "Ready", "status": "False", "reason": "NoCapacity",
        "message": "no capacity left in pool blue",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        content_type="application/merge-patch+json")
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/o/example.com/v1/widgets/repair/stuck")
    until(browser, lambda d: health(d)[0] == "not-ready"
          and "NoCapacity: no capacity left in pool blue" in health(d)[1],
          "the widget shows as not ready, with its message")
    with operator(cluster, HERE / "widget_operator.py", tmp_path / "run.log",
                  "--namespace", "repair"):
        until(browser, lambda d: health(d)[0] == "ready"
              and "Repaired: capacity found in pool green" in health(d)[1]
              and d.find_element(By.CSS_SELECTOR, "#tree li.self > [data-health]")
              .get_attribute("data-health") == "ready",
              "the operator's fix shows live: the widget is ready, in its tree too")
        # the reconcile that fixed it, with its trigger, beside the write it made
        until(browser, lambda d: any(
            kind == "reconcile" and what == "reconcile success" and who == "widget"
            and "triggered by initial" in details and " ms" in details
            for kind, what, who, details in timeline(d))
            and any(kind == "write" and "write Update status" in what
                    and "status.conditions" in details for kind, what, _, details in timeline(d)),
            "the timeline shows the operator's reconcile and its status write")
        snapshot(browser, "reconcile")
    events = cluster.ok("GET", "/apis/events.k8s.io/v1/namespaces/repair/events")["items"]
    fixed = [e for e in events if e["regarding"]["name"] == "stuck"
             and e["action"] == "Reconcile" and "triggered by initial" in e["note"]]
    assert fixed
    assert fixed[0]["reportingController"] == "widget"
    assert fixed[0]["reason"] == "Reconciled"


def test_a_deployments_tree_shows_its_replicaset_and_pods_and_replaces_a_deleted_pod(
        cluster: UiCluster, browser: Any) -> None:
    labels = {"app": "web"}
    cluster.ok("POST", "/apis/apps/v1/namespaces/default/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [{
                     "name": "main", "image": "busybox", "command": ["sleep", "3600"]}]}}}})
    sign_in(browser, cluster, ADMIN_TOKEN)
    until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
    browser.get(cluster.url + "/ui/#/o/apps/v1/deployments/default/web")
    deployment = "#tree li.self[data-kind=Deployment][data-name=web]"
    replicaset = f"{deployment} li[data-kind=ReplicaSet]"

    def pods(d: Any) -> dict[str, str]:
        return {li.get_attribute("data-name"): li.find_element(
            By.CSS_SELECTOR, ":scope > [data-health]").get_attribute("data-health")
            for li in d.find_elements(By.CSS_SELECTOR, f"{replicaset} li[data-kind=Pod]")}

    def own_health(d: Any, selector: str) -> str:
        return d.find_element(By.CSS_SELECTOR, f"{selector} > [data-health]") \
            .get_attribute("data-health")

    until(browser, lambda d: len(pods(d)) == 2 and set(pods(d).values()) == {"ready"}
          and own_health(d, replicaset) == "ready" and own_health(d, deployment) == "ready",
          "the Deployment, its ReplicaSet and its two pods show in the tree, ready")
    snapshot(browser, "deployment")
    first = pods(browser)
    victim = sorted(first)[0]
    status, _, _ = cluster.call(
        "DELETE", f"/api/v1/namespaces/default/pods/{victim}?gracePeriodSeconds=0")
    assert status == 200
    until(browser, lambda d: victim not in pods(d) and len(pods(d)) == 2
          and set(pods(d).values()) == {"ready"},
          "the deleted pod leaves the tree and the ReplicaSet's replacement joins it, ready")
    assert set(pods(browser)) - set(first), "a new pod"


def test_the_book_example_catalogued_with_its_reconciles_on_the_timeline(
        cluster: UiCluster, browser: Any, tmp_path: Path) -> None:
    install(cluster, EXAMPLES / "book" / "crd.yaml")
    with operator(cluster, EXAMPLES / "book" / "operator.py", tmp_path / "run.log"):
        install(cluster, EXAMPLES / "book" / "books.yaml")
        sign_in(browser, cluster, ADMIN_TOKEN)
        until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
        browser.get(cluster.url + "/ui/#/o/library.example.com/v1/books/default/dune")
        until(browser, lambda d: health(d)[0] == "ready"
              and "Catalogued: listed in ConfigMap library-catalogue" in health(d)[1],
              "the book is catalogued")
        until(browser, lambda d: any(
            kind == "reconcile" and who == "book" for kind, _, who, _ in timeline(d))
            and any(kind == "event" and "Catalogued: catalogued as" in details
                    for kind, _, _, details in timeline(d)),
            "its reconciles and the operator's Catalogued event are on the timeline")
        snapshot(browser, "book")


def test_the_water_tank_converging_with_its_reconciles_on_the_timeline(
        cluster: UiCluster, browser: Any, tmp_path: Path) -> None:
    install(cluster, EXAMPLES / "watertank" / "crd.yaml")
    # the example's loop with its in-process plant: this server simulates pods, so the tank
    # program the example runs as a Pod would not answer
    with operator(cluster, HERE / "watertank_in_process.py", tmp_path / "run.log"):
        cluster.ok("POST", "/apis/waterworks.example.com/v1/namespaces/default/tanks", {
            "apiVersion": "waterworks.example.com/v1", "kind": "Tank",
            "metadata": {"name": "rooftop"}, "spec": {"targetLevel": 20, "tolerance": 2}})
        sign_in(browser, cluster, ADMIN_TOKEN)
        until(browser, lambda d: d.find_element(By.ID, "kinds"), "signed in")
        browser.get(cluster.url + "/ui/#/o/waterworks.example.com/v1/tanks/default/rooftop")
        until(browser, lambda d: '"pump": "filling"' in d.find_element(
            By.ID, "object-json").text, "the pump fills the tank")
        until(browser, lambda d: '"pump": "off"' in d.find_element(By.ID, "object-json").text
              and sum(kind == "reconcile" and "triggered by requeue_after" in details
                      for kind, _, _, details in timeline(d)) >= 2,
              "the level reaches its target: the pump is off, after requeued reconciles")
        snapshot(browser, "watertank")
