"""The official ``kubernetes`` client, unchanged, against ``setpoint serve``.

CustomObjectsApi CRUD and a ``watch.Watch`` stream on a custom resource, CoreV1 ConfigMaps,
the dynamic client (server-side apply included) and the leader-election module on a Lease.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.clients.conftest import GROUP, eventually, widget
from tests.conftest import ServeProcess

kubernetes = pytest.importorskip("kubernetes", reason="the kubernetes client is not installed")

from kubernetes import client, config, dynamic, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def api(serve: ServeProcess) -> Iterator[Any]:
    api_client = config.new_client_from_config(config_file=str(serve.kubeconfig))
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def custom(api: Any, widgets: str) -> Any:
    return client.CustomObjectsApi(api)


def test_custom_objects_crud(custom: Any) -> None:
    created = custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                     widget("crud", 1))
    assert created["metadata"]["uid"]
    got = custom.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "crud")
    assert got["spec"] == {"size": 1}
    # a dict body is a merge patch
    patched = custom.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "crud",
                                                    {"spec": {"size": 2}})
    assert patched["spec"]["size"] == 2
    assert patched["metadata"]["generation"] == 2
    status = custom.patch_namespaced_custom_object_status(
        GROUP, "v1", "default", "widgets", "crud", {"status": {"phase": "Ready"}})
    assert status["status"] == {"phase": "Ready"}
    status["spec"]["size"] = 3
    replaced = custom.replace_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                       "crud", status)
    assert replaced["spec"]["size"] == 3
    listed = custom.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
    assert "crud" in [i["metadata"]["name"] for i in listed["items"]]
    everywhere = custom.list_cluster_custom_object(GROUP, "v1", "widgets")
    assert "crud" in [i["metadata"]["name"] for i in everywhere["items"]]
    deleted = custom.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "crud")
    assert deleted["status"] == "Success"
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(GROUP, "v1", "default", "widgets", "crud")
    assert missing.value.status == 404


def test_mismatched_patch_bodies_are_400(custom: Any) -> None:
    custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets", widget("mm"))
    ops = [{"op": "replace", "path": "/spec/size", "value": 5}]
    # a list body goes out as a merge patch unless the content type is given
    with pytest.raises(ApiException) as bad:
        custom.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets", "mm", ops)
    assert bad.value.status == 400
    fixed = custom.patch_namespaced_custom_object(
        GROUP, "v1", "default", "widgets", "mm", ops,
        _content_type="application/json-patch+json")
    assert fixed["spec"]["size"] == 5


def test_watch_stream_echoes_each_write(custom: Any) -> None:
    start = custom.list_namespaced_custom_object(GROUP, "v1", "default", "widgets")
    events: list[tuple[str, str, str]] = []
    w = watch.Watch()
    ready = threading.Event()

    def consume() -> None:
        ready.set()
        for event in w.stream(custom.list_namespaced_custom_object, GROUP, "v1", "default",
                              "widgets", resource_version=start["metadata"]["resourceVersion"],
                              timeout_seconds=20):
            meta = event["object"]["metadata"]
            events.append((event["type"], meta["name"], meta["resourceVersion"]))
            if event["type"] == "DELETED" and meta["name"] == "watched":
                w.stop()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    ready.wait()
    created = custom.create_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                     widget("watched"))
    patched = custom.patch_namespaced_custom_object(GROUP, "v1", "default", "widgets",
                                                    "watched", {"spec": {"size": 7}})
    custom.delete_namespaced_custom_object(GROUP, "v1", "default", "widgets", "watched")
    thread.join(timeout=20)
    assert not thread.is_alive()
    mine = [e for e in events if e[1] == "watched"]
    assert [e[0] for e in mine] == ["ADDED", "MODIFIED", "DELETED"]
    assert mine[0][2] == created["metadata"]["resourceVersion"]
    assert mine[1][2] == patched["metadata"]["resourceVersion"]
    assert int(mine[2][2]) > int(mine[1][2])


def test_config_map_crud(api: Any) -> None:
    core = client.CoreV1Api(api)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm", labels={"app": "x"}),
                              data={"a": "1"})
    created = core.create_namespaced_config_map("default", body)
    assert created.kind == "ConfigMap"
    assert created.metadata.managed_fields[0].manager == "OpenAPI-Generator"
    # a dict body to a core API is a strategic merge patch
    patched = core.patch_namespaced_config_map("cm", "default", {"data": {"b": "2"}})
    assert patched.data == {"a": "1", "b": "2"}
    read = core.read_namespaced_config_map("cm", "default")
    read.data["c"] = "3"
    replaced = core.replace_namespaced_config_map("cm", "default", read)
    assert replaced.data == {"a": "1", "b": "2", "c": "3"}
    listed = core.list_namespaced_config_map("default", label_selector="app=x")
    assert [c.metadata.name for c in listed.items] == ["cm"]
    json_patched = core.patch_namespaced_config_map(
        "cm", "default", [{"op": "remove", "path": "/data/a"}],
        _content_type="application/json-patch+json")
    assert json_patched.data == {"b": "2", "c": "3"}
    core.delete_namespaced_config_map("cm", "default")
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("cm", "default")
    assert missing.value.status == 404


def test_dynamic_client(api: Any, widgets: str) -> None:
    dyn = dynamic.DynamicClient(api)
    widgets_api = dyn.resources.get(api_version=f"{GROUP}/v1", kind="Widget")
    created = widgets_api.create(body=widget("dyn", 1), namespace="default")
    assert created.metadata.name == "dyn"
    patched = widgets_api.patch(body={"spec": {"size": 4}}, name="dyn", namespace="default",
                                content_type="application/merge-patch+json")
    assert patched.spec.size == 4
    assert [i.metadata.name for i in widgets_api.get(namespace="default").items].count(
        "dyn") == 1
    applied = widgets_api.server_side_apply(
        body=widget("dyn-ssa", 2, tags=["a"]), namespace="default", field_manager="dyn-test")
    assert applied.spec.tags == ["a"]
    assert applied.metadata.managedFields[0].manager == "dyn-test"
    conflicting = widget("dyn-ssa", 3)
    with pytest.raises(ApiException) as conflict:
        widgets_api.server_side_apply(body=conflicting, namespace="default",
                                      field_manager="other")
    assert conflict.value.status == 409
    forced = widgets_api.server_side_apply(body=conflicting, namespace="default",
                                           field_manager="other", force_conflicts=True)
    assert forced.spec.size == 3
    config_maps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cm = config_maps.create(body={"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "dyn-cm"}, "data": {"k": "v"}},
                            namespace="default")
    assert cm.data.k == "v"
    assert config_maps.get(name="dyn-cm", namespace="default").data.k == "v"
    config_maps.delete(name="dyn-cm", namespace="default")
    status = widgets_api.delete(name="dyn", namespace="default")
    assert status.status == "Success"


def test_leader_election_on_a_lease(api: Any, serve: ServeProcess) -> None:
    from kubernetes.leaderelection import electionconfig, leaderelection
    from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

    coordination = client.CoordinationV1Api(api)
    name = f"election-{uuid.uuid4().hex[:6]}"
    leading = {"a": threading.Event(), "b": threading.Event()}
    release = {"a": threading.Event(), "b": threading.Event()}
    stopped: list[str] = []

    def candidate(who: str) -> threading.Thread:
        lock = LeaseLock(name, "default", who)
        lock.api_instance = coordination

        def lead() -> None:
            leading[who].set()
            release[who].wait(30)
            raise RuntimeError(f"{who} steps down")

        cfg = electionconfig.Config(lock, lease_duration=6, renew_deadline=4, retry_period=1,
                                    onstarted_leading=lead,
                                    onstopped_leading=lambda: stopped.append(who))
        thread = threading.Thread(target=leaderelection.LeaderElection(cfg).run, daemon=True)
        thread.start()
        return thread

    a = candidate("a")
    assert leading["a"].wait(30)
    lease = coordination.read_namespaced_lease(name, "default")
    assert lease.spec.holder_identity == "a"
    assert lease.spec.lease_duration_seconds == 6
    b = candidate("b")
    # while a renews (two renewals seen after b started), b does not lead
    renewals: set[Any] = set()

    def renewed_twice() -> bool:
        spec = coordination.read_namespaced_lease(name, "default").spec
        assert spec.holder_identity == "a"
        renewals.add(spec.renew_time)
        return len(renewals) >= 3

    eventually(renewed_twice, timeout=30)
    assert not leading["b"].is_set(), "b led while a held the lease"
    release["a"].set()
    a.join(timeout=10)
    assert stopped == ["a"]
    assert leading["b"].wait(30)
    eventually(lambda: coordination.read_namespaced_lease(name, "default").spec.holder_identity
               == "b")
    release["b"].set()
    b.join(timeout=10)
    assert stopped == ["a", "b"]


def test_typed_pods_services_nodes_and_slices(api: Any) -> None:
    core = client.CoreV1Api(api)
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="typed", labels={"app": "typed"}),
                       # bound by the test below, not by the server's scheduler
                       spec=client.V1PodSpec(scheduler_name="by-hand", containers=[
                           client.V1Container(
                               name="app", image="python:3.12",
                               ports=[client.V1ContainerPort(container_port=8080)])]))
    created = core.create_namespaced_pod("default", pod)
    assert created.spec.restart_policy == "Always"
    assert created.status.phase == "Pending"
    binding = client.V1Binding(metadata=client.V1ObjectMeta(name="typed"),
                               target=client.V1ObjectReference(kind="Node", name="n1"))
    # the generated client cannot read the Status a binding answers (a known client issue:
    # it deserializes it as a V1Binding), so the call is made without deserializing
    response = core.create_namespaced_pod_binding("typed", "default", binding,
                                                  _preload_content=False)
    try:
        assert response.status == 201
        assert json.loads(response.data)["status"] == "Success"
    finally:
        response.release_conn()  # an unread response keeps its connection out of the pool
    listed = core.list_namespaced_pod("default", field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in listed.items] == ["typed"]
    marked = core.delete_namespaced_pod("typed", "default")
    assert marked.metadata.deletion_grace_period_seconds == 30
    core.delete_namespaced_pod("typed", "default", grace_period_seconds=0)
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("typed", "default")
    assert gone.value.status == 404
    svc = core.create_namespaced_service("default", client.V1Service(
        metadata=client.V1ObjectMeta(name="typed"),
        spec=client.V1ServiceSpec(selector={"app": "typed"}, type="NodePort",
                                  ports=[client.V1ServicePort(port=80, target_port=8080)])))
    assert svc.spec.cluster_ip
    assert svc.spec.ports[0].node_port
    assert core.read_namespaced_service("kubernetes", "default").spec.cluster_ip == "10.96.0.1"
    core.delete_namespaced_service("typed", "default")
    node = core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="typed-node"),
                                          spec=client.V1NodeSpec(unschedulable=True)))
    assert node.spec.unschedulable is True
    assert [n.metadata.name for n in core.list_node(
        field_selector="spec.unschedulable=true").items] == ["typed-node"]
    core.delete_node("typed-node")
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice("default")
    assert "kubernetes" in [s.metadata.name for s in slices.items]
