"""ConversionReview (apiextensions.k8s.io v1 and v1beta1): the request a CRD's conversion
webhook is sent and the checks on what it answers.

:func:`review` wraps the objects to convert; :func:`parse_response` reads the answer as
Kubernetes' ``getConvertedObjectsFromResponse`` does (the review's apiVersion and kind, the
request's uid, ``result.status: Success``, or the result's message); :func:`check_converted`
checks one converted object against the object it was made of as ``webhook_converter.go``
does (an object of the desired apiVersion and the same kind, name, namespace and uid) and
then restores the original's metadata, keeping only the webhook's labels and annotations
(validated when they changed). Every failure is :class:`InvalidResponse` with Kubernetes'
words; the caller prefixes them with ``conversion webhook for <GVK> ...``.

Invariant: never raises anything but :class:`InvalidResponse` on any bytes; the body's size
is bounded by the caller (the transport's limit); an object nested deeper than
``decoding.MAX_DEPTH`` is invalid. The converted objects returned are the caller's own (fresh
from decoding), never shared with the originals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import orjson

from setpoint.apimachinery import decoding, validation
from setpoint.apimachinery.fields import FieldError, FieldPath
from setpoint.apimachinery.jsoncopy import deep_copy

Obj = dict[str, Any]

GROUP: Final = "apiextensions.k8s.io"
#: the review versions setpoint speaks, in its order of preference
SUPPORTED: Final = ("v1", "v1beta1")


class InvalidResponse(Exception):
    """An answer that is not a valid ConversionReview response (Kubernetes' words)."""


def choose_version(listed: Sequence[Any]) -> str | None:
    """The first of a CRD's ``conversionReviewVersions`` setpoint speaks, or ``None``."""
    for version in listed:
        if version in SUPPORTED:
            return str(version)
    return None


def review(review_version: str, uid: str, desired_api_version: str,
           objects: Sequence[Obj]) -> bytes:
    return review_of_encoded(review_version, uid, desired_api_version,
                             [orjson.dumps(o) for o in objects])


def review_of_encoded(review_version: str, uid: str, desired_api_version: str,
                      encoded: Sequence[bytes]) -> bytes:
    """:func:`review` of objects already encoded (each one JSON object)."""
    head = orjson.dumps({"apiVersion": f"{GROUP}/{review_version}", "kind": "ConversionReview",
                         "request": {"uid": uid, "desiredAPIVersion": desired_api_version}})
    # the request object's closing brace makes way for the objects
    return head[:-2] + b',"objects":[' + b",".join(encoded) + b"]}}"


def parse_response(body: bytes, review_version: str, uid: str) -> list[Any]:
    """The ``convertedObjects`` of a successful answer to the review ``uid``."""
    try:
        doc = decoding.decode_json(body)
    except decoding.DecodeError as e:
        raise InvalidResponse(str(e)) from None
    if not isinstance(doc, dict):
        raise InvalidResponse(f"json: cannot unmarshal {_json_kind(doc)} into Go value of "
                              f"type {review_version}.ConversionReview")
    expected = f"{GROUP}/{review_version}, Kind=ConversionReview"
    got = f"{doc.get('apiVersion', '')!s}, Kind={doc.get('kind', '')!s}"
    if got != expected:
        raise InvalidResponse(f"expected webhook response of {expected}, got {got}")
    resp = doc.get("response")
    if not isinstance(resp, dict):
        raise InvalidResponse("no response provided")
    got_uid = resp.get("uid")
    if got_uid != uid:
        raise InvalidResponse(f'expected response.uid="{uid}", got "{_text(got_uid)}"')
    result = resp.get("result")
    status = result.get("status") if isinstance(result, dict) else None
    if status != "Success":
        message = result.get("message") if isinstance(result, dict) else None
        if isinstance(message, str) and message:
            raise InvalidResponse(message[:4096])
        raise InvalidResponse(f"response.result.status was '{_text(status)}', not 'Success'")
    converted = resp.get("convertedObjects")
    if converted is None:
        return []
    if not isinstance(converted, list):
        raise InvalidResponse(f"json: cannot unmarshal {_json_kind(converted)} into Go "
                              f"struct field ConversionResponse.response.convertedObjects "
                              f"of type []runtime.RawExtension")
    return converted


def check_converted(original: Obj, converted: Any, desired_api_version: str,
                    index: int) -> Obj:
    """``converted`` (answer number ``index``) as the converted form of ``original``: checked
    and with ``original``'s metadata (the webhook's labels and annotations kept). The
    message names what is wrong after ``conversion webhook for <GVK> returned ...``."""
    if not isinstance(converted, dict):
        raise InvalidResponse(f"returned invalid converted object at index {index}: "
                              f"Object 'Kind' is missing in '{_excerpt(converted)}'")
    kind = converted.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidResponse(f"returned invalid converted object at index {index}: "
                              f"Object 'Kind' is missing in '{_excerpt(converted)}'")
    api_version = converted.get("apiVersion")
    if api_version != desired_api_version:
        raise InvalidResponse(
            f"returned invalid converted object at index {index}: invalid groupVersion "
            f"(expected {desired_api_version}, received {_text(api_version)})")
    if kind != original.get("kind"):
        raise InvalidResponse(
            f"returned invalid converted object at index {index}: invalid kind (expected "
            f"{_text(original.get('kind'))}, received {kind})")
    found = original.get("metadata")
    before: Obj = found if isinstance(found, dict) else {}
    answered = converted.get("metadata")
    after = answered if isinstance(answered, dict) else {}
    for what, key in (("name", "name"), ("namespace", "namespace"), ("UID", "uid")):
        e, a = before.get(key) or "", after.get(key) or ""
        if e != a:
            raise InvalidResponse(f"returned invalid converted object: must have the same "
                                  f"{what}: {_text(e)} != {_text(a)}")
    if answered is None:
        raise InvalidResponse(f"returned invalid metadata in object at index {index}: "
                              f"missing metadata in converted object")
    if not isinstance(answered, dict):
        raise InvalidResponse(f"returned invalid metadata in object at index {index}: "
                              f"invalid metadata of type {_go_type(answered)} in converted "
                              f"object")
    if decoding.too_deep(converted, decoding.MAX_DEPTH) is not None:
        raise InvalidResponse(f"returned invalid converted object at index {index}: the "
                              f"object is nested deeper than {decoding.MAX_DEPTH} levels")
    meta: Obj = deep_copy(before)
    for field in ("labels", "annotations"):
        problem = _restore(meta, answered, field)
        if problem:
            raise InvalidResponse(f"returned invalid metadata in object at index {index}: "
                                  f"{problem}")
    converted["metadata"] = meta
    return converted


def _restore(meta: Obj, answered: Obj, field: str) -> str | None:
    value = answered.get(field)
    if value is None:
        meta.pop(field, None)
        return None
    if not isinstance(value, dict):
        return f"invalid metadata.{field} of type {_go_type(value)} in converted object"
    original = meta.get(field)
    if original is not None and not isinstance(original, dict):
        return f"invalid metadata.{field} of type {_go_type(original)} in original object"
    original = original or {}
    changed = len(original) != len(value)
    for k, v in value.items():
        if not isinstance(v, str):
            return (f"metadata.{field}[{k}] must be a string, but is {_go_type(v)} in "
                    f"converted object")
        if original.get(k) != v:
            changed = True
    if changed:
        errs = validation.validate_labels(value, FieldPath.root("metadata", "labels")) \
            if field == "labels" else \
            validation.validate_annotations(value, FieldPath.root("metadata", "annotation"))
        if errs:
            return _aggregate(errs)
    meta[field] = value
    return None


def _aggregate(errs: list[FieldError]) -> str:
    """``field.ErrorList.ToAggregate().Error()``."""
    texts = [f"{e.field}: {e.message()}" for e in errs]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "null"
    return "object"


def _go_type(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "float64" if isinstance(value, float) else "int64"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return "<nil>"


def _text(value: Any) -> str:
    return "" if value is None else str(value)[:256]


def _excerpt(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()[:256]
    except TypeError:
        return str(value)[:256]
