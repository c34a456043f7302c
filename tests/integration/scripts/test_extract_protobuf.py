"""``scripts/extract_protobuf.py`` on a small source tree shaped like Kubernetes': messages
joined with their Go structs (JSON names, omitempty, pointers, inline, Go order), named slices,
kinds from register.go, the option kinds, provenance; and the tables it writes decode."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from setpoint.apimachinery import protobuf
from setpoint.apimachinery.prototables import Tables
from tests.protobuf_encoder import key, ld, varint

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "extract_protobuf.py"

META_PROTO = """\
syntax = "proto2";

package k8s.io.apimachinery.pkg.apis.meta.v1;

// ObjectMeta is metadata.
message ObjectMeta {
  // +optional
  optional string name = 1;

  // +optional
  optional Time created = 8;
}

message Time {
  optional int64 seconds = 1;

  optional int32 nanos = 2;
}

message DeleteOptions {
  // +optional
  optional int64 grace = 1;
}
"""

META_GO = """\
package v1

type ObjectMeta struct {
\t// Name is a name.
\tName string `json:"name,omitempty" protobuf:"bytes,1,opt,name=name"`
\tCreated Time `json:"created,omitempty" protobuf:"bytes,8,opt,name=created"`
}

type Time struct {
\ttime.Time `protobuf:"-"`
}

type DeleteOptions struct {
\tTypeMeta `json:",inline"`
\tGrace *int64 `json:"grace,omitempty" protobuf:"varint,1,opt,name=grace"`
}
"""

META_REGISTER = """\
package v1

var optionsTypes = []runtime.Object{
\t&DeleteOptions{},
}
"""

WIDGET_PROTO = """\
syntax = "proto2";

package k8s.io.api.widgets.v1;

import "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto";

message ExtraValue {
  repeated string items = 1;
}

message Handler {
  optional string command = 1;
}

message Widget {
  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;

  optional WidgetSpec spec = 2;
}

message WidgetSpec {
  optional int32 size = 1;

  optional bool paused = 2;

  map<string, ExtraValue> extra = 3;

  optional Handler handler = 4;

  repeated string tags = 5;

  optional string note = 6;
}
"""

WIDGET_GO = """\
package v1

