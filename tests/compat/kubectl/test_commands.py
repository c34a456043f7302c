"""Everyday kubectl commands against a v1 CRD (Book) and built-in kinds, each in a test."""

from __future__ import annotations

import json
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml

from tests.compat.conftest import MANIFESTS, Kubectl, eventually

pytestmark = pytest.mark.compat

CRD = "customresourcedefinition/books.christianb93.github.com"


@pytest.fixture(scope="module", autouse=True)
def books_crd(kubectl: Kubectl) -> Iterator[None]:
    kubectl.apply(MANIFESTS / "crd-v1.yaml")
    kubectl.run("wait", "--for=condition=Established", CRD, "--timeout=10s")
    yield
    kubectl.run("delete", CRD, "--timeout=30s", check=False)


def make_book(kubectl: Kubectl, name: str, **spec: object) -> None:
    body = {"apiVersion": "christianb93.github.com/v1", "kind": "Book",
            "metadata": {"name": name},
            "spec": {"title": name.title(), "author": "Anon", **spec}}
    kubectl.run("apply", "-f", "-", input=json.dumps(body))


def test_get_watch_shows_a_new_book(kubectl: Kubectl) -> None:
    cmd = ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "--cache-dir",
           str(kubectl.cache_dir), "get", "books", "-w"]
    make_book(kubectl, "watch-anchor")
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=kubectl.env) as watcher:
        assert watcher.stdout is not None
        lines = _collect(watcher.stdout)
        try:
            # the watch has started once kubectl printed the existing book (a book created
            # between its list and its watch still comes: the watch starts at the list's
            # resourceVersion)
            eventually(lambda: any("watch-anchor" in line for line in lines), 10)
            make_book(kubectl, "watched-book")
            eventually(lambda: any("watched-book" in line for line in lines), 10)
        finally:
            watcher.terminate()
            watcher.wait(timeout=10)


def _collect(stream: IO[str]) -> list[str]:
    """The lines of ``stream`` as a reader thread receives them (the thread ends with it)."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _finish(process: subprocess.Popen[str], log: list[str]) -> str:
    """Its standard output once ``process`` exits (20 s at most), which must be with 0
    (its standard error is ``log``'s reader's; its few lines of output fit the pipe)."""
    try:
        code = process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    assert code == 0, "".join(log)
    assert process.stdout is not None
    return process.stdout.read()


def _watching(lines: list[str]) -> bool:
    """kubectl's request log (``-v=6``) shows it has opened a watch."""
    return any("watch=true" in line for line in lines)


def test_delete_returns_once_gone(kubectl: Kubectl) -> None:
    make_book(kubectl, "doomed")
    result = kubectl.run("delete", "book", "doomed")
    assert 'book.christianb93.github.com "doomed" deleted' in result.stdout
    missing = kubectl.run("get", "book", "doomed", check=False)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr or "not found" in missing.stderr


def test_delete_waits_for_finalizers(kubectl: Kubectl) -> None:
    body = {"apiVersion": "christianb93.github.com/v1", "kind": "Book",
            "metadata": {"name": "held", "finalizers": ["example.com/hold"]},
            "spec": {"title": "Held", "author": "Anon"}}
    kubectl.run("apply", "-f", "-", input=json.dumps(body))
    with subprocess.Popen(
            ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "delete", "book", "held",
             "--timeout=30s", "-v=6"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=kubectl.env) as deleter:
        assert deleter.stderr is not None
        log = _collect(deleter.stderr)
        _delete_waits(kubectl, deleter, log)


def _delete_waits(kubectl: Kubectl, deleter: subprocess.Popen[str], log: list[str]) -> None:
    book = eventually(lambda: (lambda b: b if b["metadata"].get("deletionTimestamp") else None)(
        kubectl.json("get", "book", "held")))
    assert book["metadata"]["finalizers"] == ["example.com/hold"]
    # kubectl waits for the object on a watch: once it is open, kubectl has seen the object
    # still there and is waiting for it to go
    eventually(lambda: _watching(log), 20)
    assert deleter.poll() is None, "delete returned while a finalizer held the object"
    kubectl.run("patch", "book", "held", "--type=json",
                "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    assert "deleted" in _finish(deleter, log)


def test_wait_for_condition_after_status_patch(kubectl: Kubectl) -> None:
    make_book(kubectl, "waited")
    with subprocess.Popen(
            ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "wait",
             "--for=condition=Ready", "book/waited", "--timeout=30s", "-v=6"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=kubectl.env) as waiter:
        assert waiter.stderr is not None
        log = _collect(waiter.stderr)
        _wait_is_met(kubectl, waiter, log)
    # the printer column shows the condition
    row = kubectl.run("get", "book", "waited").stdout.splitlines()
    assert row[0].split() == ["NAME", "AUTHOR", "READY", "AGE"]
    assert row[1].split()[:3] == ["waited", "Anon", "True"]


def _wait_is_met(kubectl: Kubectl, waiter: subprocess.Popen[str], log: list[str]) -> None:
    # kubectl waits for the condition on a watch: once it is open, it has seen the book
    # without it
    eventually(lambda: _watching(log), 20)
    assert waiter.poll() is None
    status = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Shelved",
                                         "message": "on the shelf",
                                         "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    kubectl.run("patch", "book", "waited", "--subresource=status", "--type=merge",
                "-p", json.dumps(status))
    assert "condition met" in _finish(waiter, log)


