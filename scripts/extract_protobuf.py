#!/usr/bin/env python3
"""Extract the protobuf messages of the built-in kinds from Kubernetes' sources into the data
file setpoint's protobuf decoder reads.

    python scripts/extract_protobuf.py --api DIR --apimachinery DIR \\
        --apiextensions-apiserver DIR --kubernetes-version v1.32.9 [--source TEXT] \\
        [--output PATH]

Each DIR is a checkout of that repository at the release named by ``--kubernetes-version``
(``k8s.io/api`` and its siblings are tagged ``v0.32.9`` for Kubernetes ``v1.32.9``). The output
(by default ``src/setpoint/apimachinery/kubernetes-protobuf.json``) holds, for every group
version of :data:`PACKAGES`, the kinds it registers and, for every message those kinds reach,
its fields: number, JSON name, type (a scalar, a message, or ``map<key,value>``) and the flags
the JSON shape needs, in the order Go's JSON encoding writes them. It records the release, the
source, the SHA-256 of every file read and the license of the material (Apache-2.0, the
Kubernetes Authors).

The protobuf definitions (``generated.proto``) give numbers and wire types; they do not say
how Go's ``encoding/json`` shows a value. That comes from the Go structs the ``.proto`` files are
generated from (``types.go`` and its neighbours), joined on the ``protobuf:"..."`` tag's field
number: the ``json:"..."`` name and its ``omitempty`` and ``inline`` options, and whether the
field is a pointer. Flags in the output: ``r`` repeated, ``o`` omitempty, ``p`` pointer, ``i``
inline (the message's members are the parent's). A message whose JSON is not an object has a
``form`` (:data:`FORMS`, and ``list`` for a named slice such as ``ExtraValue``).

To decode another group version, add its directory to :data:`PACKAGES` and run the script again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

#: the group versions whose kinds are decoded: (repository, directory)
PACKAGES = (
    ("api", "admissionregistration/v1"),
    ("api", "apps/v1"),
    ("api", "authentication/v1"),
    ("api", "authorization/v1"),
    ("api", "autoscaling/v1"),
    ("api", "batch/v1"),
    ("api", "certificates/v1"),
    ("api", "coordination/v1"),
    ("api", "core/v1"),
    ("api", "discovery/v1"),
    ("api", "events/v1"),
    ("api", "networking/v1"),
    ("api", "policy/v1"),
    ("api", "rbac/v1"),
    ("api", "scheduling/v1"),
    ("apiextensions-apiserver", "pkg/apis/apiextensions/v1"),
)

#: packages the kinds' messages use, read for their messages only
DEPENDENCIES = (
    ("apimachinery", "pkg/apis/meta/v1"),
    ("apimachinery", "pkg/runtime"),
    ("apimachinery", "pkg/runtime/schema"),
    ("apimachinery", "pkg/util/intstr"),
    ("apimachinery", "pkg/api/resource"),
)

REPOSITORIES = {"api": "k8s.io/api", "apimachinery": "k8s.io/apimachinery",
                "apiextensions-apiserver": "k8s.io/apiextensions-apiserver"}

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1."

#: messages whose Go type has its own JSON encoding (a MarshalJSON method), by what it is
FORMS = {
    META + "Time": "time",                   # RFC 3339, whole seconds; the zero time is null
    META + "MicroTime": "microtime",         # RFC 3339 with six fractional digits
    META + "Duration": "duration",           # Go's time.Duration text: "1h2m3.5s"
    META + "FieldsV1": "json",               # raw holds a JSON value
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "json",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.api.resource.QuantityValue": "quantity",
    APIEXTENSIONS + "JSON": "json",
    APIEXTENSIONS + "JSONSchemaPropsOrArray": "schemaorarray",
    APIEXTENSIONS + "JSONSchemaPropsOrBool": "schemaorbool",
    APIEXTENSIONS + "JSONSchemaPropsOrStringArray": "schemaorstringarray",
}

#: the meta/v1 kinds every group version knows (``metav1.AddToGroupVersion``'s optionsTypes)
OPTIONS_SOURCE = ("apimachinery", "pkg/apis/meta/v1", "register.go")

SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64", "uint32", "uint64", "sint32",
                     "sint64", "fixed32", "fixed64", "sfixed32", "sfixed64", "double", "float"})

OUTPUT = (Path(__file__).resolve().parents[1]
          / "src/setpoint/apimachinery/kubernetes-protobuf.json")


class ExtractError(Exception):
    """The sources are not what this script understands."""


# --- .proto --------------------------------------------------------------------------------------


@dataclass
class ProtoField:
    number: int
    name: str
    type: str  # a scalar, a full message name, or map<key,value>
    repeated: bool
    optional_comment: bool  # "+optional" in the comment above it


@dataclass
class ProtoMessage:
    name: str  # full name
    fields: list[ProtoField] = field(default_factory=list)


_PACKAGE = re.compile(r"^package ([\w.]+);", re.M)
_MESSAGE = re.compile(r"^message (\w+) \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^(optional|repeated|required) ([\w.]+) (\w+) = (\d+);$")
_MAP_FIELD = re.compile(r"^map<(\w+), ([\w.]+)> (\w+) = (\d+);$")


def _resolve(type_name: str, package: str) -> str:
    if type_name in SCALARS:
        return type_name
    if type_name.startswith("."):
        return type_name[1:]
    if "." in type_name:
        return type_name
    return f"{package}.{type_name}"


def parse_proto(text: str, where: str) -> tuple[str, list[ProtoMessage]]:
    """The package of a ``generated.proto`` and its messages, fields in file order."""
    match = _PACKAGE.search(text)
    if match is None:
        raise ExtractError(f"{where}: no package statement")
    package = match.group(1)
    messages = []
    for m in _MESSAGE.finditer(text):
        message = ProtoMessage(f"{package}.{m.group(1)}")
        comment: list[str] = []
        for raw_line in m.group(2).splitlines():
            line = raw_line.strip()
            if not line:
                comment = []
                continue
            if line.startswith("//"):
                comment.append(line)
                continue
            optional = any(c.strip("/ ") == "+optional" for c in comment)
            comment = []
            if f := _FIELD.match(line):
                message.fields.append(ProtoField(int(f.group(4)), f.group(3),
                                                 _resolve(f.group(2), package),
                                                 f.group(1) == "repeated", optional))
            elif f := _MAP_FIELD.match(line):
                message.fields.append(ProtoField(
                    int(f.group(4)), f.group(3),
                    f"map<{_resolve(f.group(1), package)},{_resolve(f.group(2), package)}>",
                    False, optional))
            elif line.startswith(("message ", "enum ", "oneof ")):
                raise ExtractError(f"{where}: {message.name}: nested {line.split()[0]} "
                                   "definitions are not understood")
            elif not line.startswith(("option ", "reserved ")):
                raise ExtractError(f"{where}: {message.name}: cannot read {line!r}")
        messages.append(message)
    return package, messages


# --- Go structs ----------------------------------------------------------------------------------


@dataclass
class GoField:
    go_name: str
    go_type: str
    json_name: str
    omitempty: bool
    inline: bool
    number: int | None  # from the protobuf tag


@dataclass
class GoTypes:
    structs: dict[str, list[GoField]] = field(default_factory=dict)
    slices: set[str] = field(default_factory=set)  # named slice types: type X []Y
    # types defined as another package's struct (type List metav1.List): name -> proto name
    aliases: dict[str, str] = field(default_factory=dict)


_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_EMPTY_STRUCT = re.compile(r"^type (\w+) struct ?\{\}$", re.M)
_NAMED_SLICE = re.compile(r"^type (\w+) \[\]\S+$", re.M)
_ALIAS = re.compile(r"^type (\w+) (\w+)\.(\w+)$", re.M)
_IMPORT = re.compile(r'^\s*(\w+) "(k8s\.io/[^"]+)"$', re.M)
_TAG = re.compile(r'(\w+):"([^"]*)"')


def parse_go(text: str, types: GoTypes) -> None:
    """Add the structs (their tagged fields, in order), named slices and aliases of a Go
    file."""
    imports = {name: path.replace("/", ".").replace("-", "_")
               for name, path in _IMPORT.findall(text)}
    for name, package, target in _ALIAS.findall(text):
        if package in imports:
            types.aliases[name] = f"{imports[package]}.{target}"
    for name in _EMPTY_STRUCT.findall(text):
        types.structs[name] = []
    for m in _STRUCT.finditer(text):
        fields = []
        for raw_line in m.group(2).splitlines():
            line = raw_line.strip()
            if not line or line.startswith("//") or "`" not in line:
                continue
            decl, _, rest = line.partition("`")
            tags = dict(_TAG.findall(rest.rpartition("`")[0]))
            parts = decl.split()
            if len(parts) == 1:  # embedded
                go_type = parts[0]
                go_name = go_type.lstrip("*").rpartition(".")[2]
            elif len(parts) == 2:
                go_name, go_type = parts
            else:
                continue  # not a field declaration this script understands (none carry tags)
            json_name, _, options = tags.get("json", "").partition(",")
            opts = options.split(",")
            inline = "inline" in opts or (len(parts) == 1 and not json_name)
            if not json_name and not inline:
                json_name = go_name
            number = None
            proto = tags.get("protobuf", "")
            if proto and proto != "-":
                bits = proto.split(",")
                if len(bits) > 1 and bits[1].isdigit():
                    number = int(bits[1])
            fields.append(GoField(go_name, go_type, json_name, "omitempty" in opts, inline,
                                  number))
        types.structs[m.group(1)] = fields
    types.slices.update(_NAMED_SLICE.findall(text))


# --- the tables ----------------------------------------------------------------------------------


def _flags(*, repeated: bool = False, omitempty: bool = False, pointer: bool = False,
           inline: bool = False) -> str:
    return ("r" if repeated else "") + ("o" if omitempty else "") + ("p" if pointer else "") + \
        ("i" if inline else "")


def _message_types(type_name: str) -> list[str]:
    if type_name.startswith("map<"):
        key, value = type_name[4:-1].split(",")
        return [t for t in (key, value) if t not in SCALARS]
    return [] if type_name in SCALARS else [type_name]


def build_message(message: ProtoMessage, go_of: dict[str, GoTypes],
                  warnings: list[str]) -> dict[str, object]:
    """One message of the output: its form (if not an object) and its fields."""
    package, _, short = message.name.rpartition(".")
    go = go_of.get(package)
    by_number = {f.number: f for f in message.fields}
    out: dict[str, object] = {}
    form = FORMS.get(message.name)
    struct = go.structs.get(short) if go is not None else None
    if struct is None and go is not None and short in go.aliases:
        target_package, _, target = go.aliases[short].rpartition(".")
        struct = go_of[target_package].structs.get(target) if target_package in go_of else None
    if form is None and go is not None and short in go.slices:
        form = "list"
        if [(f.number, f.repeated) for f in message.fields] != [(1, True)]:
            raise ExtractError(f"{message.name}: a named slice should be {{repeated items = 1}}")
    if form is not None:
        out["form"] = form
    rows: list[list[object]] = []
    if form is not None or struct is None:
        if form is None:
            warnings.append(f"{message.name}: no Go struct; JSON names and flags from the .proto")
        for f in message.fields:
            rows.append([f.number, f.name, f.type,
                         _flags(repeated=f.repeated, omitempty=f.optional_comment)])
    else:
        seen = set()
        for g in struct:
            if g.number is None:
                continue
            p = by_number.get(g.number)
            if p is None:
                raise ExtractError(f"{message.name}: Go field {g.go_name} has protobuf number "
                                   f"{g.number}, which the .proto does not define")
            go_repeated = g.go_type.lstrip("*").startswith("[]") and g.go_type != "[]byte"
            if p.repeated and not go_repeated and g.go_type.lstrip("*") not in go.slices:
                warnings.append(f"{message.name}.{p.name}: repeated in the .proto, "
                                f"Go type {g.go_type}")
            seen.add(g.number)
            rows.append([g.number, g.json_name, p.type,
                         _flags(repeated=p.repeated, omitempty=g.omitempty,
                                pointer=g.go_type.startswith("*"), inline=g.inline)])
        for p in message.fields:
            if p.number not in seen:
                raise ExtractError(f"{message.name}: field {p.name} = {p.number} has no Go field")
    out["fields"] = rows
    return out


def closure(messages: dict[str, ProtoMessage], roots: list[str]) -> list[str]:
    found: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in found:
            continue
        if name not in messages:
            raise ExtractError(f"message {name} is not defined in the sources")
        found.add(name)
        for f in messages[name].fields:
            pending.extend(_message_types(f.type))
    return sorted(found)


_GROUP_NAME = re.compile(r'^const GroupName = "([^"]*)"', re.M)
_KNOWN_TYPE = re.compile(r"^\s*&(\w+)\{\},", re.M)
_OPTIONS_TYPES = re.compile(r"^var optionsTypes = \[\]runtime\.Object\{\n(.*?)^\}", re.M | re.S)


@dataclass
class Sources:
    roots: dict[str, Path]
    inputs: dict[str, str] = field(default_factory=dict)  # path -> SHA-256

    def read(self, repository: str, path: str) -> str:
        file = self.roots[repository] / path
        try:
            raw = file.read_bytes()
        except OSError as e:
            raise ExtractError(f"cannot read {file}: {e.strerror}") from e
        self.inputs[f"{REPOSITORIES[repository]}/{path}"] = hashlib.sha256(raw).hexdigest()
        return raw.decode("utf-8")

    def go_files(self, repository: str, directory: str) -> list[str]:
        folder = self.roots[repository] / directory
        if not folder.is_dir():
            raise ExtractError(f"{folder} is not a directory")
        return sorted(p.name for p in folder.glob("*.go")
                      if not p.name.endswith("_test.go") and not p.name.startswith("zz_")
                      and not p.name.endswith(".pb.go"))


def extract(sources: Sources, warnings: list[str]) -> dict[str, object]:
    messages: dict[str, ProtoMessage] = {}
    go_of: dict[str, GoTypes] = {}  # proto package -> its Go types
    group_versions: dict[str, dict[str, object]] = {}
    for repository, directory in (*DEPENDENCIES, *PACKAGES):
        where = f"{REPOSITORIES[repository]}/{directory}/generated.proto"
        package, found = parse_proto(sources.read(repository, f"{directory}/generated.proto"),
                                     where)
        go = GoTypes()
        for name in sources.go_files(repository, directory):
            parse_go(sources.read(repository, f"{directory}/{name}"), go)
        go_of[package] = go
        for message in found:
            messages[message.name] = message
        if (repository, directory) in PACKAGES:
            register = sources.read(repository, f"{directory}/register.go")
            group = _GROUP_NAME.search(register)
            if group is None:
                raise ExtractError(f"{directory}/register.go: no GroupName")
            version = directory.rpartition("/")[2]
            kinds = sorted(set(_KNOWN_TYPE.findall(register)))
            for kind in kinds:
                if f"{package}.{kind}" not in messages:
                    raise ExtractError(f"{directory}: kind {kind} has no message")
            api_version = f"{group.group(1)}/{version}" if group.group(1) else version
            group_versions[api_version] = {"package": package, "kinds": kinds}
    options_source = sources.read(OPTIONS_SOURCE[0], f"{OPTIONS_SOURCE[1]}/{OPTIONS_SOURCE[2]}")
    options = _OPTIONS_TYPES.search(options_source)
    if options is None:
        raise ExtractError("meta/v1 register.go: no optionsTypes")
    option_kinds = sorted(_KNOWN_TYPE.findall(options.group(1)))
    roots = [f"{gv['package']}.{kind}" for gv in group_versions.values()
             for kind in gv["kinds"]]  # type: ignore[attr-defined]
    roots += [META + kind for kind in option_kinds]
    names = closure(messages, roots)
    table = {}
    for name in names:
        table[name] = build_message(messages[name], go_of, warnings)
    return {"groupVersions": dict(sorted(group_versions.items())),
            "optionKinds": {kind: META + kind for kind in option_kinds},
            "messages": table}


def render(document: dict[str, object]) -> str:
    """Indented at the top, one line per group version and per message (diffs stay small)."""
    lines = ["{"]
    items = list(document.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if key in ("groupVersions", "messages", "inputs") and isinstance(value, dict):
            lines.append(f" {json.dumps(key)}: {{")
            entries = list(value.items())
            for j, (name, entry) in enumerate(entries):
                inner = "," if j < len(entries) - 1 else ""
                lines.append(f"  {json.dumps(name)}: "
                             f"{json.dumps(entry, ensure_ascii=False, separators=(',', ':'))}"
                             f"{inner}")
            lines.append(f" }}{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for repository, module in REPOSITORIES.items():
        parser.add_argument(f"--{repository}", type=Path, required=True,
                            help=f"a checkout of {module} at the release")
    parser.add_argument("--kubernetes-version", required=True,
                        help="the release the sources are from, e.g. v1.32.9")
    parser.add_argument("--source", default=None,
                        help="where the sources were taken from (recorded in the output)")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)

    sources = Sources({r: getattr(args, r.replace("-", "_")) for r in REPOSITORIES})
    warnings: list[str] = []
    try:
        tables = extract(sources, warnings)
    except ExtractError as e:
        raise SystemExit(f"error: {e}") from None
    inputs = dict(sorted(sources.inputs.items()))
    manifest = "".join(f"{digest}  {path}\n" for path, digest in inputs.items())
    document: dict[str, object] = {
        "kubernetesVersion": args.kubernetes_version,
        "source": args.source or ", ".join(f"{module} (generated.proto, Go types, register.go)"
                                           for module in REPOSITORIES.values()),
        "sourceSha256": hashlib.sha256(manifest.encode()).hexdigest(),
        "copyright": "The Kubernetes Authors",
        "license": "Apache-2.0 (https://www.apache.org/licenses/LICENSE-2.0)",
        "generatedBy": "scripts/extract_protobuf.py",
        **tables,
        "inputs": inputs,
    }
    text = render(document)
    args.output.write_text(text, encoding="utf-8")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    messages = tables["messages"]
    kinds = sum(len(gv["kinds"]) for gv in tables["groupVersions"].values())  # type: ignore
    print(f"{kinds} kinds, {len(messages)} messages, {len(text)} bytes "  # type: ignore
          f"-> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
