"""kube-apiserver's labels for a request: verbs (GET vs LIST vs WATCH, APPLY), scope, dry run."""

from __future__ import annotations

import pytest

from setpoint.server import metrics
from setpoint.server.request_info import parse

CM = "/api/v1/namespaces/default/configmaps"
W = "/apis/example.com/v1/widgets"


@pytest.mark.parametrize(("method", "path", "watch", "dry_run", "content_type", "expected"), [
    ("GET", CM + "/x", False, [], None, ("GET", "", "", "v1", "configmaps", "", "resource")),
    ("GET", CM, False, [], None, ("LIST", "", "", "v1", "configmaps", "", "namespace")),
    ("GET", W, False, [], None, ("LIST", "", "example.com", "v1", "widgets", "", "cluster")),
    ("GET", CM, True, [], None, ("WATCH", "", "", "v1", "configmaps", "", "namespace")),
    ("POST", CM, False, ["All"], "application/json",
     ("POST", "All", "", "v1", "configmaps", "", "resource")),
    ("PUT", CM + "/x", False, [], None, ("PUT", "", "", "v1", "configmaps", "", "resource")),
    ("PATCH", CM + "/x", False, [], "application/merge-patch+json",
     ("PATCH", "", "", "v1", "configmaps", "", "resource")),
    ("PATCH", CM + "/x", False, [], "application/apply-patch+yaml; charset=utf-8",
     ("APPLY", "", "", "v1", "configmaps", "", "resource")),
    ("PATCH", W + "/x/status", False, ["All", "All"], "application/apply-patch+yaml",
     ("APPLY", "All", "example.com", "v1", "widgets", "status", "resource")),
    ("DELETE", CM, False, ["bogus"], None,
     ("DELETE", "invalid", "", "v1", "configmaps", "", "namespace")),
    ("OPTIONS", CM, False, [], None, ("other", "", "", "v1", "configmaps", "", "namespace")),
])
def test_resource_labels(method: str, path: str, watch: bool, dry_run: list[str],
                         content_type: str | None, expected: metrics.Labels) -> None:
    ri = parse(path)
    assert ri is not None
    assert metrics.resource_labels(method, ri, watch=watch, dry_run=dry_run,
                                   content_type=content_type) == expected


def test_only_known_non_resource_paths_are_counted() -> None:
    assert metrics.non_resource_labels("GET", "/readyz") == (
        "GET", "", "", "", "", "/readyz", "")
    assert metrics.non_resource_labels("GET", "/apis/") == ("GET", "", "", "", "", "/apis", "")
    assert metrics.non_resource_labels("GET", "/some/random/thing") is None
    assert metrics.non_resource_labels("GET", "/readyz/etcd") is None


def test_storage_object_names_are_qualified() -> None:
    assert metrics.qualified_counts({("", "configmaps"): 2, ("example.com", "widgets"): 1}) == [
        ("configmaps", 2), ("widgets.example.com", 1)]
