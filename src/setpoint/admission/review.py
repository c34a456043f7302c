"""AdmissionReview v1: the request a webhook is sent and the checks on what it answers.

:func:`review` wraps an AdmissionRequest, encoded as Kubernetes does (the members Go
leaves out when empty are absent); :func:`parse_response` reads a webhook's answer
as Kubernetes' ``VerifyAdmissionResponse`` does, and raises :class:`InvalidResponse` with its
messages (``expected response.uid="a", got "b"``, ``webhook returned response.patch but not
response.patchType``, ``validating webhook may not return response.patch``, ...) for anything
else. Members are typed as Go decodes them: one of the wrong JSON type makes the answer
invalid (Go's ``json: cannot unmarshal ...``, so the webhook's ``failurePolicy`` decides);
an absent or ``null`` one is Go's zero value (no ``allowed``: not allowed). A patch is
decoded (base64) and parsed here; it is applied by the caller.

Invariant: never raises anything but :class:`InvalidResponse` on any bytes, whose message
quotes at most 256 characters of any value of the answer; the size of the body is bounded
by the caller (it never reaches here larger than the transport's limit); a patch value
nested deeper than an object may be (``decoding.MAX_DEPTH``) is invalid, so applying it
cannot exhaust the stack; what is kept of warnings and audit annotations is
bounded (:data:`MAX_WARNINGS`, :data:`MAX_ANNOTATIONS`, each value cut), and an audit
annotation key that Kubernetes would refuse (not a qualified name's name part) is dropped.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from setpoint.apimachinery import decoding, validation

API_VERSION: Final = "admission.k8s.io/v1"
#: warnings kept from one response, and the longest one (longer ones are cut)
MAX_WARNINGS: Final = 32
MAX_WARNING_BYTES: Final = 1024
#: audit annotations kept from one response, and the longest value (longer ones are cut)
MAX_ANNOTATIONS: Final = 32
MAX_ANNOTATION_BYTES: Final = 10 * 1024


class InvalidResponse(Exception):
    """A webhook's answer that is not a valid AdmissionReview response."""


@dataclass(slots=True)
class Response:
    allowed: bool
    code: int = 0
    message: str = ""
    reason: str = ""
    #: the JSON patch operations, when the webhook mutated
    patch: list[Any] | None = None
    warnings: list[str] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


#: AdmissionRequest members Go leaves out when empty (``json:",omitempty"``)
OMIT_EMPTY: Final = ("subResource", "requestSubResource", "name", "namespace")
#: and the requester's UserInfo members
OMIT_EMPTY_USER: Final = ("username", "uid", "groups", "extra")


def wire_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The request as Kubernetes encodes it: an empty ``subResource``, ``name``, ... is
    absent, not ``""`` (webhooks tell "no subresource" by its absence: kopf matches a
    handler without ``subresource=`` only to a request with none)."""
    out = {k: v for k, v in request.items() if not (k in OMIT_EMPTY and not v)}
    user = out.get("userInfo")
    if isinstance(user, Mapping):
        out["userInfo"] = {k: v for k, v in user.items()
                           if not (k in OMIT_EMPTY_USER and not v)}
    return out


def review(request: Mapping[str, Any]) -> bytes:
    return orjson.dumps({"apiVersion": API_VERSION, "kind": "AdmissionReview",
                         "request": wire_request(request)})


def _warnings(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _mistyped(value, "AdmissionResponse.response.warnings", "[]string")
    out: list[str] = []
    for w in value:
        if w is None:
            continue
        if not isinstance(w, str):
            raise _mistyped(w, "AdmissionResponse.response.warnings", "string")
        if w.strip() and len(out) < MAX_WARNINGS:
            text = " ".join(w[:MAX_WARNING_BYTES * 4].split())  # a header value is one line
            out.append(text[:MAX_WARNING_BYTES])
    return out


def _annotations(value: Any) -> dict[str, str]:
    """The audit annotations kept: as Kubernetes' ``checkKeyFormat``, only a key that makes
    ``<webhook>/<key>`` a qualified name (a name part: at most 63 characters, no ``/``);
    the others are dropped, as kube-apiserver drops them with a logged warning."""
    out: dict[str, str] = {}
    if value is None:
        return out
    if not isinstance(value, dict):
        raise _mistyped(value, "AdmissionResponse.response.auditAnnotations",
                        "map[string]string")
    for k, v in value.items():
        if v is not None and not isinstance(v, str):
            raise _mistyped(v, "AdmissionResponse.response.auditAnnotations", "string")
        if len(out) < MAX_ANNOTATIONS and isinstance(v, str) and "/" not in k \
                and not validation.is_qualified_name(k):
            out[k] = v[:MAX_ANNOTATION_BYTES]
    return out


def _status(value: Any, out: Response) -> None:
    """``response.status`` (a ``metav1.Status``) into ``out``: code, message and reason."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise _mistyped(value, "AdmissionResponse.response.status", "v1.Status")
    code = value.get("code")
    if code is not None:
        if isinstance(code, bool) or not isinstance(code, int) \
                or not -2**31 <= code < 2**31:
            raise _mistyped(code, "Status.response.status.code", "int32")
        out.code = code if 0 <= code < 1000 else 0
    for key, limit in (("message", MAX_WARNING_BYTES * 4), ("reason", 256)):
        text = value.get(key)
        if text is None:
            continue
        if not isinstance(text, str):
            raise _mistyped(text, f"Status.response.status.{key}",
                            "string" if key == "message" else "v1.StatusReason")
        setattr(out, key, text[:limit])


