"""Which container and which agent a pod's streaming request goes to."""

from __future__ import annotations

import pytest

from setpoint.apimachinery import errors
from setpoint.server.nodeproxy import node_endpoint, pick_container

POD = {"metadata": {"name": "web"},
       "spec": {"containers": [{"name": "app"}, {"name": "sidecar"}],
                "initContainers": [{"name": "setup"}]}}


def test_the_only_container_is_the_default() -> None:
    pod = {"metadata": {"name": "one"}, "spec": {"containers": [{"name": "c"}]}}
    assert pick_container(pod, "") == "c"


def test_several_containers_need_a_name_with_kube_apiservers_message() -> None:
    with pytest.raises(errors.BadRequest) as caught:
        pick_container(POD, "")
    assert str(caught.value) == ("a container name must be specified for pod web, choose one "
                                 "of: [app sidecar] or one of the init containers: [setup]")
    assert pick_container(POD, "setup") == "setup"
    with pytest.raises(errors.BadRequest, match="container nope is not valid for pod web"):
        pick_container(POD, "nope")


def test_the_agent_endpoint_comes_from_the_node_status() -> None:
    node = {"metadata": {"name": "n"}, "status": {
        "addresses": [{"type": "Hostname", "address": "n.lan"},
                      {"type": "InternalIP", "address": "10.1.2.3"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    assert node_endpoint(node) == ("10.1.2.3", 10250)
    with pytest.raises(errors.BadRequest, match='node "n" reports no agent endpoint'):
        node_endpoint({"metadata": {"name": "n"}, "status": {"addresses": []}})