import (
\tmetav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type Widget struct {
\tmetav1.TypeMeta `json:",inline"`
\tmetav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
\tSpec WidgetSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`
}

type WidgetSpec struct {
\tNote string `json:"note" protobuf:"bytes,6,opt,name=note"`
\tHandler `json:",inline" protobuf:"bytes,4,opt,name=handler"`
\tSize int32 `json:"size,omitempty" protobuf:"varint,1,opt,name=size"`
\tPaused *bool `json:"paused,omitempty" protobuf:"varint,2,opt,name=paused"`
\tExtra map[string]ExtraValue `json:"extra,omitempty" protobuf:"bytes,3,rep,name=extra"`
\tTags []string `json:"tags,omitempty" protobuf:"bytes,5,rep,name=tags"`
}

type Handler struct {
\tCommand string `json:"command,omitempty" protobuf:"bytes,1,opt,name=command"`
}

type ExtraValue []string
"""

WIDGET_REGISTER = """\
package v1

const GroupName = "widgets.example.com"

func addKnownTypes(scheme *runtime.Scheme) error {
\tscheme.AddKnownTypes(SchemeGroupVersion,
\t\t&Widget{},
\t)
\treturn nil
}
"""


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("extract_protobuf", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["extract_protobuf"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    module = load_script()
    monkeypatch.setattr(module, "PACKAGES", (("api", "widgets/v1"),))
    monkeypatch.setattr(module, "DEPENDENCIES", (("apimachinery", "pkg/apis/meta/v1"),))
    return module


def write_tree(root: Path, widget_go: str = WIDGET_GO) -> dict[str, Path]:
    files = {
        "apimachinery/pkg/apis/meta/v1/generated.proto": META_PROTO,
        "apimachinery/pkg/apis/meta/v1/types.go": META_GO,
        "apimachinery/pkg/apis/meta/v1/register.go": META_REGISTER,
        "apimachinery/pkg/apis/meta/v1/types_test.go": "package v1\n\ntype Ignored struct {\n}\n",
        "api/widgets/v1/generated.proto": WIDGET_PROTO,
        "api/widgets/v1/types.go": widget_go,
        "api/widgets/v1/register.go": WIDGET_REGISTER,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (root / "apiextensions-apiserver").mkdir()
    return {"api": root / "api", "apimachinery": root / "apimachinery",
            "apiextensions-apiserver": root / "apiextensions-apiserver"}


def run(script: ModuleType, dirs: dict[str, Path], out: Path) -> int:
    return int(script.main([
        "--api", str(dirs["api"]), "--apimachinery", str(dirs["apimachinery"]),
        "--apiextensions-apiserver", str(dirs["apiextensions-apiserver"]),
        "--kubernetes-version", "v1.32.9", "--output", str(out)]))


def test_extracts_messages_in_their_go_json_shape(script: ModuleType, tmp_path: Path) -> None:
    dirs = write_tree(tmp_path / "src")
    out = tmp_path / "tables.json"
    assert run(script, dirs, out) == 0
    data = json.loads(out.read_text())
    assert data["kubernetesVersion"] == "v1.32.9"
    assert "Apache-2.0" in data["license"]
    proto = dirs["api"] / "widgets/v1/generated.proto"
    assert data["inputs"]["k8s.io/api/widgets/v1/generated.proto"] == \
        hashlib.sha256(proto.read_bytes()).hexdigest()
    assert "k8s.io/apimachinery/pkg/apis/meta/v1/types_test.go" not in data["inputs"]
    assert data["groupVersions"] == {"widgets.example.com/v1": {
        "package": "k8s.io.api.widgets.v1", "kinds": ["Widget"]}}
    assert data["optionKinds"] == {
        "DeleteOptions": "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions"}
    messages = data["messages"]
    # the Go struct's order, its JSON names and flags
    assert messages["k8s.io.api.widgets.v1.WidgetSpec"]["fields"] == [
        [6, "note", "string", ""],
        [4, "", "k8s.io.api.widgets.v1.Handler", "i"],
        [1, "size", "int32", "o"],
        [2, "paused", "bool", "op"],
        [3, "extra", "map<string,k8s.io.api.widgets.v1.ExtraValue>", "o"],
        [5, "tags", "string", "ro"]]
    assert messages["k8s.io.api.widgets.v1.ExtraValue"] == {
        "form": "list", "fields": [[1, "items", "string", "r"]]}
    assert messages["k8s.io.apimachinery.pkg.apis.meta.v1.Time"]["form"] == "time"
    # the tables load and decode
    tables = Tables.from_document(data)
    spec = (key(1, 0) + varint(3) + key(2, 0) + varint(0) + ld(3, ld(1, "k") + ld(2, ld(1, "a")))
            + ld(4, ld(1, "run")) + ld(6, "hi"))
    body = protobuf.MAGIC + ld(1, ld(1, "widgets.example.com/v1") + ld(2, "Widget")) \
        + ld(2, ld(1, ld(1, "w")) + ld(2, spec))
    got = protobuf.decode(body, table=tables)
    assert got == {"apiVersion": "widgets.example.com/v1", "kind": "Widget",
                   "metadata": {"name": "w"},
                   "spec": {"note": "hi", "command": "run", "size": 3, "paused": False,
                            "extra": {"k": ["a"]}}}
    assert list(got["spec"]) == ["note", "command", "size", "paused", "extra"]


def test_a_go_field_the_proto_lacks_is_an_error(script: ModuleType, tmp_path: Path) -> None:
    go = WIDGET_GO.replace('\tTags []string `json:"tags,omitempty" protobuf:"bytes,5,rep,'
                           'name=tags"`',
                           '\tTags []string `json:"tags,omitempty" protobuf:"bytes,9,rep,'
                           'name=tags"`')
    dirs = write_tree(tmp_path / "src", go)
    with pytest.raises(SystemExit) as info:
        run(script, dirs, tmp_path / "out.json")
    assert "WidgetSpec: Go field Tags has protobuf number 9, which the .proto does not " \
           "define" in str(info.value)
    assert not (tmp_path / "out.json").exists()


def test_a_proto_field_without_a_go_field_is_an_error(script: ModuleType,
                                                       tmp_path: Path) -> None:
    go = WIDGET_GO.replace('\tNote string `json:"note" protobuf:"bytes,6,opt,name=note"`\n', "")
    dirs = write_tree(tmp_path / "src", go)
    with pytest.raises(SystemExit) as info:
        run(script, dirs, tmp_path / "out.json")
    assert "field note = 6 has no Go field" in str(info.value)


def test_a_missing_source_is_an_error(script: ModuleType, tmp_path: Path) -> None:
    dirs = write_tree(tmp_path / "src")
    (dirs["api"] / "widgets/v1/register.go").unlink()
    with pytest.raises(SystemExit) as info:
        run(script, dirs, tmp_path / "out.json")
    assert "register.go" in str(info.value)
