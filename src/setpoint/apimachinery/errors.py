"""API errors and their ``metav1.Status`` form.

The hierarchy, one class per Kubernetes ``reason`` that callers branch on::

    ApiError                      any failure the API reports (code, reason, message, details)
    ├── BadRequest                400
    ├── Unauthorized              401
    ├── Forbidden                 403
    ├── NotFound                  404
    ├── MethodNotAllowed          405
    ├── NotAcceptable             406
    ├── Conflict                  409  (stale resourceVersion, failed precondition)
    │   └── AlreadyExists         409
    ├── Gone / Expired            410  (resourceVersion or continue token too old)
    ├── RequestEntityTooLarge     413
    ├── UnsupportedMediaType      415
    ├── Invalid                   422  (field causes)
    ├── TooManyRequests           429
    ├── InternalError             500
    ├── ServiceUnavailable        503
    └── Timeout                   504

The server turns an ``ApiError`` into a Status response in exactly one place, and the client
parses a Status back into the same class (:func:`from_status`), so code on either side of the
wire catches the same exceptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from setpoint.apimachinery import fields

Status = dict[str, Any]


class ApiError(Exception):
    """A failure with an HTTP code and a Kubernetes ``reason``."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        retry_after: int | None = None,
        code: int | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after
        self._code = code
        self._reason = reason

    @property
    def status_code(self) -> int:
        return self._code if self._code is not None else self.code

    @property
    def status_reason(self) -> str:
        return self._reason if self._reason is not None else self.reason

    def status(self) -> Status:
        """The ``metav1.Status`` body, its keys in the order of the Go struct's fields (kind,
        apiVersion, metadata, status, message, reason, details, code), as Kubernetes encodes
        it: clients that compare error texts compare these bytes."""
        body: Status = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
        }
        if self.status_reason:
            body["reason"] = self.status_reason
        details = dict(self.details)
        if self.retry_after is not None:
            details.setdefault("retryAfterSeconds", self.retry_after)
        if details:
            body["details"] = details
        body["code"] = self.status_code
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.status_code}, {self.message!r})"


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(ApiError):
    code = 406
    reason = "NotAcceptable"


class Conflict(ApiError):
    code = 409
    reason = "Conflict"


class AlreadyExists(Conflict):
    reason = "AlreadyExists"


class Gone(ApiError):
    code = 410
    reason = "Gone"


class Expired(Gone):
    reason = "Expired"


class RequestEntityTooLarge(ApiError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(ApiError):
    code = 422
    reason = "Invalid"

    def __init__(self, message: str, *, details: Mapping[str, Any] | None = None,
                 errors: Iterable[fields.FieldError] = ()) -> None:
        super().__init__(message, details=details)
        self.errors = list(errors)


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"


class InternalError(ApiError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(ApiError):
    code = 503
    reason = "ServiceUnavailable"


class Timeout(ApiError):
    code = 504
    reason = "Timeout"


# --- constructors with Kubernetes' exact messages -------------------------------------------


def qualified(resource: str, group: str) -> str:
    """``books.example.com``; core resources have no suffix."""
    return f"{resource}.{group}" if group else resource


def _details(name: str, group: str, kind: str) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    return details


def not_found(resource: str, group: str, name: str) -> NotFound:
    return NotFound(f'{qualified(resource, group)} "{name}" not found',
                    details=_details(name, group, resource))


def path_not_found() -> NotFound:
    return NotFound("the server could not find the requested resource",
                    details={"causes": [{"reason": "UnexpectedServerResponse",
                                         "message": "404 page not found"}]})


def already_exists(resource: str, group: str, name: str) -> AlreadyExists:
    return AlreadyExists(f'{qualified(resource, group)} "{name}" already exists',
                         details=_details(name, group, resource))


def conflict(resource: str, group: str, name: str, reason: str | None = None) -> Conflict:
    why = reason or ("the object has been modified; please apply your changes to the "
                     "latest version and try again")
    return Conflict(
        f'Operation cannot be fulfilled on {qualified(resource, group)} "{name}": {why}',
        details=_details(name, group, resource))


#: field errors one 422 Status lists (in its message and its causes). Each names its value,
#: and is listed twice: 64,000 invalid finalizers (a 1.2 MB body) made a 43 MB Status, which
#: a few hundred requests in flight would multiply. Kubernetes lists them all; no real client
#: makes a thousand mistakes in one object
MAX_CAUSES = 1000


def invalid(kind: str, group: str, name: str,
            errors: Iterable[fields.FieldError]) -> Invalid:
    """422 with one cause per field error, in a deterministic order (the first
    :data:`MAX_CAUSES` of them, the message saying how many more there were)."""
    ordered = fields.sort_errors(errors)
    shown = ordered[:MAX_CAUSES]
    qualified_kind = f"{kind}.{group}" if group else kind
    if ordered:
        if len(ordered) == 1:
            summary = ordered[0].error()
        else:
            more = len(ordered) - len(shown)
            summary = "[" + ", ".join(e.error() for e in shown) \
                + (f", and {more} more errors" if more else "") + "]"
        message = f'{qualified_kind} "{name}" is invalid: {summary}'
    else:
        message = f'{qualified_kind} "{name}" is invalid'
    details = _details(name, group, kind)
    details["causes"] = [
        {"reason": e.type.reason, "message": e.message(), "field": e.field} for e in shown
    ]
    return Invalid(message, details=details, errors=shown)


def expired(message: str) -> Expired:
    return Expired(message)


def too_old_resource_version(requested: int, oldest: int) -> Expired:
    return Expired(f"too old resource version: {requested} ({oldest})")


def method_not_allowed(verb: str, resource: str, group: str) -> MethodNotAllowed:
    # Kubernetes quotes the kind with Go's %q, i.e. double quotes.
    return MethodNotAllowed(
        f'{verb} is not supported on resources of kind "{qualified(resource, group)}"'
        if resource else "the server does not allow this method on the requested resource",
        details=_details("", group, resource),
    )


def unsupported_patch_type(accepted: Iterable[str]) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted)
    )


def generic_invalid() -> Invalid:
    """The message Kubernetes gives for a JSON patch that cannot be applied (kopf needs 422)."""
    return Invalid("the server rejected our request due to an error in our request")


# --- client side ----------------------------------------------------------------------------

_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls
    for cls in (BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, NotAcceptable,
                Conflict, AlreadyExists, Gone, Expired, RequestEntityTooLarge,
                UnsupportedMediaType, Invalid, TooManyRequests, InternalError,
                ServiceUnavailable, Timeout)
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    406: NotAcceptable, 409: Conflict, 410: Gone, 413: RequestEntityTooLarge,
    415: UnsupportedMediaType, 422: Invalid, 429: TooManyRequests, 500: InternalError,
    503: ServiceUnavailable, 504: Timeout,
}


def from_status(status: Mapping[str, Any], http_code: int | None = None) -> ApiError:
    """Rebuild the exception a server raised from its Status body."""
    code = int(status.get("code") or http_code or 500)
    reason = str(status.get("reason") or "")
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or ApiError
    details = status.get("details") or {}
    retry_after = details.get("retryAfterSeconds") if isinstance(details, Mapping) else None
    message = str(status.get("message") or reason or f"HTTP {code}")
    error: ApiError
    if cls is Invalid:
        error = Invalid(message, details=details)
    else:
        error = cls(message, details=details, retry_after=retry_after)
    if error.status_code != code or (reason and error.status_reason != reason):
        error._code = code
        error._reason = reason or error.status_reason
    return error
