"""Typed resources: a pydantic model becomes a structural CRD schema; typed objects keep
dict access; what a structural schema cannot say is refused with the field named."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from setpoint.cli.main import main as setpoint_main
from setpoint.runtime import Controller, Request
from setpoint.runtime.typed import (
    Model,
    Resource,
    SchemaError,
    crd_for,
    custom_resource,
    schema_of,
)
from tests.unit.runtime.typed_models import Queue, QueueSpec, QueueV2

HERE = Path(__file__).resolve().parent


def spec_schema() -> dict[str, Any]:
    return schema_of(Queue)["properties"]["spec"]


def test_fields_become_camel_case_properties_with_descriptions_defaults_and_bounds() -> None:
    props = spec_schema()["properties"]
    assert list(props) == ["name", "visibilityTimeout", "tier", "minDelay", "maxDelay",
                           "ratio", "tags", "owners", "redrive", "port", "extra"]
    assert props["visibilityTimeout"] == {
        "default": 30, "description": "Seconds a message stays invisible after a receive",
        "maximum": 43200, "minimum": 0, "type": "integer"}
    assert props["tier"]["enum"] == ["standard", "fifo"]
    assert props["tier"]["default"] == "standard"
    assert props["maxDelay"]["maximum"] == 901
    assert props["maxDelay"]["exclusiveMaximum"] is True
    assert props["ratio"]["exclusiveMinimum"] is True
    assert props["name"]["pattern"] == "^[a-zA-Z0-9_-]+$"
    assert spec_schema()["required"] == ["name"]


def test_unions_sets_any_and_nested_models_become_structural() -> None:
    props = spec_schema()["properties"]
    assert props["redrive"]["nullable"] is True
    assert props["redrive"]["type"] == "object"
    assert props["redrive"]["required"] == ["target"]
    assert props["port"] == {"default": 80, "x-kubernetes-int-or-string": True}
    assert props["owners"]["x-kubernetes-list-type"] == "set"
    assert "uniqueItems" not in props["owners"]
    assert props["extra"]["x-kubernetes-preserve-unknown-fields"] is True
    assert props["tags"]["additionalProperties"] == {"type": "string"}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            assert not {"$ref", "$defs", "title", "anyOf", "oneOf"} & set(node), node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema_of(Queue))


def test_cel_rules_and_the_crd_around_the_schema() -> None:
    rules = spec_schema()["x-kubernetes-validations"]
    assert rules[0] == {"rule": "self.minDelay <= self.maxDelay",
                        "message": "minDelay must not exceed maxDelay"}
    assert rules[1]["fieldPath"] == ".redrive.target"
    crd = crd_for(Queue, QueueV2)
    assert crd["metadata"]["name"] == "queues.sqs.example.com"
    assert crd["spec"]["names"] == {"plural": "queues", "singular": "queue", "kind": "Queue",
                                    "listKind": "QueueList", "shortNames": ["q"]}
    v1, v2 = crd["spec"]["versions"]
    assert (v1["name"], v1["storage"], v2["name"], v2["storage"]) == ("v1", True, "v2", False)
    assert v1["subresources"] == {"status": {}}
    assert "subresources" not in v2  # QueueV2 has no status field
    assert v1["additionalPrinterColumns"][1] == {"name": "Tier", "type": "string",
                                                 "jsonPath": ".spec.tier", "priority": 1}
    assert crd_for(Queue, QueueV2) == crd  # deterministic


def test_typed_objects_keep_dict_access_and_dump_to_api_objects() -> None:
    obj = {"apiVersion": "sqs.example.com/v1", "kind": "Queue",
           "metadata": {"name": "orders", "namespace": "shop", "resourceVersion": "7"},
           "spec": {"name": "orders", "visibilityTimeout": 45}}
    queue = Queue.from_object(obj)
    assert queue.spec.visibility_timeout == 45
    assert queue.spec.tier == "standard"
    assert (queue.name, queue.namespace) == ("orders", "shop")
    assert queue["spec"]["visibilityTimeout"] == 45  # the object as the server sent it
    assert queue.get("status") is None
    assert "spec" in queue
    assert queue.api_version_kind() == ("sqs.example.com/v1", "Queue")
    built = Queue(spec=QueueSpec(name="billing", max_delay=10),
                  metadata={"name": "billing"}).to_object()
    assert built["apiVersion"] == "sqs.example.com/v1"
    assert built["kind"] == "Queue"
    assert built["spec"]["maxDelay"] == 10
    assert "status" not in built  # None is left out
    with pytest.raises(ValidationError):
        Queue.from_object({"spec": {"name": "", "tier": "premium"}})


def test_a_typed_model_names_the_controllers_resource() -> None:
    async def reconcile(request: Request, ctx: Any) -> None:
        return None

    controller = Controller(for_=Queue, reconcile=reconcile).owns(QueueV2)
    assert controller.for_ == ("sqs.example.com/v1", "Queue")
    assert controller.watch_specs[1].resource == ("sqs.example.com/v2", "Queue")
    assert controller.model is Queue
    with pytest.raises(TypeError, match="not a typed resource model"):
        Controller(for_=dict, reconcile=reconcile)


def test_what_a_structural_schema_cannot_say_is_refused() -> None:
    class Node(Model):
        children: list[Node] = []

    @custom_resource(group="t.example.com", version="v1", kind="Tree")
    class Tree(Resource):
        spec: Node

    with pytest.raises(SchemaError, match="refers to itself"):
        schema_of(Tree)

    class Mixed(BaseModel):
        value: int | list[str]
        pair: tuple[int, str] = (1, "a")

    @custom_resource(group="t.example.com", version="v1", kind="Mix")
    class Mix(Resource):
        spec: Mixed

    with pytest.raises(SchemaError, match=r"Mix.spec.value: a union of integer, array"):
        schema_of(Mix)
    with pytest.raises(TypeError, match="not decorated"):
        crd_for(Resource)
    with pytest.raises(ValueError, match="domain name"):
        custom_resource(group="nodots", version="v1", kind="X")
    with pytest.raises(ValueError, match="CamelCase"):
        custom_resource(group="a.b", version="v1", kind="x")


def test_crd_generate_prints_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(HERE.parents[2])
    models = "tests/unit/runtime/typed_models.py"
    assert setpoint_main(["crd", "generate", f"{models}:Queue", f"{models}:QueueV2"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    assert printed == [crd_for(Queue, QueueV2)]
    out = tmp_path / "crd.yaml"
    assert setpoint_main(["crd", "generate", "tests.unit.runtime.typed_models:Queue",
                          "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text()) == crd_for(Queue)


@pytest.mark.parametrize(("target", "message"), [
    ("tests/unit/runtime/typed_models.py:Nothing", "has no Nothing"),
    ("tests/unit/runtime/typed_models.py:QueueSpec", "is not a setpoint.runtime.typed."
                                                      "Resource"),
    ("tests/unit/runtime/typed_models.py", "expected MODULE:Model"),
    ("no/such/file.py:Queue", "no such file"),
])
def test_crd_generate_errors_are_one_line(target: str, message: str,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(HERE.parents[2])
    assert setpoint_main(["crd", "generate", target]) == 2
    err = capsys.readouterr().err
    assert err.startswith("setpoint crd generate: error: ")
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert sys.modules.get("no") is None