def test_label_and_annotate(kubectl: Kubectl) -> None:
    make_book(kubectl, "labelled")
    kubectl.run("label", "book", "labelled", "shelf=top")
    kubectl.run("annotate", "book", "labelled", "note=first edition")
    book = kubectl.json("get", "book", "labelled")
    assert book["metadata"]["labels"] == {"shelf": "top"}
    assert book["metadata"]["annotations"]["note"] == "first edition"
    names = kubectl.run("get", "books", "-l", "shelf=top", "-o", "name").stdout.split()
    assert names == ["book.christianb93.github.com/labelled"]
    kubectl.run("label", "book", "labelled", "shelf-")
    assert "labels" not in kubectl.json("get", "book", "labelled")["metadata"] or \
        kubectl.json("get", "book", "labelled")["metadata"]["labels"] == {}


def test_patch_merge_and_json(kubectl: Kubectl) -> None:
    make_book(kubectl, "patched")
    kubectl.run("patch", "book", "patched", "--type=merge", "-p", '{"spec":{"pages":100}}')
    assert kubectl.json("get", "book", "patched")["spec"]["pages"] == 100
    kubectl.run("patch", "book", "patched", "--type=json",
                "-p", '[{"op":"replace","path":"/spec/pages","value":200}]')
    book = kubectl.json("get", "book", "patched")
    assert book["spec"]["pages"] == 200
    assert book["metadata"]["generation"] == 3
    # the default (strategic) patch is refused for custom resources, with kubectl's hint
    refused = kubectl.run("patch", "book", "patched", "-p", '{"spec":{"pages":1}}', check=False)
    assert refused.returncode != 0
    assert "is not supported by christianb93.github.com/v1, Kind=Book" in refused.stderr
    # a failing JSON-patch test is 422, reported by kubectl
    failed = kubectl.run("patch", "book", "patched", "--type=json",
                         "-p", '[{"op":"test","path":"/spec/pages","value":1}]', check=False)
    assert failed.returncode != 0
    # schema validation applies to patches too
    invalid = kubectl.run("patch", "book", "patched", "--type=merge",
                          "-p", '{"spec":{"pages":0}}', check=False)
    assert invalid.returncode != 0
    assert "spec.pages" in invalid.stderr


def test_replace(kubectl: Kubectl, tmp_path: Path) -> None:
    make_book(kubectl, "replaced")
    book = kubectl.json("get", "book", "replaced")
    book["spec"]["title"] = "Replaced Title"
    path = tmp_path / "book.json"
    path.write_text(json.dumps(book))
    kubectl.run("replace", "-f", str(path))
    assert kubectl.json("get", "book", "replaced")["spec"]["title"] == "Replaced Title"
    # the same (now stale) resourceVersion again is a conflict
    stale = kubectl.run("replace", "-f", str(path), check=False)
    assert stale.returncode != 0
    assert "the object has been modified" in stale.stderr


def test_edit_with_editor_script(kubectl: Kubectl, tmp_path: Path) -> None:
    make_book(kubectl, "edited")
    editor = tmp_path / "editor.sh"
    editor.write_text("#!/bin/sh\nsed -i 's/author: Anon/author: Edited Author/' \"$1\"\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    env = dict(kubectl.env, EDITOR=str(editor), KUBE_EDITOR=str(editor))
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubectl.kubeconfig), "edit", "book", "edited"],
        capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert kubectl.json("get", "book", "edited")["spec"]["author"] == "Edited Author"


def test_diff(kubectl: Kubectl, tmp_path: Path) -> None:
    make_book(kubectl, "diffed")
    body = kubectl.json("get", "book", "diffed")
    changed = {"apiVersion": body["apiVersion"], "kind": "Book",
               "metadata": {"name": "diffed"},
               "spec": {"title": "Diffed", "author": "Someone Else"}}
    path = tmp_path / "diffed.yaml"
    path.write_text(yaml.safe_dump(changed))
    result = kubectl.run("diff", "-f", str(path), check=False)
    assert result.returncode == 1, result.stderr  # 1 = differences found
    assert "+  author: Someone Else" in result.stdout
    assert "-  author: Anon" in result.stdout
    # diff is a dry run: nothing changed
    assert kubectl.json("get", "book", "diffed")["spec"]["author"] == "Anon"