def _mistyped(value: Any, field: str, go_type: str) -> InvalidResponse:
    """Go's ``UnmarshalTypeError``: a member of the wrong JSON type makes the whole answer
    undecodable (so the webhook's ``failurePolicy`` decides), never a guess at its meaning."""
    return InvalidResponse(f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                           f"{field} of type {go_type}")


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {_text(orjson.dumps(value).decode(), 32)}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _text(value: Any, limit: int = 256) -> str:
    """What a message quotes of a value the webhook chose: at most ``limit`` characters."""
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def parse_response(body: bytes, uid: str, *, mutating: bool) -> Response:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise InvalidResponse(f"json: {e}") from None
    if not isinstance(doc, dict):
        raise InvalidResponse("json: cannot unmarshal into Go value of type "
                              "v1.AdmissionReview")
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != "AdmissionReview":
        raise InvalidResponse(
            f"expected webhook response of {API_VERSION}, Kind=AdmissionReview, got "
            f"{_text(doc.get('apiVersion'))}, Kind={_text(doc.get('kind'))}")
    resp = doc.get("response")
    if resp is None:
        raise InvalidResponse("webhook response was absent")
    if not isinstance(resp, dict):
        raise _mistyped(resp, "AdmissionReview.response", "v1.AdmissionResponse")
    got = resp.get("uid")
    if got != uid:
        raise InvalidResponse(f'expected response.uid="{uid}", got "{_text(got)}"')
    allowed = resp.get("allowed")
    if allowed is not None and not isinstance(allowed, bool):
        raise _mistyped(allowed, "AdmissionResponse.response.allowed", "bool")
    # absent, Go's zero value: the webhook did not allow the request
    out = Response(allowed is True, warnings=_warnings(resp.get("warnings")))
    _status(resp.get("status"), out)
    out.annotations = _annotations(resp.get("auditAnnotations"))
    patch, patch_type = resp.get("patch"), resp.get("patchType")
    if patch_type is not None and not isinstance(patch_type, str):
        raise _mistyped(patch_type, "AdmissionResponse.response.patchType", "v1.PatchType")
    if patch is not None and patch != "":
        if not mutating:
            raise InvalidResponse("validating webhook may not return response.patch")
        if patch_type is None or patch_type == "":
            raise InvalidResponse("webhook returned response.patch but not "
                                  "response.patchType")
        if patch_type != "JSONPatch":
            raise InvalidResponse(f'webhook returned invalid response.patchType of '
                                  f'"{_text(patch_type)}"')
        try:
            if not isinstance(patch, str):
                raise ValueError("not a string")
            ops = orjson.loads(base64.b64decode(patch, validate=True))
        except (ValueError, binascii.Error, orjson.JSONDecodeError) as e:
            raise InvalidResponse(f"illegal base64 or JSON in response.patch: {e}") \
                from None
        if not isinstance(ops, list):
            raise InvalidResponse("json: cannot unmarshal object into Go value of type "
                                  "jsonpatch.Patch")
        # the operations list, an operation, then a value no deeper than an object may be
        if decoding.too_deep(ops, decoding.MAX_DEPTH + 2) is not None:
            raise InvalidResponse(f"response.patch nests deeper than "
                                  f"{decoding.MAX_DEPTH} levels")
        out.patch = ops
    elif patch_type not in (None, ""):
        if not mutating:
            raise InvalidResponse("validating webhook may not return response.patchType")
        raise InvalidResponse("webhook returned response.patchType but not response.patch")
    return out
