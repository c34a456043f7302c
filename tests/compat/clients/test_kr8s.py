"""kr8s, unchanged, against ``setpoint serve``: get, create, patch and delete of custom
resources and ConfigMaps (kr8s discovers every group through legacy discovery first)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.compat.clients.conftest import GROUP, widget
from tests.conftest import ServeProcess

pytest.importorskip("kr8s", reason="kr8s is not installed")

import kr8s
from kr8s.objects import ConfigMap, new_class

pytestmark = pytest.mark.compat


@pytest.fixture(scope="module")
def api(serve: ServeProcess, widgets: str) -> Any:
    return kr8s.api(kubeconfig=str(serve.kubeconfig))


@pytest.fixture(scope="module")
def widget_class() -> Any:
    return new_class(kind="Widget", version=f"{GROUP}/v1", namespaced=True)


def test_version_is_parsed(api: Any) -> None:
    assert api.version()["minor"] == "32"


def test_custom_resources(api: Any, widget_class: Any) -> None:
    body = widget("kr-a", 1)
    body["metadata"]["namespace"] = "default"
    obj = widget_class(body, api=api)
    obj.create()
    assert obj.metadata.resourceVersion
    for kind in ("widgets", f"widgets.{GROUP}", "wd", widget_class):
        names = [o.name for o in api.get(kind, namespace="default")]
        assert "kr-a" in names, kind
    fetched = widget_class.get("kr-a", namespace="default", api=api)
    assert fetched.spec["size"] == 1
    obj.patch({"spec": {"size": 5}})
    assert obj.spec["size"] == 5
    obj.patch([{"op": "replace", "path": "/spec/size", "value": 6}], type="json")
    obj.refresh()
    assert obj.spec["size"] == 6
    obj.delete()
    assert not obj.exists()


def test_config_maps(api: Any) -> None:
    cm = ConfigMap({"metadata": {"name": "kr-cm", "namespace": "default"},
                    "data": {"a": "1"}}, api=api)
    cm.create()
    assert cm.raw["data"] == {"a": "1"}
    listed = [c.name for c in api.get("configmaps", namespace="default")]
    assert "kr-cm" in listed
    cm.patch({"data": {"b": "2"}})
    got = ConfigMap.get("kr-cm", namespace="default", api=api)
    assert got.raw["data"] == {"a": "1", "b": "2"}
    cm.delete()
    assert not cm.exists()
