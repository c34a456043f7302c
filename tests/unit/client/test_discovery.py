"""Discovery: ResourceRef paths, parsing resource lists, lookups, refresh on a miss."""

from __future__ import annotations

from typing import Any

import pytest

from setpoint.apimachinery import errors
from setpoint.client import discovery as disc

CM = disc.ResourceRef(group="", version="v1", resource="configmaps", kind="ConfigMap",
                      namespaced=True)
NS = disc.ResourceRef(group="", version="v1", resource="namespaces", kind="Namespace",
                      namespaced=False)
WIDGETS = disc.ResourceRef(group="example.com", version="v1", resource="widgets",
                           kind="Widget", namespaced=True)


@pytest.mark.parametrize(("ref", "kwargs", "path"), [
    (CM, {}, "/api/v1/configmaps"),
    (CM, {"namespace": "default"}, "/api/v1/namespaces/default/configmaps"),
    (CM, {"namespace": "a", "name": "b"}, "/api/v1/namespaces/a/configmaps/b"),
    (NS, {"namespace": "ignored", "name": "kube-system"}, "/api/v1/namespaces/kube-system"),
    (NS, {"name": "x", "subresource": "status"}, "/api/v1/namespaces/x/status"),
    (WIDGETS, {"namespace": "n", "name": "w", "subresource": "scale"},
     "/apis/example.com/v1/namespaces/n/widgets/w/scale"),
    (WIDGETS, {}, "/apis/example.com/v1/widgets"),
    (CM, {"namespace": "n", "name": "a b/c"}, "/api/v1/namespaces/n/configmaps/a%20b%2Fc"),
], ids=["all-namespaces", "collection", "item", "cluster-scoped", "cluster-subresource",
        "group-subresource", "group-all", "quoted"])
def test_paths(ref: disc.ResourceRef, kwargs: dict[str, Any], path: str) -> None:
    assert ref.path(**kwargs) == path


def test_path_misuse() -> None:
    with pytest.raises(ValueError, match="needs an object name"):
        CM.path(namespace="n", subresource="status")
    with pytest.raises(ValueError, match="must not be empty"):
        CM.path(namespace="n", name="")


def test_api_version() -> None:
    assert CM.api_version == "v1"
    assert WIDGETS.api_version == "example.com/v1"
    assert WIDGETS.list_kind == "WidgetList"


@pytest.mark.parametrize(("value", "expected"), [
    ("v1", ("", "v1")), ("apps/v1", ("apps", "v1")),
    ("example.com/v1beta1", ("example.com", "v1beta1")),
])
def test_parse_api_version(value: str, expected: tuple[str, str]) -> None:
    assert disc.parse_api_version(value) == expected


@pytest.mark.parametrize("value", ["", "a/b/c", "apps/"])
def test_parse_api_version_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="invalid apiVersion"):
        disc.parse_api_version(value)


# --- a scripted server -------------------------------------------------------------------


def resource(name: str, kind: str, namespaced: bool = True, **extra: Any) -> dict[str, Any]:
    return {"name": name, "singularName": extra.pop("singular", name.rstrip("s")),
            "namespaced": namespaced, "kind": kind, "verbs": ["get", "list"], **extra}


