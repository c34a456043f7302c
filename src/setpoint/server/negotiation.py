"""Content negotiation: what the client accepts, and decoding what it sent.

Responses are JSON, in one of these shapes, chosen from the ``Accept`` header:

* ``Table`` (``application/json;as=Table;v=v1;g=meta.k8s.io``, v1beta1 too) for ``kubectl get``;
* ``APIGroupDiscoveryList`` (apidiscovery.k8s.io v2 / v2beta1) for aggregated discovery;
* ``PartialObjectMetadata`` / ``PartialObjectMetadataList`` (metadata-only clients);
* plain JSON otherwise. A client that accepts only protobuf gets 406.

Request bodies may be JSON, YAML, or the protobuf kubectl and client-go send for built-in kinds
(:func:`body_content_type`: any other Content-Type is a 415 before the body is read).
Bodies over :data:`MAX_BODY` get 413; undecodable ones 400, never a 500. JSON and YAML are
decoded by :mod:`setpoint.apimachinery.decoding`, protobuf by
:mod:`setpoint.apimachinery.protobuf` into the same JSON shape, each within its limits (nesting
depth, YAML alias expansion, numbers, protobuf fields), whose message the 400 carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from setpoint.apimachinery import decoding, errors, protobuf

MAX_BODY = 3 * 1024 * 1024

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"


@dataclass(frozen=True, slots=True)
class MediaType:
    type: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def as_(self) -> str:
        return self.params.get("as", "")

    @property
    def group(self) -> str:
        return self.params.get("g", "")

    @property
    def version(self) -> str:
        return self.params.get("v", "")


def parse_accept(header: str | None) -> list[MediaType]:
    """Media types in the order the client listed them (q-values respected when given)."""
    if not header:
        return [MediaType("*/*")]
    found: list[tuple[float, int, MediaType]] = []
    for i, item in enumerate(header.split(",")):
        pieces = [p.strip() for p in item.split(";")]
        if not pieces[0]:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for piece in pieces[1:]:
            if "=" not in piece:
                continue
            k, v = piece.split("=", 1)
            k, v = k.strip(), v.strip().strip('"')
            if k == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
            else:
                params[k] = v
        found.append((-q, i, MediaType(pieces[0].lower(), params)))
    found.sort(key=lambda t: (t[0], t[1]))
    return [m for q, _, m in found if q < 0] or [MediaType("*/*")]


def _is_json_like(m: MediaType) -> bool:
    return m.type in (JSON, "*/*", "application/*")


@dataclass(frozen=True, slots=True)
class Output:
    """The response shape chosen for a request."""

    kind: str  # "json", "table", "discovery", "partial"
    content_type: str = JSON
    version: str = ""


def choose(accept: list[MediaType], *, allow_table: bool = False,
           allow_discovery: bool = False, allow_partial: bool = False) -> Output:
    for m in accept:
        if m.as_ == "Table" and m.group == "meta.k8s.io" and m.version in ("v1", "v1beta1"):
            if allow_table and m.type == JSON:
                return Output("table", f"application/json;as=Table;v={m.version};g=meta.k8s.io",
                              m.version)
            continue
        if m.as_ == "APIGroupDiscoveryList" and m.group == "apidiscovery.k8s.io":
            if allow_discovery and m.type == JSON and m.version in ("v2", "v2beta1"):
                return Output("discovery", "application/json;g=apidiscovery.k8s.io;"
                              f"v={m.version};as=APIGroupDiscoveryList", m.version)
            continue
        if m.as_ in ("PartialObjectMetadata", "PartialObjectMetadataList") and \
                m.group == "meta.k8s.io":
            if allow_partial and m.type == JSON:
                return Output("partial", f"application/json;as={m.as_};v={m.version or 'v1'};"
                              "g=meta.k8s.io", m.version or "v1")
            continue
        if m.as_:
            continue
        if _is_json_like(m) or m.type in (YAML, "application/json;stream=watch"):
            return Output("json")
    raise errors.NotAcceptable(
        "only the following media types are accepted: application/json, application/yaml, "
        "application/json;as=Table;v=v1;g=meta.k8s.io")


def content_type_of(header: str | None) -> str:
    """The media type of a Content-Type header, without parameters; JSON when there is none
    (kube-apiserver decodes a body without Content-Type as its first media type, JSON)."""
    if not header:
        return JSON
    return header.split(";", 1)[0].strip().lower()


#: the media types a body may be sent as (kube-apiserver's, for built-in kinds)
BODY_TYPES = (JSON, YAML, PROTOBUF)
#: custom resources are not served as protobuf
CUSTOM_BODY_TYPES = (JSON, YAML)


def body_content_type(header: str | None, accepted: tuple[str, ...] = BODY_TYPES) -> str:
    """The media type of a request body, checked before anything is read or decoded.

    Anything but ``accepted`` is a 415 ``UnsupportedMediaType`` with Kubernetes' message: in
    particular the types a browser may send to any site without asking it first
    (``text/plain``, ``application/x-www-form-urlencoded``, ``multipart/form-data``), so that
    a web page cannot write to the server through its users' browsers.
    """
    content_type = content_type_of(header)
    if content_type not in accepted:
        raise errors.UnsupportedMediaType(
            "the body of the request was in an unknown format - accepted media types "
            "include: " + ", ".join(accepted))
    return content_type


#: the Content-Types whose bodies :func:`decode_body` reads as YAML (apply's included)
YAML_BODY_TYPES: Final = frozenset({YAML, "application/apply-patch+yaml", "application/x-yaml",
                                    "text/yaml"})


def decode_body(raw: bytes, content_type: str) -> Any:
    """Decode a request body; 400 for anything that is not valid in its declared type."""
    if len(raw) > MAX_BODY:
        raise errors.RequestEntityTooLarge("Request entity too large: limit is 3145728")
    if content_type == PROTOBUF:
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufError as e:
            raise errors.BadRequest(f"unable to decode protobuf body: {e}") from e
    if not raw.strip():
        raise errors.BadRequest("the request body is empty")
    if content_type in YAML_BODY_TYPES:
        try:
            return decoding.decode_yaml(raw)
        except decoding.DecodeError as e:
            raise errors.BadRequest(f"error converting YAML to JSON: {e}") from e
    try:
        return decoding.decode_json(raw)
    except decoding.DecodeError as e:
        raise errors.BadRequest(
            f"the body of the request was in an unknown format or could not be decoded "
            f"as JSON: {e}") from e
