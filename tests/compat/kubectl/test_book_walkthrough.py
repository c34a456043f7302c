"""The custom-resource walkthrough, driven by the real kubectl through the kubeconfig only.

A v1beta1 CRD without validation keeps whatever a Book holds; one with validation and a
status subresource rejects a Book without author and title; an apiextensions.k8s.io/v1 CRD
does the same. ``kubectl proxy`` serves the REST API on a local port, read here with urllib.
"""

from __future__ import annotations

import json

import pytest

from tests.compat.conftest import MANIFESTS, Kubectl, Proxy, eventually, http_get

pytestmark = pytest.mark.compat

CRD = "customresourcedefinition/books.christianb93.github.com"
BOOKS = "/apis/christianb93.github.com/v1/namespaces/default/books"


def establish(kubectl: Kubectl, manifest: str) -> None:
    kubectl.apply(MANIFESTS / manifest)
    kubectl.run("wait", "--for=condition=Established", CRD, "--timeout=10s")


def delete_crd(kubectl: Kubectl, proxy: Proxy) -> None:
    kubectl.run("delete", CRD, "--timeout=20s")

    def gone() -> bool:
        groups = http_get(proxy.url + "/apis")["groups"]
        return all(g["name"] != "christianb93.github.com" for g in groups)

    eventually(gone)


def test_v1beta1_without_validation_keeps_anything(kubectl: Kubectl, proxy: Proxy) -> None:
    establish(kubectl, "crd-v1beta1.yaml")

    book_list = eventually(lambda: http_get(proxy.url + BOOKS))
    assert book_list["kind"] == "BookList"
    assert book_list["apiVersion"] == "christianb93.github.com/v1"
    assert book_list["metadata"]["resourceVersion"].isdigit()
    assert book_list["items"] == []

    kubectl.apply(MANIFESTS / "david-copperfield.yaml")
    out = kubectl.run("get", "book", "david-copperfield").stdout.splitlines()
    assert out[0].split() == ["NAME", "AGE"]
    assert out[1].split()[0] == "david-copperfield"
    assert out[1].split()[1].endswith("s")

    book = http_get(proxy.url + BOOKS + "/david-copperfield")
    meta = book["metadata"]
    assert len(meta["uid"]) == 36
    assert meta["resourceVersion"].isdigit()
    assert meta["generation"] == 1
    assert meta["creationTimestamp"].endswith("Z")
    applied = json.loads(meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert applied["spec"] == {"title": "David Copperfield", "author": "Charles Dickens"}
    assert book["spec"] == {"title": "David Copperfield", "author": "Charles Dickens"}

    kubectl.apply(MANIFESTS / "moby-dick.yaml")
    moby = http_get(proxy.url + BOOKS + "/moby-dick")
    assert moby["spec"] == {"foo": "bar"}

    delete_crd(kubectl, proxy)
    # deleting the CRD removed its objects
    result = kubectl.run("get", "books", check=False)
    assert result.returncode != 0


@pytest.mark.parametrize("manifest", ["crd-v1beta1-validation.yaml", "crd-v1.yaml"],
                         ids=["v1beta1", "v1"])
def test_validation_rejects_missing_fields(kubectl: Kubectl, proxy: Proxy,
                                           manifest: str) -> None:
    establish(kubectl, manifest)
    try:
        moby = str(MANIFESTS / "moby-dick.yaml")
        if manifest == "crd-v1.yaml":
            # a structural schema prunes spec.foo; kubectl's default strict validation makes
            # that an error of its own before the schema is checked, as Kubernetes does
            strict = kubectl.run("apply", "-f", moby, check=False)
            assert strict.returncode != 0
            assert 'strict decoding error: unknown field "spec.foo"' in strict.stderr
            rejected = kubectl.run("apply", "--validate=warn", "-f", moby, check=False)
        else:
            rejected = kubectl.run("apply", "-f", moby, check=False)
        assert rejected.returncode != 0
        assert 'The Book "moby-dick" is invalid' in rejected.stderr
        assert "spec.author: Required value" in rejected.stderr
        assert "spec.title: Required value" in rejected.stderr

        kubectl.apply(MANIFESTS / "david-copperfield.yaml")
        book = kubectl.json("get", "book", "david-copperfield")
        assert book["spec"]["author"] == "Charles Dickens"
        assert "status" not in book
        # the CRD advertises its status subresource
        resources = http_get(proxy.url + "/apis/christianb93.github.com/v1")["resources"]
        assert {r["name"] for r in resources} == {"books", "books/status"}
    finally:
        delete_crd(kubectl, proxy)