class FakeServer:
    """Answers discovery paths from a dict and counts requests."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {
            "/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                resource("configmaps", "ConfigMap", shortNames=["cm"]),
                resource("namespaces", "Namespace", False, shortNames=["ns"]),
                resource("namespaces/status", "Namespace", False),
                resource("events", "Event", shortNames=["ev"]),
            ]},
            "/apis": {"kind": "APIGroupList", "groups": [
                {"name": "events.k8s.io",
                 "versions": [{"groupVersion": "events.k8s.io/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"}},
                {"name": "example.com",
                 "versions": [{"groupVersion": "example.com/v1beta1", "version": "v1beta1"},
                              {"groupVersion": "example.com/v1", "version": "v1"}],
                 "preferredVersion": {"groupVersion": "example.com/v1", "version": "v1"}},
            ]},
            "/apis/events.k8s.io/v1": {"resources": [resource("events", "Event")]},
            "/apis/example.com/v1": {"resources": [
                resource("widgets", "Widget", shortNames=["wd"], categories=["all"]),
                resource("widgets/status", "Widget"),
                resource("widgets/scale", "Scale", group="autoscaling", version="v1"),
                resource("gadgets", "Gadget", False, shortNames=["cm"]),
            ]},
            "/apis/example.com/v1beta1": {"resources": [resource("widgets", "Widget")]},
        }
        self.requests: list[str] = []
        self.failing: dict[str, errors.ApiError] = {}

    async def get(self, path: str) -> Any:
        self.requests.append(path)
        if path in self.failing:
            raise self.failing[path]
        if path not in self.documents:
            raise errors.path_not_found()
        return self.documents[path]


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


async def test_resolve_reads_one_group_version(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    ref = await discovery.resolve("example.com/v1", "Widget")
    assert ref == disc.ResourceRef(
        group="example.com", version="v1", resource="widgets", kind="Widget", namespaced=True,
        subresources=frozenset({"status", "scale"}), verbs=frozenset({"get", "list"}),
        singular="widget", short_names=("wd",), categories=("all",))
    assert server.requests == ["/apis/example.com/v1"]
    await discovery.resolve("example.com/v1", "Gadget")
    assert server.requests == ["/apis/example.com/v1"]  # cached


async def test_resolve_core(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    ns = await discovery.resolve("v1", "Namespace")
    assert (ns.namespaced, ns.subresources) == (False, frozenset({"status"}))


async def test_resolve_refreshes_on_a_miss(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    await discovery.resolve("example.com/v1", "Widget")
    server.documents["/apis/example.com/v1"]["resources"].append(resource("things", "Thing"))
    ref = await discovery.resolve("example.com/v1", "Thing")
    assert ref.resource == "things"
    assert server.requests == ["/apis/example.com/v1"] * 2


async def test_resolve_unknown(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    with pytest.raises(disc.NoMatchError, match='no matches for kind "Nope" in version "v1"'):
        await discovery.resolve("v1", "Nope")
    assert server.requests == ["/api/v1"]  # fresh read, so no second try
    with pytest.raises(disc.NoMatchError, match=r"missing\.io/v1"):
        await discovery.resolve("missing.io/v1", "Thing")
    # a group version that appears later is found: the cached miss is refreshed
    server.documents["/apis/missing.io/v1"] = {"resources": [resource("things", "Thing")]}
    assert (await discovery.resolve("missing.io/v1", "Thing")).resource == "things"


async def test_resolve_does_not_hide_server_errors(server: FakeServer) -> None:
    server.failing["/api/v1"] = errors.ServiceUnavailable("down")
    with pytest.raises(errors.ServiceUnavailable):
        await disc.Discovery(server.get).resolve("v1", "ConfigMap")


@pytest.mark.parametrize(("name", "group", "version", "resource"), [
    ("configmaps", "", "v1", "configmaps"),
    ("configmap", "", "v1", "configmaps"),
    ("ConfigMap", "", "v1", "configmaps"),
    ("cm", "", "v1", "configmaps"),  # the core group wins a tie with example.com
    ("wd", "example.com", "v1", "widgets"),
    ("widgets", "example.com", "v1", "widgets"),  # the preferred version
    ("widgets.example.com", "example.com", "v1", "widgets"),
    ("widgets.v1beta1.example.com", "example.com", "v1beta1", "widgets"),
    ("Widget", "example.com", "v1", "widgets"),
    ("events", "", "v1", "events"),
    ("events.events.k8s.io", "events.k8s.io", "v1", "events"),
    ("gadget", "example.com", "v1", "gadgets"),
    ("ns", "", "v1", "namespaces"),
], ids=lambda v: v or "core")
async def test_find(server: FakeServer, name: str, group: str, version: str,
                    resource: str) -> None:
    ref = await disc.Discovery(server.get).find(name)
    assert (ref.group, ref.version, ref.resource) == (group, version, resource)


async def test_find_loads_everything_once(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get, concurrency=1)
    await discovery.find("cm")
    first = sorted(server.requests)
    assert first == sorted(["/api", "/apis", "/api/v1", "/apis/events.k8s.io/v1",
                            "/apis/example.com/v1", "/apis/example.com/v1beta1"])
    await discovery.find("wd")
    await discovery.resolve("example.com/v1", "Widget")  # shares the cache
    assert sorted(server.requests) == first


async def test_find_refreshes_on_a_miss(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    await discovery.find("cm")
    server.documents["/apis"]["groups"].append(
        {"name": "new.io", "versions": [{"groupVersion": "new.io/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "new.io/v1", "version": "v1"}})
    server.documents["/apis/new.io/v1"] = {"resources": [resource("fresh", "Fresh")]}
    assert (await discovery.find("fresh")).group == "new.io"


async def test_find_unknown(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    with pytest.raises(disc.NoMatchError, match='doesn\'t have a resource type "nothing"'):
        await discovery.find("nothing")
    with pytest.raises(disc.NoMatchError):
        await discovery.find("widgets.v2.example.com")
    with pytest.raises(ValueError, match="must not be empty"):
        await discovery.find("")


async def test_failed_group_versions_are_skipped_and_reported(server: FakeServer) -> None:
    server.failing["/apis/events.k8s.io/v1"] = errors.ServiceUnavailable("metrics down")
    discovery = disc.Discovery(server.get)
    assert (await discovery.find("wd")).resource == "widgets"
    assert set(discovery.failed) == {"events.k8s.io/v1"}
    with pytest.raises(disc.NoMatchError, match=r"discovery failed for events.k8s.io/v1"):
        await discovery.find("events.events.k8s.io")


async def test_top_level_failure_raises(server: FakeServer) -> None:
    server.failing["/apis"] = errors.ServiceUnavailable("down")
    with pytest.raises(errors.ServiceUnavailable):
        await disc.Discovery(server.get).find("cm")


async def test_refresh_and_invalidate(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    await discovery.refresh()
    count = len(server.requests)
    assert [r.resource for r in await discovery.all()] == [
        "configmaps", "namespaces", "events", "events", "widgets", "gadgets"]
    assert len(server.requests) == count
    discovery.invalidate()
    await discovery.find("cm")
    assert len(server.requests) == 2 * count


async def test_resources_of_one_group_version(server: FakeServer) -> None:
    discovery = disc.Discovery(server.get)
    assert [r.kind for r in await discovery.resources("example.com/v1beta1")] == ["Widget"]
    assert await discovery.resources("nothing.io/v1") == ()


def test_concurrency_must_be_positive(server: FakeServer) -> None:
    with pytest.raises(ValueError, match="concurrency"):
        disc.Discovery(server.get, concurrency=0)


def test_matches_scores() -> None:
    ref = disc.ResourceRef(group="", version="v1", resource="configmaps", kind="ConfigMap",
                           namespaced=True, singular="configmap", short_names=("cm",))
    assert [ref.matches(n) for n in ("configmaps", "ConfigMap", "cm", "configmap", "x")] == \
        [3, 3, 2, 3, 0]
    no_singular = disc.ResourceRef(group="", version="v1", resource="things", kind="Thing",
                                   namespaced=True)
    assert no_singular.matches("thing") == 1
    assert no_singular.matches("") == 0
