"""lightkube, unchanged, against ``setpoint serve``: generic resources loaded from the CRDs,
server-side apply, patches, watch and deletecollection."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.clients.conftest import GROUP, eventually
from tests.conftest import ServeProcess

pytest.importorskip("lightkube", reason="lightkube is not installed")

from lightkube import AsyncClient, Client, KubeConfig
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import (
    async_load_in_cluster_generic_resources,
    get_generic_resource,
    load_in_cluster_generic_resources,
)
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import PatchType

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def kube(serve: ServeProcess, widgets: str) -> Iterator[Client]:
    with Client(config=KubeConfig.from_file(serve.kubeconfig), field_manager="lk-test") as c:
        yield c


@pytest.fixture(scope="module")
def widget_kind(kube: Client) -> Any:
    load_in_cluster_generic_resources(kube)
    kind = get_generic_resource(f"{GROUP}/v1", "Widget")
    assert kind is not None, "the Widget CRD was not loaded"
    return kind


def test_generic_resources_crud_and_patches(kube: Client, widget_kind: Any) -> None:
    created = kube.create(widget_kind(metadata=ObjectMeta(name="lk-a"), spec={"size": 1}),
                          namespace="default")
    assert created.metadata.uid
    got = kube.get(widget_kind, "lk-a", namespace="default")
    assert got.spec == {"size": 1}
    merged = kube.patch(widget_kind, "lk-a", {"spec": {"size": 2}}, namespace="default",
                        patch_type=PatchType.MERGE)
    assert merged.spec["size"] == 2
    # lightkube's default patch is strategic: custom resources answer 415
    with pytest.raises(ApiError) as strategic:
        kube.patch(widget_kind, "lk-a", {"spec": {"size": 3}}, namespace="default")
    assert strategic.value.status.code == 415
    status = kube.patch(widget_kind.Status, "lk-a", {"status": {"phase": "Ready"}},
                        namespace="default", patch_type=PatchType.MERGE)
    assert status.status == {"phase": "Ready"}
    with pytest.raises(ApiError) as missing:
        kube.get(widget_kind, "nope", namespace="default")
    assert missing.value.status.code == 404


def test_apply_is_server_side(kube: Client, widget_kind: Any) -> None:
    obj = widget_kind(metadata=ObjectMeta(name="lk-apply", labels={"team": "a"}),
                      spec={"size": 1, "ports": [{"name": "web", "port": 80}]})
    first = kube.apply(obj, namespace="default")
    assert first.metadata.managedFields[0].manager == "lk-test"
    assert first.metadata.managedFields[0].operation == "Apply"
    second = kube.apply(widget_kind(metadata=ObjectMeta(name="lk-apply"),
                                    spec={"size": 2, "ports": [{"name": "web", "port": 81}]}),
                        namespace="default")
    assert second.spec == {"size": 2, "ports": [{"name": "web", "port": 81}]}
    assert second.metadata.labels is None  # no longer applied, so removed
    other = widget_kind(metadata=ObjectMeta(name="lk-apply"), spec={"size": 5})
    with pytest.raises(ApiError) as conflict:
        kube.apply(other, namespace="default", field_manager="someone-else")
    assert conflict.value.status.code == 409
    assert conflict.value.status.reason == "Conflict"
    forced = kube.apply(other, namespace="default", field_manager="someone-else", force=True)
    assert forced.spec["size"] == 5
    cm = kube.apply(ConfigMap(metadata=ObjectMeta(name="lk-cm", namespace="default"),
                              data={"a": "1"}))
    assert cm.data == {"a": "1"}
    kube.delete(ConfigMap, "lk-cm", namespace="default")


def test_watch_replays_writes(kube: Client, widget_kind: Any) -> None:
    start = kube.list(widget_kind, namespace="default")
    list(start)
    rv = start.resourceVersion
    kube.create(widget_kind(metadata=ObjectMeta(name="lk-w"), spec={"size": 1}),
                namespace="default")
    kube.patch(widget_kind, "lk-w", {"spec": {"size": 2}}, namespace="default",
               patch_type=PatchType.MERGE)
    kube.delete(widget_kind, "lk-w", namespace="default")
    seen = []
    events = kube.watch(widget_kind, namespace="default", resource_version=rv)
    for op, obj in events:
        if obj.metadata.name == "lk-w":
            seen.append((op, obj.spec["size"]))
        if op == "DELETED" and obj.metadata.name == "lk-w":
            break
    events.close()  # type: ignore[attr-defined]
    assert seen == [("ADDED", 1), ("MODIFIED", 2), ("DELETED", 2)]


def test_deletecollection(kube: Client, widget_kind: Any) -> None:
    for i in range(3):
        kube.create(widget_kind(metadata=ObjectMeta(name=f"lk-many-{i}"), spec={"size": i}),
                    namespace="default")
    kube.deletecollection(widget_kind, namespace="default")
    assert list(kube.list(widget_kind, namespace="default")) == []


async def test_async_client(serve: ServeProcess, widgets: str) -> None:
    client = AsyncClient(config=KubeConfig.from_file(serve.kubeconfig), field_manager="lk-a")
    try:
        await async_load_in_cluster_generic_resources(client)
        kind = get_generic_resource(f"{GROUP}/v1", "Widget")
        assert kind is not None
        applied = await client.apply(kind(metadata=ObjectMeta(name="lk-async"),
                                          spec={"size": 1}), namespace="default")
        assert applied.spec == {"size": 1}
        names = [o.metadata.name async for o in client.list(kind, namespace="default")]
        assert "lk-async" in names
        await client.delete(kind, "lk-async", namespace="default")
    finally:
        await client.close()


def test_typed_pods_and_services(kube: Client) -> None:
    from lightkube.models.core_v1 import Container, PodSpec, ServicePort, ServiceSpec
    from lightkube.resources.core_v1 import Pod, Service

    created = kube.create(Pod(metadata=ObjectMeta(name="lk-pod", labels={"app": "lk"}),
                              spec=PodSpec(containers=[Container(name="app",
                                                                 image="python:3.12")])),
                          namespace="default")
    assert created.spec.dnsPolicy == "ClusterFirst"
    pods = list(kube.list(Pod, namespace="default", labels={"app": "lk"}))
    assert [p.metadata.name for p in pods] == ["lk-pod"]
    svc = kube.create(Service(metadata=ObjectMeta(name="lk-svc"),
                              spec=ServiceSpec(selector={"app": "lk"},
                                               ports=[ServicePort(port=80)])),
                      namespace="default")
    assert svc.spec.clusterIP
    assert svc.spec.ports[0].targetPort == 80
    kube.delete(Service, "lk-svc", namespace="default")
    kube.delete(Pod, "lk-pod", namespace="default")

    def gone() -> bool:  # a pod on a node ends gracefully: gone once its agent stopped it
        try:
            kube.get(Pod, "lk-pod", namespace="default")
        except ApiError as e:
            return e.status.code == 404
        return False
    eventually(gone, what="the pod to be gone")