def test_explain(kubectl: Kubectl) -> None:
    out = kubectl.run("explain", "book.spec").stdout
    assert "KIND:" in out
    assert "Book" in out
    assert "author" in out
    assert "Who wrote the book." in out
    assert "title" in out


def test_api_resources(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources").stdout
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "books" in rows
    assert "bk" in rows["books"]
    assert "Book" in rows["books"]
    for name in ("namespaces", "configmaps", "secrets", "events", "leases",
                 "customresourcedefinitions"):
        assert name in rows


def test_output_formats(kubectl: Kubectl) -> None:
    make_book(kubectl, "formatted", pages=321)
    as_yaml = yaml.safe_load(kubectl.run("get", "book", "formatted", "-o", "yaml").stdout)
    assert as_yaml["spec"]["pages"] == 321
    as_json = kubectl.json("get", "book", "formatted")
    assert as_json["metadata"]["name"] == "formatted"
    path = kubectl.run("get", "book", "formatted", "-o", "jsonpath={.spec.pages}").stdout
    assert path == "321"
    columns = kubectl.run("get", "book", "formatted", "-o",
                          "custom-columns=NAME:.metadata.name,PAGES:.spec.pages").stdout
    assert columns.split() == ["NAME", "PAGES", "formatted", "321"]
    by_short = kubectl.run("get", "bk", "formatted", "-o", "name").stdout.strip()
    assert by_short == "book.christianb93.github.com/formatted"


def test_describe(kubectl: Kubectl) -> None:
    make_book(kubectl, "described")
    out = kubectl.run("describe", "book", "described").stdout
    assert "Name:         described" in out
    assert "Kind:         Book" in out
    assert "Author:  Anon" in out


def test_builtin_kinds_with_protobuf_bodies(kubectl: Kubectl) -> None:
    kubectl.run("create", "namespace", "shelf")
    kubectl.run("create", "configmap", "settings", "-n", "shelf", "--from-literal=a=b")
    kubectl.run("create", "secret", "generic", "creds", "-n", "shelf",
                "--from-literal=password=s3cret")
    cm = kubectl.json("get", "configmap", "settings", "-n", "shelf")
    assert cm["data"] == {"a": "b"}
    secret = kubectl.json("get", "secret", "creds", "-n", "shelf")
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"password": "czNjcmV0"}
    ns = kubectl.json("get", "namespace", "shelf")
    assert ns["status"]["phase"] == "Active"
    out = kubectl.run("get", "configmap", "settings", "-n", "shelf").stdout.splitlines()
    assert out[0].split() == ["NAME", "DATA", "AGE"]
    assert out[1].split()[:2] == ["settings", "1"]
    # a ConfigMap apply goes through a strategic merge patch
    cm_body = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "applied", "namespace": "shelf"}, "data": {"x": "1"}}
    kubectl.run("apply", "-f", "-", input=json.dumps(cm_body))
    cm_body["data"] = {"x": "2", "y": "3"}
    kubectl.run("apply", "-f", "-", input=json.dumps(cm_body))
    assert kubectl.json("get", "configmap", "applied", "-n", "shelf")["data"] == {
        "x": "2", "y": "3"}


def test_errors_are_statuses(kubectl: Kubectl) -> None:
    missing = kubectl.run("get", "book", "no-such-book", check=False)
    assert missing.returncode != 0
    assert 'books.christianb93.github.com "no-such-book" not found' in missing.stderr
    dup = kubectl.run("create", "namespace", "default", check=False)
    assert dup.returncode != 0
    assert 'namespaces "default" already exists' in dup.stderr
    bad_name = {"apiVersion": "christianb93.github.com/v1", "kind": "Book",
                "metadata": {"name": "Not_A_Name"}, "spec": {"title": "x", "author": "y"}}
    bad = kubectl.run("create", "-f", "-", input=json.dumps(bad_name), check=False)
    assert bad.returncode != 0
    assert "metadata.name: Invalid value" in bad.stderr


def test_strict_field_validation_names_unknown_fields(kubectl: Kubectl) -> None:
    body = {"apiVersion": "christianb93.github.com/v1", "kind": "Book",
            "metadata": {"name": "strict"},
            "spec": {"title": "x", "author": "y", "colour": "red"}}
    strict = kubectl.run("create", "-f", "-", input=json.dumps(body), check=False)
    assert strict.returncode != 0
    assert 'unknown field "spec.colour"' in strict.stderr
    warned = kubectl.run("create", "--validate=warn", "-f", "-", input=json.dumps(body))
    assert 'unknown field "spec.colour"' in warned.stderr
    assert "colour" not in kubectl.json("get", "book", "strict")["spec"]
