"""/ui serves the UI's static files to anyone, with strict security headers, and nothing
else: every data request goes through authentication and RBAC like any client's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from setpoint.server import ui
from tests.integration.ui.cluster import ADMIN_TOKEN, VIEW_TOKEN, UiCluster, start

ASSETS = {
    "/ui/": "text/html; charset=utf-8",
    "/ui/index.html": "text/html; charset=utf-8",
    "/ui/app.js": "text/javascript; charset=utf-8",
    "/ui/api.js": "text/javascript; charset=utf-8",
    "/ui/dom.js": "text/javascript; charset=utf-8",
    "/ui/health.js": "text/javascript; charset=utf-8",
    "/ui/app.css": "text/css; charset=utf-8",
    "/ui/favicon.svg": "image/svg+xml",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiCluster]:
    c = start(tmp_path_factory.mktemp("ui") / "serve")
    try:
        yield c
    finally:
        c.serve.stop()


def assert_security_headers(headers: dict[str, str]) -> None:
    csp = headers["Content-Security-Policy"]
    directives = {d.split()[0]: d.split()[1:] for d in csp.split("; ")}
    assert directives["default-src"] == ["'none'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["base-uri"] == ["'none'"]
    assert directives["require-trusted-types-for"] == ["'script'"]
    assert directives["trusted-types"] == ["'none'"]
    assert not any("unsafe" in v for values in directives.values() for v in values)
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
    assert headers["Cross-Origin-Resource-Policy"] == "same-origin"
    assert headers["Cache-Control"] == "no-cache"


def test_assets_are_served_without_credentials_with_security_headers(
        cluster: UiCluster) -> None:
    for path, content_type in ASSETS.items():
        status, headers, body = cluster.call("GET", path, token=None)
        assert status == 200, path
        assert headers["Content-Type"] == content_type, path
        assert body, path
        assert_security_headers(headers)


def test_ui_without_slash_redirects_to_the_index(cluster: UiCluster) -> None:
    status, headers, _ = cluster.call("GET", "/ui", token=None)
    assert status == 308
    assert headers["Location"] == "/ui/"
    assert_security_headers(headers)


def test_index_has_no_inline_script_and_loads_only_local_modules(cluster: UiCluster) -> None:
    _, _, body = cluster.call("GET", "/ui/", token=None)
    html = body.decode()
    scripts = html.split("<script")[1:]
    assert scripts, "the index loads the app"
    for script in scripts:
        opening, _, rest = script.partition(">")
        assert 'src="' in opening
        assert "//" not in opening
        assert rest.startswith("</script>"), "no inline script"
    assert "http://" not in html
    assert "https://" not in html


@pytest.mark.parametrize("path", [
    "/ui/nope.js", "/ui/../kubeconfig", "/ui/%2e%2e/kubeconfig", "/ui/static/app.js",
    "/ui/app.js/", "/ui//app.js", "/ui/__init__.py",
    # encoded dots, slashes and backslashes, NUL, dot segments, case, parameters, length
    "/ui/%2e%2e/%2e%2e/etc/passwd", "/ui/..%5capp.js", "/ui/%5capp.js", "/ui/\\app.js",
    "/ui/%2fapp.js", "/ui/app.js%00", "/ui/app.js%00.html", "/ui/%00", "/ui/.", "/ui/./app.js",
    "/ui/x/../app.js", "/ui/index.html/..", "/ui/APP.JS", "/ui/app.js;x", "/ui/%ff", "/ui/%",
    "/ui/" + "a" * 7000])
def test_anything_else_under_ui_is_a_404_status(cluster: UiCluster, path: str) -> None:
    status, headers, body = cluster.call("GET", path, token=None)
    assert status == 404
    assert json.loads(body)["kind"] == "Status"
    assert_security_headers(headers)


def test_writes_to_ui_are_refused(cluster: UiCluster) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, body = cluster.call(method, "/ui/app.js", {"x": 1}, token=ADMIN_TOKEN)
        assert status == 405, method
        assert json.loads(body)["reason"] == "MethodNotAllowed"
        assert headers["Allow"] == "GET, HEAD"


def test_assets_never_carry_data(cluster: UiCluster) -> None:
    secret_value = "ui-marker-7f3a9c"
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "marker"},
        "data": {"v": secret_value}})
    for path in ASSETS:
        for token in (None, ADMIN_TOKEN):
            _, _, body = cluster.call("GET", path, token=token)
            assert secret_value.encode() not in body
            assert b"marker" not in body


def test_the_ui_has_no_bypass_data_requests_need_a_token(cluster: UiCluster) -> None:
    # what the UI asks for, as it asks for it, without and with a bad token
    table = "application/json;as=Table;v=v1;g=meta.k8s.io"
    for token in (None, "not-a-token"):
        for path in ("/api/v1/namespaces/default/configmaps", "/apis"):
            status, _, body = cluster.call("GET", path, token=token, headers={"Accept": table})
            assert status == 401, (path, token, body)
        # a path that only looks like it leaves /ui is still /ui: a file name, not a route
        status, _, body = cluster.call("GET", "/ui/../api/v1/namespaces/default/configmaps",
                                       token=token, headers={"Accept": table})
        assert status == 404
        assert json.loads(body)["reason"] == "NotFound"


def test_a_view_user_reads_but_cannot_edit(cluster: UiCluster) -> None:
    cluster.ok("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "viewed"},
        "data": {"a": "1"}})
    table = cluster.ok("GET", "/api/v1/namespaces/default/configmaps?includeObject=Object",
                       token=VIEW_TOKEN,
                       headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert "viewed" in [row["object"]["metadata"]["name"] for row in table["rows"]]
    obj = cluster.ok("GET", "/api/v1/namespaces/default/configmaps/viewed", token=VIEW_TOKEN)
    obj["data"]["a"] = "2"
    status, _, body = cluster.call("PUT", "/api/v1/namespaces/default/configmaps/viewed", obj,
                                   token=VIEW_TOKEN)
    assert status == 403
    assert json.loads(body)["message"].startswith('configmaps "viewed" is forbidden: User '
                                                  '"viewer" cannot update')


def test_only_known_suffixes_of_the_directory_are_assets(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html>")
    (tmp_path / "notes.md").write_text("not served")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.js").write_text("nested: not served")
    assets = ui.Assets.load(tmp_path)
    assert set(assets.files) == {"index.html"}


def test_a_symbolic_link_in_the_directory_is_not_served(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not an asset")
    assets_dir = tmp_path / "assets"
    assets_dir.mkdir()
    (assets_dir / "index.html").write_text("<!doctype html>")
    (assets_dir / "leak.txt").symlink_to(outside / "secret.txt")
    (assets_dir / "app.js").symlink_to(assets_dir / "index.html")
    assert set(ui.Assets.load(assets_dir).files) == {"index.html"}


def test_the_packaged_directory_holds_the_app() -> None:
    assets = ui.Assets.load()
    assert {"index.html", "app.js", "api.js", "dom.js", "health.js", "app.css"} <= \
        set(assets.files)
